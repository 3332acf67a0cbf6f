#!/usr/bin/env python3
"""GPU training throughput: gptc against PyTorch torch.compile (bf16
autocast, fused AdamW) on the same GPU, in one run, plus the ceilings the
figures are judged against, measured in the same run.

    python3 bench/gpu_throughput.py --runtime DIR/gptc-runtime \
        --artifact gpt2.gptc --model bench/models/gpt2-124m-gpu.pbtxt

Runs where the compiler cannot (scripts/gpu-check.sh, on a GPU machine
without MLIR): gptc trains a prepared artifact with gptc-runtime. The
contenders run in alternating windows (gptc, compile, gptc, ...) and
each keeps its best; gptc's window is one process, its tok/s taken after
the first step (which loads the kernels and chooses cuBLASLt's
algorithms).

Printed: tokens/s of each, the ratio, MFU of each against the bf16
matrix-product ceiling (cuBLAS through torch.matmul, 8192^3, measured
here) and against the H200's 989 TFLOP/s datasheet figure, and the copy
bandwidth (a device-to-device copy of 1 GiB) that memory-bound kernels
are judged against.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from train_throughput import description, flops_per_token  # noqa: E402


def ceilings():
    import torch
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        best = max(best, 10 * 2 * 8192 ** 3 / (time.perf_counter() - start))
    x = torch.empty(1 << 29, device="cuda", dtype=torch.float16)  # 1 GiB
    y = torch.empty_like(x)
    y.copy_(x)
    torch.cuda.synchronize()
    bw = 0.0
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            y.copy_(x)
        torch.cuda.synchronize()
        bw = max(bw, 10 * 2 * x.numel() * 2 / (time.perf_counter() - start))
    del a, b, x, y
    torch.cuda.empty_cache()
    return best, bw


def torch_worker(model_path, data_path):
    import torch
    from gpt_torch import GPT
    d = description(model_path)
    torch.manual_seed(0)
    model = GPT(d["vocab"], d["ctx"], d["layers"], d["heads"], d["width"]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1,
                            fused=True)
    fn = torch.compile(model)
    data = open(data_path or "/usr/share/common-licenses/GPL-3", "rb").read()
    g = torch.Generator().manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - d["seq"] - 1, (d["batch"],), generator=g)
        t = torch.tensor([list(data[s:s + d["seq"] + 1]) for s in starts.tolist()],
                         dtype=torch.long).cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fn(t[:, :-1], t[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    print("ready %d" % torch.cuda.max_memory_allocated(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "quit":
            break
        steps = int(cmd[1])
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        rate = steps * d["batch"] * d["seq"] / (time.perf_counter() - start)
        print("rate %f" % rate, flush=True)


def gptc_window(runtime, artifact, steps, data):
    cmd = [runtime, artifact, "--device", "cuda", "--stop-at-step", str(steps),
           "--eval-interval", "0", "--log-interval", "0", "--checkpoint",
           "/tmp/gptc-bench.ckpt", "--overwrite"]
    if data:
        cmd += ["--data", data]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("gptc-runtime failed:\n" + out.stderr[-3000:])
    m = re.search(r"([0-9.]+) tok/s after the first step", out.stderr)
    return float(m.group(1)) if m else 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", required=True)
    p.add_argument("--artifact", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--json", default="")
    p.add_argument("--worker", action="store_true")
    a = p.parse_args()
    if a.worker:
        return torch_worker(a.model, a.data)
    d = description(a.model)
    peak, bandwidth = ceilings()
    worker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                               "--runtime", a.runtime, "--artifact", a.artifact,
                               "--model", a.model, "--data", a.data],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = worker.stdout.readline().split()
    if not ready or ready[0] != "ready":
        raise RuntimeError("the PyTorch worker failed to start")
    torch_bytes = int(ready[1])
    best = {"gptc": 0.0, "compile": 0.0}
    for _ in range(a.rounds):
        best["gptc"] = max(best["gptc"], gptc_window(a.runtime, a.artifact, a.steps, a.data))
        worker.stdin.write("run %d\n" % a.steps)
        worker.stdin.flush()
        best["compile"] = max(best["compile"], float(worker.stdout.readline().split()[1]))
    worker.stdin.write("quit\n")
    worker.stdin.flush()
    worker.wait()
    fpt = flops_per_token(d)
    result = dict(model=os.path.basename(a.model), batch=d["batch"], seq=d["seq"],
                  bf16_ceiling_tflops=peak / 1e12, copy_gbps=bandwidth / 1e9,
                  gptc_tok_s=best["gptc"], compile_tok_s=best["compile"],
                  ratio=best["gptc"] / best["compile"] if best["compile"] else 0.0,
                  gptc_mfu=best["gptc"] * fpt / peak, compile_mfu=best["compile"] * fpt / peak,
                  torch_peak_bytes=torch_bytes)
    print("| model | batch x seq | gptc tok/s | torch.compile tok/s | ratio | gptc MFU | compile MFU | bf16 ceiling | copy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("| %s | %d x %d | %.0f | %.0f | %.2f | %.1f%% | %.1f%% | %.0f TFLOP/s | %.0f GB/s |" % (
        result["model"], d["batch"], d["seq"], result["gptc_tok_s"], result["compile_tok_s"],
        result["ratio"], 100 * result["gptc_mfu"], 100 * result["compile_mfu"],
        result["bf16_ceiling_tflops"], result["copy_gbps"]))
    if a.json:
        json.dump(result, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
