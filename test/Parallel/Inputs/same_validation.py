"""Compares the validation losses two `gptc train` logs print, step by
step, to a relative tolerance. usage: same_validation.py A B TOL"""
import re
import sys

def losses(path):
    return {int(s): float(v) for s, v in re.findall(
        r"step\s+(\d+)/\d+ \| validation loss ([0-9.]+)", open(path).read())}

a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max((abs(a[s] - b[s]) / abs(a[s]) for s in a if s in b), default=0.0)
same = a.keys() == b.keys() and a and worst <= tol
print(f"validation: {len(a)} evaluations, largest relative difference "
      f"{worst:.1e}: {'same' if same else 'DIFFERENT'}")
sys.exit(0 if same else 1)
