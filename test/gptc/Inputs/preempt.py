"""Preempts a training run as a cluster does: SIGTERM once step STEP is
printed (to gptc, or under mpirun to every rank, as SLURM signals every
task). The run must finish the step it is in, checkpoint, say so and exit
75; `--resume` must then end with the uninterrupted run's losses and final
parameters, bit for bit.

usage: preempt.py GPTC MODEL DIR STEP [MPIRUN -np N --mesh M]

Prints the stop line, the exit status, the resumed step and compare_runs.py's
line. With `twice` as STEP's suffix (e.g. 3twice) a SIGINT follows the
SIGTERM at once: the run ends by whichever of the two is handled second,
without a stop line."""
import os
import re
import signal
import subprocess
import sys
import time

gptc, model, out, when = sys.argv[1:5]
twice = when.endswith("twice")
stop_at = int(when[:-5] if twice else when)
launch = sys.argv[5:]
mesh = []
if "--mesh" in launch:
    i = launch.index("--mesh")
    mesh, launch = launch[i:i + 2], launch[:i]
ranks = int(launch[launch.index("-np") + 1]) if "-np" in launch else 1
common = ["--steps", "40", "--eval-interval", "0"] + mesh


def train(name, *extra, log_interval="0"):
    return launch + [gptc, "train", model, "--log-interval", log_interval,
                     "--checkpoint", os.path.join(out, name + ".ckpt"),
                     "--dump-dir", os.path.join(out, name)] + common + \
        list(extra)


def unrouted_threads(pids):
    """(threads, what could take a stop signal in a handler): every thread
    of a gptc process is made with SIGTERM, SIGINT and SIGUSR1 blocked, and
    one of them, the router, takes them with sigwait (routeStopSignals,
    gptc/Runtime/Preemption.h); a process without one is named too."""
    want = sum(1 << (sig - 1) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1))
    count, bad, routers = 0, [], set()
    for pid in pids:
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for task in tasks:
            try:
                status = open("/proc/%d/task/%s/status" % (pid, task)).read()
            except OSError:
                continue
            try:
                wchan = open("/proc/%d/task/%s/wchan" % (pid, task)).read()
            except OSError:
                wchan = ""
            # The routing thread itself, in sigwait (which unblocks the
            # signals it waits for while it waits).
            if wchan.startswith("do_sigtimedwait"):
                routers.add(pid)
                continue
            count += 1
            blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.M).group(1), 16)
            if blocked & want != want:
                bad.append("%d/%s (%s)" % (pid, task, re.search(r"^Name:\s*(.*)", status,
                                                               re.M).group(1)))
    bad += ["PID %d has no routing thread" % pid for pid in pids if pid not in routers]
    return count, bad


proc = subprocess.Popen(train("stopped", log_interval="1"),
                        stderr=subprocess.PIPE, text=True)
pids = [proc.pid]
lines, sent = [], False
for line in proc.stderr:
    lines.append(line)
    m = re.match(r"gptc: processes: (.*)", line)
    if m:
        pids = [int(p) for p in re.findall(r"PID (\d+)", m.group(1))]
    m = re.match(r"step\s+(\d+)/", line)
    if m and int(m.group(1)) >= stop_at and not sent:
        sent = True
        threads, unrouted = unrouted_threads(pids)
        # (Two signals of one kind may merge while the first is pending:
        # the second is SIGINT.)
        for sig in ([signal.SIGTERM, signal.SIGINT] if twice else
                    [signal.SIGTERM]):
            for pid in pids:
                os.kill(pid, sig)
proc.wait()
if not sent:
    sys.exit("the run ended before step %d" % stop_at)
text = "".join(lines)
print("stop signals: blocked in all %d other threads" % threads if not unrouted else
      "stop signals: not blocked in %s" % ", ".join(unrouted), flush=True)
stopped = re.search(r"gptc: SIGTERM: stopped after step (\d+) of 40; "
                    r"continue with --resume", text)
print(stopped.group(0) if stopped else "no stop line", flush=True)
if twice:
    # Both signals may be pending together when the process next runs, and
    # Linux delivers the lower-numbered first (SIGINT), so either signal
    # may be the "second" one that ends the run.
    ended = {-signal.SIGTERM: "SIGTERM", -signal.SIGINT: "SIGINT"}
    print("ended by %s" % ("a stop signal" if proc.returncode in ended else
                           "exit status %d" % proc.returncode), flush=True)
    sys.exit(0)
print("exit status %d" % proc.returncode, flush=True)
resumed = subprocess.run(train("stopped", "--resume"), capture_output=True,
                         text=True)
if resumed.returncode:
    sys.exit("resume failed:\n" + resumed.stderr)
m = re.search(r"gptc: resuming from .* at step (\d+)", resumed.stderr)
print("resumed from step %s" % (m.group(1) if m else "?"), flush=True)
subprocess.run(train("whole"), check=True, capture_output=True)
compare = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "Parallel", "Inputs", "compare_runs.py")
sys.exit(subprocess.run([sys.executable, compare, os.path.join(out, "whole"),
                         os.path.join(out, "stopped"), str(ranks), "--tol",
                         "0"]).returncode)
