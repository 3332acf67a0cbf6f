"""Compares two --dump-dir steps.tsv tables' losses step by step, to a
relative tolerance. usage: same_losses_tsv.py A B TOL"""
import sys


def losses(path):
    rows = open(path).read().split("\n")[1:]
    return {int(r.split("\t")[0]): float(r.split("\t")[1]) for r in rows if r}


a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max((abs(a[s] - b[s]) / abs(a[s]) for s in a if s in b), default=0.0)
same = a and a.keys() == b.keys() and worst <= tol
print("%d steps: %s losses (largest relative difference %.1e)"
      % (len(a), "same" if same else "DIFFERENT", worst))
sys.exit(0 if same else 1)
