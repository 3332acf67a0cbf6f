"""Makes one rank of a running `mpirun ... gptc train` fail and measures how
long the job takes to end.

usage: faults.py hang|dead RANK AFTER_STEP -- MPIRUN ... gptc train ...

Once the leader has printed step AFTER_STEP, rank RANK (found by the
PMI_RANK its launcher gave it) gets SIGSTOP (hang: alive, never answering)
or SIGKILL (dead). Prints every line the job wrote to stderr after that,
then "ended after N s with exit code C"; exits 1 when the job is still
running after 60 s (it is then killed)."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

mode, rank, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
command = sys.argv[sys.argv.index("--") + 1:]


def descendants(pid):
    """Every process below `pid`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except OSError:
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def rank_pid(pid, rank):
    for p in descendants(pid):
        try:
            with open("/proc/%d/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%d/comm" % p) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name == "gptc" and ("PMI_RANK=%s" % rank).encode() in env:
            return p
    return None


# The launcher reports on stdout, gptc on stderr: both, in one stream.
proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True,
                        start_new_session=True)
pids = {}
for line in proc.stdout:
    if line.startswith("gptc: processes: "):
        for r, pid in re.findall(r"rank (\d+) PID (\d+)", line):
            pids[int(pid)] = int(r)
    m = re.match(r"step\s+(\d+)/", line)
    if m and int(m.group(1)) >= after:
        break
else:
    sys.exit("the job ended before step %d" % after)
victim = rank_pid(proc.pid, rank)
if victim is None:
    os.killpg(proc.pid, signal.SIGKILL)
    sys.exit("no gptc process with PMI_RANK=%s" % rank)
os.kill(victim, signal.SIGSTOP if mode == "hang" else signal.SIGKILL)
start = time.monotonic()
print("rank %s: %s" % (rank, "stopped (SIGSTOP)" if mode == "hang"
                       else "killed (SIGKILL)"), flush=True)
rest = []
reader = threading.Thread(target=lambda: rest.extend(proc.stdout))
reader.start()
try:
    proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    print("still running after 60 s")
    sys.exit(1)
elapsed = time.monotonic() - start
reader.join()
for line in rest:
    if not re.match(r"step\s+\d+/", line):
        print(line.rstrip())
    # MPICH's launcher names a dead process by its PID; gptc's processes
    # line says which rank that is.
    m = re.search(r"=\s+PID (\d+) RUNNING AT", line)
    if m:
        print("the launcher's PID %s is rank %s" %
              (m.group(1), pids.get(int(m.group(1)), "?")))
print("ended after %d s with exit code %d" % (elapsed, proc.returncode))
print("within 30 s: %s" % ("yes" if elapsed < 30 else "NO"))
