#!/usr/bin/env python3
"""Planning time against depth: gptc plan (the search alone) and gptc
--mesh auto --emit=summary (the plan, then the sharded step compiled to IR,
its pipeline included) for GPT-3-wide models of 12 to 192 layers on 1024
H100s (hardware/h100-node.pbtxt). Each figure is the best of 3 wall-clock
runs; the machine's speed swings, so the runs of each depth alternate with
the others'. Usage: bench/plan_time.py [--gptc build/bin/gptc]"""
import argparse
import os
import re
import subprocess
import tempfile
import time

DEPTHS = [12, 24, 48, 96, 192]


def description(layers):
    return f"""name: "gpt3-wide-{layers}"
model {{
  vocab_size: 50257 context_length: 2048 num_layers: {layers}
  num_heads: 96 model_dim: 12288
}}
training {{
  batch_size: 1536 seq_len: 2048 precision: BF16
  optimizer {{ lr: 6e-5 }}
}}
"""


def timed(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return elapsed, out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gptc", default="build/bin/gptc")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    files = {}
    for layers in DEPTHS:
        files[layers] = os.path.join(tmp, f"gpt3-{layers}.pbtxt")
        with open(files[layers], "w") as f:
            f.write(description(layers))
    best = {(l, k): float("inf") for l in DEPTHS for k in ("plan", "ir")}
    chosen = {}
    for _ in range(a.rounds):
        for layers in DEPTHS:
            hw = ["--hardware", "h100-node", "--devices", "1024"]
            t, out = timed([a.gptc, "plan", files[layers]] + hw + ["--top", "1"])
            best[(layers, "plan")] = min(best[(layers, "plan")], t)
            m = re.search(r"considered (\d+) plans", out)
            plan = re.search(r"plan 1: --mesh (\S+)", out)
            chosen[layers] = (m.group(1), plan.group(1))
            t, _ = timed([a.gptc, files[layers], "--mesh", "auto"] + hw +
                         ["--emit=summary"])
            best[(layers, "ir")] = min(best[(layers, "ir")], t)
    print(f"{'layers':>6} {'plans':>6} {'chosen mesh':<22} {'gptc plan':>10} "
          f"{'plan + IR':>10}")
    for layers in DEPTHS:
        considered, mesh = chosen[layers]
        print(f"{layers:>6} {considered:>6} {mesh:<22} "
              f"{best[(layers, 'plan')]:>9.3f}s {best[(layers, 'ir')]:>9.3f}s")


if __name__ == "__main__":
    main()
