"""Compares --emit=summary's "training memory per device" with what
`gptc train` measured training add to its peak resident memory ("training
added N bytes"). Prints one line; exits 1 beyond the tolerance.

usage: check_memory.py SUMMARY TRAIN_LOG TOLERANCE"""
import re
import sys

summary, log, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
predicted = int(re.search(r"training memory per device: (\d+) bytes",
                          open(summary).read()).group(1))
measured = int(re.search(r"training added (\d+) bytes",
                         open(log).read()).group(1))
ratio = predicted / measured
ok = abs(ratio - 1) <= tol
print(f"memory: predicted {predicted / 2**20:.1f} MiB, measured "
      f"{measured / 2**20:.1f} MiB, ratio {ratio:.2f}: "
      f"{'within' if ok else 'NOT within'} {tol:.0%}")
sys.exit(0 if ok else 1)
