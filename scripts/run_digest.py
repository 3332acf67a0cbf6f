#!/usr/bin/env python3
"""A `--dump-dir` run reduced to what travels: each step's loss and, per
parameter, the norm of its final value and of its change over the run.
Compares GPT-2-sized runs between machines (scripts/gpu-check.sh), where
the dumps themselves (a gigabyte) cannot travel.

    run_digest.py DUMP_DIR > digest.json
    run_digest.py --compare REFERENCE.json RUN.json [--tol T] [--update-tol U]

The comparison checks every loss to T relative (default 1e-5), every final
norm to T and every change's norm to U (default 1e-3: AdamW normalizes
the gradient, so an update's size magnifies rounding), and prints one
summary line; exits 1 on any failure, naming it.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np


def digest(path):
    rows = [l.split("\t") for l in open(os.path.join(path, "steps.tsv")).read().split("\n")[1:] if l]
    out = {"losses": {r[0]: float(r[1]) for r in rows}, "params": {}}
    for final in sorted(glob.glob(os.path.join(path, "final.*.npy"))):
        name = os.path.basename(final)[len("final."):-len(".npy")]
        x = np.load(final).astype(np.float64)
        x0 = np.load(os.path.join(path, "param.%s.npy" % name)).astype(np.float64)
        out["params"][name] = [float(np.linalg.norm(x)), float(np.linalg.norm(x - x0))]
    return out


def compare(ref, run, tol, update_tol):
    failures = []
    rel = lambda a, b: abs(a - b) / max(abs(a), 1e-30)
    worst = [0.0, 0.0, 0.0]
    for step, loss in ref["losses"].items():
        if step not in run["losses"]:
            failures.append("step %s missing" % step)
            continue
        worst[0] = max(worst[0], rel(loss, run["losses"][step]))
        if rel(loss, run["losses"][step]) > tol:
            failures.append("step %s loss %g vs %g" % (step, loss, run["losses"][step]))
    for name, (norm, change) in ref["params"].items():
        if name not in run["params"]:
            failures.append("%s missing" % name)
            continue
        n2, c2 = run["params"][name]
        worst[1] = max(worst[1], rel(norm, n2))
        worst[2] = max(worst[2], rel(change, c2))
        if rel(norm, n2) > tol or rel(change, c2) > update_tol:
            failures.append("%s norm %g vs %g, change %g vs %g" % (name, norm, n2, change, c2))
    for f in failures[:10]:
        print("FAIL", f)
    print("digest: %d steps, %d parameters, loss %.2g, norm %.2g, change %.2g, %d failures" % (
        len(ref["losses"]), len(ref["params"]), worst[0], worst[1], worst[2], len(failures)))
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("paths", nargs="+")
    p.add_argument("--compare", action="store_true")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--update-tol", type=float, default=1e-3)
    a = p.parse_args()
    if a.compare:
        ref, run = (json.load(open(x)) for x in a.paths)
        sys.exit(compare(ref, run, a.tol, a.update_tol))
    json.dump(digest(a.paths[0]), sys.stdout, indent=1)


if __name__ == "__main__":
    main()
