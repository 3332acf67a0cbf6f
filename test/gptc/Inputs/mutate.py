#!/usr/bin/env python3
"""Feeds mutated model descriptions to gptc and checks that every run ends
with success or with a located diagnostic, never with a crash.

Mutations of each seed file: truncation after every line, deletion of every
line, every integer replaced by extreme values, every float by NaN/inf/huge
values, and a deterministic set of byte flips.
"""
import os
import random
import re
import subprocess
import sys
import tempfile

EXTREME_INTS = ["0", "-1", "9223372036854775807", "-9223372036854775808",
                "99999999999999999999", "4294967296"]
EXTREME_FLOATS = ["nan", "inf", "-inf", "1e308", "-0.0", "1e-320"]
LOCATED = re.compile(r":\d+:\d+: error: ")


def mutations(text):
    lines = text.splitlines(keepends=True)
    for i in range(len(lines) + 1):
        yield "truncate@%d" % i, "".join(lines[:i])
    for i in range(len(lines)):
        yield "delete@%d" % i, "".join(lines[:i] + lines[i + 1:])
    for m in re.finditer(r"(?<=: )-?\d+(?=\s)", text):
        for v in EXTREME_INTS:
            yield "int@%d=%s" % (m.start(), v), text[:m.start()] + v + text[m.end():]
    for m in re.finditer(r"(?<=: )-?\d+\.\d*(e-?\d+)?|(?<=: )\d+e-?\d+", text):
        for v in EXTREME_FLOATS:
            yield "float@%d=%s" % (m.start(), v), text[:m.start()] + v + text[m.end():]
    rng = random.Random(1234)
    data = text.encode()
    for k in range(40):
        b = bytearray(data)
        for _ in range(1 + k % 4):
            b[rng.randrange(len(b))] = rng.randrange(256)
        yield "flip#%d" % k, b.decode("latin-1")


def main():
    gptc, seeds = sys.argv[1], sys.argv[2:]
    runs = failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mutant.pbtxt")
        for seed in seeds:
            with open(seed) as f:
                text = f.read()
            for name, mutant in mutations(text):
                with open(path, "w", encoding="latin-1") as f:
                    f.write(mutant)
                # --emit=summary imports the graph and runs the pipeline too.
                for emit in ("summary",):
                    runs += 1
                    try:
                        p = subprocess.run([gptc, path, "--emit=" + emit, "-o", os.devnull],
                                           capture_output=True, text=True, errors="replace",
                                           timeout=30)
                    except subprocess.TimeoutExpired:
                        failures += 1
                        print("FAIL %s %s --emit=%s: no answer in 30 s" % (
                            os.path.basename(seed), name, emit))
                        continue
                    ok = p.returncode == 0 or (p.returncode == 1 and LOCATED.search(p.stderr))
                    if not ok:
                        failures += 1
                        print("FAIL %s %s --emit=%s: exit %d\n%s" % (
                            os.path.basename(seed), name, emit, p.returncode, p.stderr[-2000:]))
    print("mutants: %d runs, %d failed" % (runs, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
