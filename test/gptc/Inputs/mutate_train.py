#!/usr/bin/env python3
"""Mutation test of `gptc train` / `gptc sample` flags and of checkpoints.

usage: mutate_train.py GPTC MODEL TMPDIR

Every invalid input must be refused: exit code 1 with a `gptc: error:` (or
a located `file:line:col: error:`) message. An invalid input that is
accepted (exit 0) fails the test, as does a crash (any other exit code), a
refusal without a message, or no answer in 60 s. Valid values of the same
flags must be accepted, so the test tells refusing from breaking.

Checkpoint mutations of a good checkpoint: bytes of a data file flipped,
data files and the manifest cut short, `latest` damaged, a format 2 file
flipped and cut (all must be refused); bytes of the manifest flipped
(refused, or accepted when the byte is one no check can see: a loss, the
description's text).
"""
import os
import random
import re
import shutil
import subprocess
import sys

# gptc's errors, located description errors, and LLVM's command-line
# parser's (a value of the wrong type, an unknown option).
LOCATED = re.compile(r"(gptc: error: |:\d+:\d+: error: |gptc: for the --\S+ "
                     r"option: |gptc: Unknown command line argument)")


def run(args, timeout=60):
    try:
        p = subprocess.run(args, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, "no answer in %d s" % timeout


def main():
    gptc, model, tmp = sys.argv[1:4]
    ck_tool = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "ckpt_tool.py")
    os.makedirs(tmp, exist_ok=True)
    runs = failures = 0

    def check(name, args, must_refuse=True):
        nonlocal runs, failures
        runs += 1
        code, err = run(args)
        refused = code == 1 and LOCATED.search(err)
        ok = refused or (code == 0 and not must_refuse)
        if not ok:
            failures += 1
            what = ("accepted" if code == 0 else
                    "crashed (exit %s)" % code if code not in (1, None) else
                    "no answer" if code is None else "refused without a message")
            print("FAIL %s: %s\n  %s\n%s" % (name, what, " ".join(args),
                                            err[-1500:]))

    ckpt = os.path.join(tmp, "flags.ckpt")
    base = [gptc, "train", model, "--steps", "2", "--eval-interval", "0",
            "--log-interval", "0", "--checkpoint", ckpt]
    empty = os.path.join(tmp, "empty.txt")
    open(empty, "w").close()
    invalid = {
        "--steps": ["0", "-5", "abc", "1.5", "99999999999999999999"],
        "--stop-at-step": ["0", "-1", "x"],
        "--eval-interval": ["-1", "ten"],
        "--log-interval": ["-3", ""],
        "--keep-checkpoints": ["-1", "x"],
        "--nan-policy": ["maybe", "STOPS", ""],
        "--collective-timeout": ["-1", "nan", "inf", "x"],
        "--mesh": ["tp=3", "dp=0", "dp=99999999999999999999", "garbage",
                   "dp=2,dp=2", "xx=2", "dp=2"],
        "--zero-stage": ["7", "-1", "one"],
        "--grad-accum": ["0", "-2"],
        "--recompute": ["sometimes", ""],
        "--data": ["/nonexistent/file", tmp, empty],
        "--val-data": ["/nonexistent/file", empty],
        "--inject-overflow": ["0", "x:y", "1:-1", "1:5"],
        "--device": ["tpu"],
        "--no-such-flag": ["1"],
    }
    valid = {
        "--steps": ["3"], "--stop-at-step": ["1"], "--eval-interval": ["0"],
        "--log-interval": ["1"], "--keep-checkpoints": ["0", "2"],
        "--nan-policy": ["skip", "stop"], "--collective-timeout": ["0", "5"],
        "--zero-stage": ["0"], "--grad-accum": ["2"],
        "--recompute": ["selective", "full", "none"],
    }
    for flag, values in invalid.items():
        for v in values:
            check("train %s=%r" % (flag, v), base + [flag + "=" + v])
    for flag, values in valid.items():
        for v in values:
            check("train %s=%r" % (flag, v), base + [flag + "=" + v],
                  must_refuse=False)

    # A good checkpoint, then its mutants.
    good = os.path.join(tmp, "good.ckpt")
    code, err = run(base[:-1] + [good])
    if code != 0:
        sys.exit("cannot make the checkpoint:\n" + err)
    sample = os.path.join(tmp, "sample.out")
    check("sample intact", [gptc, "sample", good, "--length", "4"],
          must_refuse=False)
    for flag, v in [("--temperature", "nan"), ("--temperature", "-1"),
                    ("--length", "-2"), ("--top-k", "-1"),
                    ("--temperature", "x")]:
        check("sample %s=%s" % (flag, v),
              [gptc, "sample", good, flag + "=" + v])
    step = os.path.join(good, open(os.path.join(good, "latest")).read().strip())
    data = os.path.join(step, "rank-00000.bin")
    manifest = os.path.join(step, "manifest.pb")
    rng = random.Random(12)
    bad = os.path.join(tmp, "bad.ckpt")

    def mutant(name, change, must_refuse=True, use_sample=False):
        shutil.rmtree(bad, ignore_errors=True)
        if os.path.isfile(bad):
            os.remove(bad)
        shutil.copytree(good, bad)
        change(os.path.join(bad, os.path.relpath(step, good)))
        args = ([gptc, "sample", bad, "--length", "4"] if use_sample else
                [gptc, "train", model, "--steps", "3", "--resume",
                 "--eval-interval", "0", "--log-interval", "0",
                 "--checkpoint", bad])
        check("checkpoint " + name, args, must_refuse)

    def flip(path, at):
        b = bytearray(open(path, "rb").read())
        b[at] ^= 0x5A
        open(path, "wb").write(b)

    def cut(path, n):
        b = open(path, "rb").read()
        open(path, "wb").write(b[:n])

    size = os.path.getsize(data)
    for k in range(10):
        at = rng.randrange(size)
        mutant("data flip@%d" % at,
               lambda d, at=at: flip(os.path.join(d, "rank-00000.bin"), at),
               use_sample=k % 2 == 1)
    for k in range(4):
        n = rng.randrange(size)
        mutant("data cut@%d" % n,
               lambda d, n=n: cut(os.path.join(d, "rank-00000.bin"), n))
    msize = os.path.getsize(manifest)
    for k in range(8):
        n = rng.randrange(msize)
        mutant("manifest cut@%d" % n,
               lambda d, n=n: cut(os.path.join(d, "manifest.pb"), n),
               use_sample=k % 2 == 1)
    for k in range(12):
        at = rng.randrange(msize)
        mutant("manifest flip@%d" % at,
               lambda d, at=at: flip(os.path.join(d, "manifest.pb"), at),
               must_refuse=False, use_sample=k % 2 == 1)
    for text in ["", "step-", "step-00000099", "../step-00000002", "x" * 300]:
        def latest(d, text=text):
            with open(os.path.join(os.path.dirname(d), "latest"), "w") as f:
                f.write(text)
        mutant("latest=%r" % text[:20], latest)
    # Format 2: one file.
    v2 = os.path.join(tmp, "v2.ckpt")
    subprocess.run([sys.executable, ck_tool, "to-format2", step, v2],
                   check=True)
    check("format 2 intact", [gptc, "sample", v2, "--length", "4"],
          must_refuse=False)
    v2size = os.path.getsize(v2)
    v2bad = os.path.join(tmp, "v2bad.ckpt")
    for k in range(6):
        shutil.copy(v2, v2bad)
        # Past the header (the description's text holds no checked bytes).
        at = rng.randrange(v2size // 4, v2size)
        flip(v2bad, at)
        check("format 2 flip@%d" % at, [gptc, "sample", v2bad, "--length", "4"])
    for k in range(4):
        shutil.copy(v2, v2bad)
        n = rng.randrange(v2size)
        cut(v2bad, n)
        check("format 2 cut@%d" % n, [gptc, "sample", v2bad, "--length", "4"])
    print("train mutants: %d runs, %d failed" % (runs, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
