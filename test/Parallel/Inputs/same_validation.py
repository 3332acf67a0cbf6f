"""Compares the validation losses of two `gptc train` runs, step by step,
to a relative tolerance. usage: same_validation.py A B TOL

A and B are logs (the progress lines: 6 decimals at step 0, 4 after) or
--dump-dir directories (validation.tsv: 9 significant digits)."""
import os
import re
import sys


def losses(path):
    if os.path.isdir(path):
        rows = open(os.path.join(path, "validation.tsv")).read().split("\n")[1:]
        return {int(r.split("\t")[0]): float(r.split("\t")[1]) for r in rows if r}
    return {int(s): float(v) for s, v in re.findall(
        r"step\s+(\d+)/\d+ \| validation loss ([0-9.]+)", open(path).read())}


a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max((abs(a[s] - b[s]) / abs(a[s]) for s in a if s in b), default=0.0)
same = a.keys() == b.keys() and a and worst <= tol
print(f"validation: {len(a)} evaluations, largest relative difference "
      f"{worst:.1e}: {'same' if same else 'DIFFERENT'}")
sys.exit(0 if same else 1)
