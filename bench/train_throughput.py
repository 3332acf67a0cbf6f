#!/usr/bin/env python3
"""Training throughput on the CPU: gptc against PyTorch eager and
torch.compile, same model, batch, optimizer and thread count, in one run.

    bench/.venv/bin/python bench/train_throughput.py [--build build]

Prints, per model, tokens/s of each (the best of 3 windows: this machine's
timings swing by +-20% between identical runs) and the ratios, plus achieved
FLOP/s against the large-GEMM rate of the peer's BLAS measured in the same
run.
PyTorch comes from PyPI (bench/.venv, optimized BLAS): Debian's build uses
a generic BLAS and is no fair peer. See docs/performance.md.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.q, self.k, self.v, self.proj = (nn.Linear(c, c) for _ in range(4))
        self.fc, self.fc_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        a = self.ln_1(x)
        q, k, v = (m(a).view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, layers, heads, c):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(ctx, c)
        self.h = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def description(path):
    text = open(path).read()
    get = lambda key: int(re.search(r"\b%s:\s*(\d+)" % key, text).group(1))
    return dict(vocab=get("vocab_size"), ctx=get("context_length"),
                layers=get("num_layers"), heads=get("num_heads"),
                width=get("model_dim"), batch=get("batch_size"),
                seq=get("seq_len"))


REPEATS = 3


def torch_rate(d, steps, compiled):
    """Best of REPEATS windows of `steps` steps, after two warm-up steps
    (which include torch.compile's compilation)."""
    model = GPT(d["vocab"], d["ctx"], d["layers"], d["heads"], d["width"])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model)
    data = open("/usr/share/common-licenses/GPL-3", "rb").read()
    g = torch.Generator().manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - d["seq"] - 1, (d["batch"],), generator=g)
        rows = [list(data[s:s + d["seq"] + 1]) for s in starts.tolist()]
        t = torch.tensor(rows, dtype=torch.long)
        opt.zero_grad(set_to_none=True)
        loss = step_fn(t[:, :-1], t[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):
        step()
    best = 0.0
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = max(best, steps * d["batch"] * d["seq"] / (time.perf_counter() - start))
    return best


def gptc_rate(build, model, steps):
    """Best of REPEATS runs of `steps` steps after the first."""
    best = 0.0
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([os.path.join(build, "bin", "gptc"), "train", model,
                                "--steps", str(steps + 1), "--eval-interval", "0",
                                "--checkpoint", os.path.join(tmp, "c.ckpt")],
                               capture_output=True, text=True)
        if p.returncode:
            sys.exit("gptc train failed:\n" + p.stderr)
        best = max(best, float(re.search(r"([0-9.]+) tok/s after the first step",
                                         p.stderr).group(1)))
    return best


def gemm_peak():
    """The best of 7 timings of 3 fp32 2048^3 products: a ceiling, so the
    best, not the mean (this machine's timings vary by 2x under load)."""
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    for _ in range(2):
        a @ b
    best = 0.0
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(3):
            a @ b
        best = max(best, 3 * 2 * 2048 ** 3 / (time.perf_counter() - start))
    return best


def flops_per_token(d):
    c, L, V, T = d["width"], d["layers"], d["vocab"], d["seq"]
    n = V * c + d["ctx"] * c + L * (12 * c * c + 13 * c) + 2 * c
    return 6 * n + 12 * L * T * c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    peak = gemm_peak()
    print("threads %d; PyTorch %s; large-GEMM (2048^3 fp32, torch) %.1f GFLOP/s"
          % (args.threads, torch.__version__, peak / 1e9))
    results = []
    for model, steps in ((os.path.join(ROOT, "models", "tiny.pbtxt"), 100),
                         (os.path.join(ROOT, "bench", "models", "gpt2-small-ctx64.pbtxt"), 3)):
        d = description(model)
        g = gptc_rate(args.build, model, steps)
        e = torch_rate(d, steps, compiled=False)
        try:
            c = torch_rate(d, steps, compiled=True)
        except Exception as ex:  # torch.compile needs a working toolchain
            print("torch.compile failed: %s" % str(ex).splitlines()[0])
            c = float("nan")
        fpt = flops_per_token(d)
        row = dict(model=os.path.basename(model), gptc=g, eager=e, compiled=c,
                   gptc_vs_eager=g / e, gptc_vs_compiled=g / c,
                   gptc_gflops=g * fpt / 1e9, gemm_peak_gflops=peak / 1e9)
        results.append(row)
        print("%-24s gptc %9.0f tok/s | eager %9.0f | compile %9.0f | gptc/eager %.2f"
              " | gptc/compile %.2f | gptc %.1f GFLOP/s = %.0f%% of GEMM peak"
              % (row["model"], g, e, c, g / e, g / c, row["gptc_gflops"],
                 100 * row["gptc_gflops"] / row["gemm_peak_gflops"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
