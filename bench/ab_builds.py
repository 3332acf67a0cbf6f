"""Tokens/s of one `gptc train` command with two gptc binaries (a change and
its baseline), or with one binary and two option sets, the two
alternating in short windows, best of each: the before/after figure of a
compiler change, measured in one run on this shared machine (whose speed
swings within a minute).

    python3 bench/ab_builds.py --a build/bin/gptc --b /tmp/gptc-old \\
        [--ranks 2] [--repeats 3] -- MODEL --mesh dp=2 --zero-stage 3 --steps 20
    python3 bench/ab_builds.py --a build/bin/gptc --b build/bin/gptc \\
        --a-extra=--zero-reduce=microbatch --ranks 2 -- MODEL ...

Everything after `--` is passed to `gptc train` (with --eval-interval 0
and a scratch checkpoint added); with --ranks N > 1 it runs under
mpirun. Prints each binary's best tok/s after the first step and a/b.
See docs/performance.md.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def rate(binary, mpirun, ranks, args):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [binary, "train"] + args + ["--eval-interval", "0",
                                          "--checkpoint", os.path.join(tmp, "c.ckpt")]
        if ranks > 1:
            cmd = [mpirun, "-np", str(ranks)] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr))
    m = re.search(r"([0-9.]+) tok/s after the first step", p.stderr)
    if not m:
        sys.exit("no tok/s in the output of %s:\n%s" % (" ".join(cmd), p.stderr))
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the changed gptc binary")
    ap.add_argument("--b", required=True, help="the baseline gptc binary")
    ap.add_argument("--a-extra", default="", help="options only a gets (space-separated)")
    ap.add_argument("--b-extra", default="", help="options only b gets (space-separated)")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mpirun", default="mpirun.mpich")
    ap.add_argument("train", nargs=argparse.REMAINDER)
    opts = ap.parse_args()
    args = opts.train[1:] if opts.train[:1] == ["--"] else opts.train
    if not args:
        sys.exit("ab_builds.py: give the gptc train arguments after --")
    best = {"a": 0.0, "b": 0.0}
    for _ in range(opts.repeats):
        for name in ("a", "b"):
            extra = getattr(opts, name + "_extra").split()
            best[name] = max(best[name], rate(getattr(opts, name), opts.mpirun,
                                              opts.ranks, args + extra))
    print("a %s %s: %.0f tok/s" % (opts.a, opts.a_extra, best["a"]))
    print("b %s %s: %.0f tok/s" % (opts.b, opts.b_extra, best["b"]))
    print("a/b: %.2fx" % (best["a"] / best["b"]))


if __name__ == "__main__":
    main()
