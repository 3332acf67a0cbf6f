#!/usr/bin/env python3
"""Compile time against depth: `gptc MODEL --emit=artifact` (the step
compiled to the CPU's artifact, its kernels included) and, where the CUDA
toolkit is installed, `--emit=cuda` (the kernels compiled for the GPU) for
GPT-2 124M (12 layers), 350M (24), 774M (36) and 1.5B (48). Kernels with
the same body, shapes and types are compiled once (docs/Architecture.md,
"Kernels"), so the time should stay nearly flat in depth: the target is
1.5B within 2x of 124M. Each figure is the best of --rounds wall-clock
runs, the models alternating (this machine's speed swings); --baseline
times another gptc binary in the same rounds, alternating with the first.

Usage: bench/compile_depth.py [--gptc build/bin/gptc] [--baseline OLD_GPTC]
                              [--rounds 3] [--cuda] [--json FILE]"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("gpt2-124m", 12), ("gpt2-350m", 24), ("gpt2-774m", 36),
          ("gpt2-1.5b", 48)]


def timed(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return elapsed, out.stdout


def distinct(gptc, model):
    """The generated kernels of @train_step and how many distinct ones."""
    _, out = timed([gptc, model, "--emit=kernels"])
    m = re.search(r"compiled: (\d+) distinct kernels for these (\d+)",
                  out.split("@train_step:")[1])
    return (int(m.group(2)), int(m.group(1))) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gptc", default=os.path.join(ROOT, "build/bin/gptc"))
    ap.add_argument("--baseline", help="another gptc to time alongside")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cuda", action="store_true",
                    help="also --emit=cuda (needs the CUDA toolkit)")
    ap.add_argument("--json")
    a = ap.parse_args()
    binaries = {"gptc": a.gptc}
    if a.baseline:
        binaries["baseline"] = a.baseline
    emits = ["artifact"] + (["cuda"] if a.cuda else [])
    out = os.path.join(tempfile.mkdtemp(), "out")
    best = {}
    for _ in range(a.rounds):
        for name, _layers in MODELS:
            model = os.path.join(ROOT, "models", name + ".pbtxt")
            for emit in emits:
                for who, gptc in binaries.items():
                    t, _ = timed([gptc, model, "--emit=" + emit, "-o", out])
                    key = (who, emit, name)
                    best[key] = min(best.get(key, float("inf")), t)
    rows = []
    for emit in emits:
        for who in binaries:
            base = best[(who, emit, MODELS[0][0])]
            for name, layers in MODELS:
                t = best[(who, emit, name)]
                kernels = distinct(binaries[who], os.path.join(
                    ROOT, "models", name + ".pbtxt")) if emit == "artifact" else None
                rows.append({"binary": who, "emit": emit, "model": name,
                             "layers": layers, "seconds": round(t, 2),
                             "vs_124m": round(t / base, 2),
                             "kernels": kernels})
                k = (f", {kernels[1]} distinct of {kernels[0]} kernels"
                     if kernels else "")
                print(f"{who:8s} --emit={emit:8s} {name:10s} {layers:2d} layers: "
                      f"{t:6.2f} s, {t / base:.2f}x 124M{k}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
