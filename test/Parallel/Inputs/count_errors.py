"""Runs a failing command N times and counts the error messages of each run.

usage: count_errors.py N PATTERN -- COMMAND...

Prints the first run's output, then "N runs: each printed PATTERN once:
yes" (or the runs that printed it another number of times); exits 1 when
a run succeeds or any run printed it other than once."""
import re
import subprocess
import sys

n, pattern = int(sys.argv[1]), sys.argv[2]
command = sys.argv[sys.argv.index("--") + 1:]
bad, first = [], None
for i in range(n):
    run = subprocess.run(command, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if first is None:
        first = run.stdout
    count = len(re.findall(pattern, run.stdout))
    if run.returncode == 0 or count != 1:
        bad.append("run %d: exit %d, %d times:\n%s" % (i + 1, run.returncode,
                                                       count, run.stdout))
sys.stdout.write(first)
if bad:
    print("%d runs: %d printed it other than once" % (n, len(bad)))
    print("\n".join(bad))
    sys.exit(1)
print("%d runs: each printed %s once: yes" % (n, pattern))
