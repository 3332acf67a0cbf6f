#!/usr/bin/env python3
"""GPU attention: gptc's tensor-core kernels against PyTorch's
scaled_dot_product_attention (its flash kernel) on the same GPU, in one
run, at GPT-2 124M's attention shape by default.

    python3 bench/gpu_attention.py --bench DIR/gptc-attention-bench \
        [--batch 8 --seq 1024 --heads 12 --head-dim 64 --type bf16]

gptc-attention-bench checks its kernels (against the fp32 kernels, bit
for bit across two runs) and times them with CUDA events; PyTorch is
timed the same way (median of 20 after 3 warm-ups), on causal bf16 inputs
of the same shape. The contenders run in alternating windows (gptc,
PyTorch, gptc, ...) and each keeps its best. FLOPs are counted flash
attention's way: a causal forward 2 B H T^2 D, the backward 2.5 times
that. Printed: each one's forward and backward TFLOP/s, the ratios, and
the fraction of the bf16 matrix-product ceiling (torch.matmul, 8192^3,
measured here) that gptc's kernels reach.
"""
import argparse
import json
import re
import subprocess
import sys


def torch_attention(batch, seq, heads, dim, dtype, iterations=20):
    import torch
    import torch.nn.functional as F
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    shape = (batch, heads, seq, dim)
    q, k, v, g = (torch.randn(shape, device="cuda", dtype=dt) * 1.5 for _ in range(4))
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()

    def timed(run):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            run()
        times = []
        for _ in range(iterations):
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return sorted(times)[len(times) // 2]

    fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    bwd = timed(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
    return fwd, bwd


def matmul_ceiling():
    import torch
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(5):
        start.record()
        for _ in range(10):
            a @ b
        stop.record()
        stop.synchronize()
        best = max(best, 10 * 2 * 8192 ** 3 / (start.elapsed_time(stop) * 1e-3))
    return best


def gptc_attention(tool, args):
    cmd = [tool, "--batch", str(args.batch), "--seq", str(args.seq), "--heads",
           str(args.heads), "--head-dim", str(args.head_dim), "--type", args.type]
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode:
        sys.stderr.write(p.stderr)
        sys.exit("gpu_attention: gptc-attention-bench failed (%d)" % p.returncode)
    fwd = float(re.search(r"^forward ([0-9.]+) ms", p.stdout, re.M).group(1))
    bwd = float(re.search(r"^backward ([0-9.]+) ms", p.stdout, re.M).group(1))
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True, help="gptc-attention-bench")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--type", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    best = {"gptc": [1e30, 1e30], "torch": [1e30, 1e30]}
    for _ in range(args.rounds):
        for name, run in (("gptc", lambda: gptc_attention(args.bench, args)),
                          ("torch", lambda: torch_attention(args.batch, args.seq, args.heads,
                                                            args.head_dim, args.type))):
            f, b = run()
            best[name] = [min(best[name][0], f), min(best[name][1], b)]
    ceiling = matmul_ceiling()
    flops = 2.0 * args.batch * args.heads * args.seq ** 2 * args.head_dim
    rate = {n: [flops / (t[0] * 1e-3), 2.5 * flops / (t[1] * 1e-3)] for n, t in best.items()}
    print("| attention %s B=%d T=%d H=%d D=%d | forward TFLOP/s | backward TFLOP/s |"
          % (args.type, args.batch, args.seq, args.heads, args.head_dim))
    print("|---|---|---|")
    for n in ("gptc", "torch"):
        print("| %s | %.1f | %.1f |" % (n, rate[n][0] / 1e12, rate[n][1] / 1e12))
    print("| gptc / torch SDPA | %.2fx | %.2fx |" % (rate["gptc"][0] / rate["torch"][0],
                                                   rate["gptc"][1] / rate["torch"][1]))
    print("| gptc / bf16 matmul ceiling (%.0f TFLOP/s) | %.0f%% | %.0f%% |"
          % (ceiling / 1e12, 100 * rate["gptc"][0] / ceiling, 100 * rate["gptc"][1] / ceiling))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": vars(args), "ms": best, "ceiling": ceiling}, f, indent=1)


if __name__ == "__main__":
    main()
