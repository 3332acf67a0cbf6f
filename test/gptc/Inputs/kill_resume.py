"""Kills a training run with SIGKILL mid-way and resumes it: the resumed
steps and the final parameters must equal an uninterrupted run's, bit for
bit.

usage: kill_resume.py GPTC MODEL DIR KILL_AFTER_STEP [MPIRUN -np N --mesh M]

The model's description checkpoints every step (checkpoint_interval: 1),
so the kill lands after some checkpoint; the resumed run continues from
whichever it is. Prints the step the run was killed after, the step it
resumed from, and compare_runs.py's line."""
import os
import re
import signal
import subprocess
import sys

gptc, model, out, kill_after = sys.argv[1:5]
launch = sys.argv[5:]  # e.g. mpirun.mpich -np 2 ... then --mesh
mesh = []
if "--mesh" in launch:
    i = launch.index("--mesh")
    mesh, launch = launch[i:i + 2], launch[:i]
ranks = int(launch[launch.index("-np") + 1]) if "-np" in launch else 1
steps = "12"
common = ["--steps", steps, "--eval-interval", "0"] + mesh


def train(name, *extra, log_interval="0"):
    return launch + [gptc, "train", model, "--log-interval", log_interval,
                     "--checkpoint", os.path.join(out, name + ".ckpt"),
                     "--dump-dir", os.path.join(out, name)] + common + \
        list(extra)


subprocess.run(train("whole"), check=True, capture_output=True)
# The run to kill: a progress line per step; SIGKILL to the whole process
# group (mpirun and its ranks) once step KILL_AFTER_STEP is printed.
proc = subprocess.Popen(train("killed", log_interval="1"),
                        stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
killed_after = None
for line in proc.stderr:
    m = re.match(r"step\s+(\d+)/", line)
    if m and int(m.group(1)) >= int(kill_after):
        killed_after = int(m.group(1))
        os.killpg(proc.pid, signal.SIGKILL)
        break
proc.wait()
if killed_after is None:
    sys.exit("the run ended before step %s" % kill_after)
resumed = subprocess.run(train("killed", "--resume"), capture_output=True,
                         text=True)
if resumed.returncode:
    sys.exit("resume failed:\n" + resumed.stderr)
m = re.search(r"gptc: resuming from .* at step (\d+)", resumed.stderr)
print("killed after step %d; resumed from step %s" %
      (killed_after, m.group(1) if m else "?"), flush=True)
compare = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "Parallel", "Inputs", "compare_runs.py")
sys.exit(subprocess.run([sys.executable, compare, os.path.join(out, "whole"),
                         os.path.join(out, "killed"), str(ranks), "--tol",
                         "0"]).returncode)
