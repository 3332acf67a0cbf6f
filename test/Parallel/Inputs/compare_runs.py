"""Compares a sharded `gptc train --dump-dir` run with the one-device run.

usage: compare_runs.py REFERENCE_DIR RUN_DIR RANKS [--replicas G] [--tol T] [--loss-tol L]

Steps are matched by number, so a run resumed from a checkpoint compares
the steps it ran.

Checks, and prints one summary line that the lit test matches:
  - every step's loss equals the reference's to T relative (default 1e-5,
    or L with --loss-tol);
  - every final parameter (gathered, `final.<name>.npy`) equals the
    reference's to T relative (norm of the difference over the norm), and
    no entry deviates by more than 10 T of the tensor's largest entry;
  - with --replicas G (ranks grouped G at a time hold the same blocks:
    the data-parallel replicas), the blocks `rank<r>.final.<name>.npy` of
    ranks that are replicas of each other are bit-identical; with
    --whole-replicas G, the same for the parameters those ranks hold whole
    (tensor-parallel ranks).
Exits 1 when any check fails, naming it.
"""
import argparse
import glob
import os
import sys

import numpy as np


def losses(path):
    """step -> (loss, gradient norm) from steps.tsv."""
    rows = [l.split("\t") for l in open(os.path.join(path, "steps.tsv")).read().split("\n")[1:] if l]
    return {int(r[0]): (float(r[1]), float(r[2])) for r in rows}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("reference")
    p.add_argument("run")
    p.add_argument("ranks", type=int)
    p.add_argument("--replicas", default="",
                   help="groups of ranks that must hold identical blocks, e.g. 0,1 or 0,2:1,3")
    p.add_argument("--whole-replicas", default="",
                   help="groups of ranks that must hold identical copies of the "
                        "parameters they hold whole (tensor-parallel ranks share "
                        "the norms, embeddings and row-parallel biases)")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--loss-tol", type=float, default=None,
                   help="the losses' tolerance, when tighter than --tol "
                        "(bf16 runs: losses average every position)")
    p.add_argument("--noise", default="attn.k_proj.bias",
                   help="parameters whose gradient is zero in exact arithmetic "
                        "(softmax ignores a shift of the scores, so the key "
                        "bias gets none): Adam turns their rounding noise into "
                        "lr-sized steps, so they are checked against that "
                        "bound instead of the reference")
    a = p.parse_args()
    failures = []

    # Steps are matched by number: a resumed run logs only its own.
    ref, run = losses(a.reference), losses(a.run)
    missing = [k for k in run if k not in ref]
    if not run or missing:
        failures.append("steps %s are not in the reference" % missing)
        loss_err = float("inf")
    else:
        loss_err = max(abs(run[k][0] - ref[k][0]) / abs(ref[k][0]) for k in run)
        if loss_err > (a.tol if a.loss_tol is None else a.loss_tol):
            failures.append("loss differs by %.3g relative" % loss_err)

    names = sorted(os.path.basename(f)[len("final."):-len(".npy")]
                   for f in glob.glob(os.path.join(a.reference, "final.*.npy")))
    if not names:
        failures.append("no final parameters in the reference")
    param_err = entry_err = 0.0
    padded = []
    for n in names:
        ref = np.load(os.path.join(a.reference, "final.%s.npy" % n))
        got = np.load(os.path.join(a.run, "final.%s.npy" % n))
        if got.shape[1:] == ref.shape[1:] and got.shape[0] > ref.shape[0]:
            # A vocabulary padded for tensor parallelism: the padding rows
            # must never have moved from zero.
            if np.any(got[ref.shape[0]:] != 0):
                failures.append("%s: padding rows are not zero" % n)
            padded.append(n)
            got = got[:ref.shape[0]]
        if ref.shape != got.shape:
            failures.append("%s: shape %s vs %s" % (n, got.shape, ref.shape))
            continue
        if a.noise and a.noise in n:
            # |AdamW step| <= lr (1 + a little) per step; lr <= 1e-3 here.
            bound = 1e-3 * 1.5 * max(len(ref), 1)
            if float(np.max(np.abs(got))) > bound:
                failures.append("%s exceeds the noise bound %.3g" % (n, bound))
            continue
        # Relative to the tensor's norm (the check), and the largest entry's
        # deviation relative to the largest entry (reported, bounded 10x
        # looser: AdamW turns rounding-level gradient differences into
        # lr-sized steps on entries whose gradient is near zero).
        diff = got.astype(np.float64) - ref
        err = float(np.linalg.norm(diff)) / max(float(np.linalg.norm(ref)), 1e-30)
        worst = float(np.max(np.abs(diff))) / max(float(np.max(np.abs(ref))), 1e-30)
        param_err = max(param_err, err)
        entry_err = max(entry_err, worst)
        if err > a.tol:
            failures.append("%s differs by %.3g relative (norm)" % (n, err))
        if worst > 10 * a.tol:
            failures.append("%s: an entry differs by %.3g of the largest" % (n, worst))
        if os.environ.get("COMPARE_VERBOSE"):
            print("  %-28s %.3g" % (n, err))

    identical = 0
    groups = [(g, False) for g in filter(None, a.replicas.split(":"))]
    groups += [(g, True) for g in filter(None, a.whole_replicas.split(":"))]
    for group, whole_only in groups:
        ranks = [int(r) for r in group.split(",")]
        for n in names:
            if whole_only and np.load(os.path.join(a.run, "rank%d.final.%s.npy" % (ranks[0], n))).shape \
                    != np.load(os.path.join(a.reference, "final.%s.npy" % n)).shape:
                continue
            blocks = [open(os.path.join(a.run, "rank%d.final.%s.npy" % (r, n)), "rb").read()
                      for r in ranks]
            if any(b != blocks[0] for b in blocks[1:]):
                failures.append("%s: ranks %s hold different bits" % (n, group))
            else:
                identical += 1

    print("compare: %d steps, %d parameters, loss %.2g, params %.2g (largest entry %.2g), %d replica sets bit-identical, %d failures"
          % (len(run), len(names), loss_err, param_err, entry_err, identical, len(failures)))
    if padded:
        print("padded and still zero: %s" % ", ".join(padded))
    for f in failures:
        print("  FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
