#!/usr/bin/env python3
"""Checks the outputs of the all-reduce programs against NumPy sums.

    check_all_reduce.py DIR  (DIR/x<r>.npy inputs, DIR/out<r>/<i>.npy outputs)
"""
import sys

import numpy as np

d = sys.argv[1]
grid = [int(n) for n in sys.argv[2].split("x")]
ranks = int(np.prod(grid))
x = [np.load("%s/x%d.npy" % (d, r)) for r in range(ranks)]
coords = [np.unravel_index(r, grid) for r in range(ranks)]
# The groups of each output: output i reduces over sys.argv[3 + i] axes.
reductions = [[int(a) for a in s.split(",")] for s in sys.argv[3:]]
bad = 0
for r in range(ranks):
    for i, axes in enumerate(reductions):
        group = [q for q in range(ranks)
                 if all(coords[q][a] == coords[r][a] for a in range(len(grid)) if a not in axes)]
        want = sum(x[q] for q in group)
        got = np.load("%s/out%d/%d.npy" % (d, r, i))
        if not np.array_equal(got, want):
            bad += 1
            print("rank %d output %d: got %s, want %s" % (r, i, got, want))
print("all-reduce: %d ranks, %d outputs, %d wrong" % (ranks, len(reductions), bad))
