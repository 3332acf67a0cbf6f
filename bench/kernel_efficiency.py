#!/usr/bin/env python3
"""How well gptc's kernels use the machine, from gptc's own per-kernel
profile (`--profile-json`), against peers measured in the same run:

- its GEMMs against the same GEMMs alone in PyTorch (same shapes, types
  and transposes: cuBLASLt on a GPU, oneDNN on the CPU);
- its attention against PyTorch's scaled_dot_product_attention (forward
  and backward) on the same shapes;
- its memory-bound kernels (the generated fused kernels, layer norm,
  AdamW, ...; those moving at least 1 MiB a call) against the copy
  bandwidth, measured both by gptc (Backend::copyBandwidth) and by a
  PyTorch copy.

    python3 bench/kernel_efficiency.py --runtime build/bin/gptc-runtime \\
        --artifact step.gptc [--device cpu|cuda] [--json out.json]
    python3 bench/kernel_efficiency.py --gptc build/bin/gptc \\
        --model bench/models/mid-4x256.pbtxt [--precision BF16]
                                                 (compiles the artifact)

gptc's window is one gptc-runtime process (its profile covers the steps
after the first); PyTorch's times each distinct GEMM and attention shape
(best of several repeats). The windows alternate for --rounds rounds and
each kernel keeps its best. The ratio is PyTorch's time over gptc's (>= 1:
gptc is as fast); a GEMM with an epilogue (bias, GELU) is compared with
the plain GEMM of its shape, so the epilogue's cost counts against gptc.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def torch_dtype(torch, name):
    return {"F32": torch.float32, "BF16": torch.bfloat16,
            "F16": torch.float16, "F64": torch.float64}[name]


def gemm_key(k):
    return (k["op"], tuple((i["dtype"], tuple(i["shape"])) for i in k["inputs"]),
            k.get("transpose_lhs", False), k.get("transpose_rhs", False),
            k.get("epilogue", "NONE"))


def attention_key(k):
    q = k["inputs"][0]
    return (q["dtype"], tuple(q["shape"]), k.get("num_heads", 1))


def gptc_window(a, path):
    cmd = [a.runtime, a.artifact, "--device", a.device, "--stop-at-step",
           str(a.steps), "--eval-interval", "0", "--log-interval", "0",
           "--profile-json", path, "--checkpoint",
           os.path.join(os.path.dirname(path), "bench.ckpt"), "--overwrite"]
    if a.data:
        cmd += ["--data", a.data]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("gptc-runtime failed:\n" + out.stderr[-3000:])
    return json.load(open(path)), out.stderr


def best_time(fn, sync, repeats=5, min_seconds=0.05):
    """Seconds per call: the best of `repeats` windows of enough calls."""
    fn()
    sync()
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        if time.perf_counter() - start >= min_seconds / repeats or n >= 1 << 14:
            break
        n *= 2
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def torch_window(torch, device, gemms, attentions):
    """Seconds per call of each GEMM and attention shape, alone."""
    import torch.nn.functional as F
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {}
    g = torch.Generator(device=device).manual_seed(0)

    def rand(spec):
        return torch.randn(spec["shape"], generator=g, device=device,
                           dtype=torch_dtype(torch, spec["dtype"]))
    for key, k in gemms.items():
        ins = [rand(i) for i in k["inputs"]]
        if k["op"] == "LINEAR":
            x, w = ins[0], ins[1]
            b = ins[2] if len(ins) > 2 else None
            fn = lambda x=x, w=w, b=b: F.linear(x, w, b)  # noqa: E731
        else:
            lhs = ins[0].mT if k.get("transpose_lhs") else ins[0]
            rhs = ins[1].mT if k.get("transpose_rhs") else ins[1]
            fn = lambda lhs=lhs, rhs=rhs: torch.matmul(lhs, rhs)  # noqa: E731
        with torch.no_grad():
            out[("gemm",) + key] = best_time(fn, sync)
    for key, (dtype, shape, heads) in attentions.items():
        b, t, c = shape
        d = c // heads
        q, kk, v = [torch.randn(b, heads, t, d, generator=g, device=device,
                                dtype=torch_dtype(torch, dtype), requires_grad=True)
                    for _ in range(3)]
        grad = torch.randn(b, heads, t, d, generator=g, device=device,
                           dtype=torch_dtype(torch, dtype))

        def both(q=q, kk=kk, v=v, grad=grad):
            o = F.scaled_dot_product_attention(q, kk, v, is_causal=True)
            torch.autograd.grad(o, (q, kk, v), grad)
        out[("attention",) + key] = best_time(both, sync)
    return out


def copy_rate(torch, device):
    n = (1 << 29) if device == "cuda" else (1 << 27)  # 1 GiB / 256 MiB of fp16
    x = torch.ones(n, device=device, dtype=torch.float16)
    y = torch.empty_like(x)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    s = best_time(lambda: y.copy_(x), sync, repeats=5, min_seconds=0.2)
    return 2 * 2 * n / s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", default="build/bin/gptc-runtime")
    p.add_argument("--artifact", default="")
    p.add_argument("--gptc", default="build/bin/gptc")
    p.add_argument("--model", default="bench/models/mid-4x256.pbtxt")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="", choices=["", "BF16", "FP16"],
                   help="with --model: compile it with this precision")
    p.add_argument("--data", default="")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--json", default="")
    a = p.parse_args()
    import torch
    tmp = tempfile.mkdtemp(prefix="gptc-kernels-")
    if not a.artifact:
        a.artifact = os.path.join(tmp, "step.gptc")
        model = a.model
        if a.precision:
            # The same description with `precision: BF16` (or FP16).
            model = os.path.join(tmp, "model.pbtxt")
            text = re.sub(r"\bprecision:\s*\w+", "", open(a.model).read())
            open(model, "w").write(re.sub(r"training \{", "training {\n  precision: " +
                                          a.precision, text, count=1))
        cmd = [a.gptc, model, "--emit=artifact", "-o", a.artifact]
        if a.device == "cuda":
            cmd.append("--device=cuda")
        subprocess.run(cmd, check=True)
    profile_path = os.path.join(tmp, "profile.json")

    gptc_best = {}      # (function, index) -> seconds per call
    kernels = {}        # (function, index) -> the profile's record
    torch_best = {}
    copies = {"gptc": 0.0, "torch": 0.0}
    stderr = ""
    for _ in range(a.rounds):
        prof, stderr = gptc_window(a, profile_path)
        copies["gptc"] = max(copies["gptc"], prof["copy_bytes_per_second"])
        for k in prof["kernels"]:
            key = (k["function"], k["index"])
            kernels[key] = k
            per = k["seconds"] / k["calls"]
            gptc_best[key] = min(gptc_best.get(key, float("inf")), per)
        gemms, attentions = {}, {}
        for k in kernels.values():
            if k["class"] == "gemm":
                gemms.setdefault(gemm_key(k), k)
            elif k["class"] == "attention" and k["op"] == "CAUSAL_ATTENTION":
                attentions.setdefault(attention_key(k), attention_key(k))
        times = torch_window(torch, a.device, gemms, attentions)
        for key, s in times.items():
            torch_best[key] = min(torch_best.get(key, float("inf")), s)
        copies["torch"] = max(copies["torch"], copy_rate(torch, a.device))

    steps = prof["steps"]
    # GEMMs: per call, summed over each step's calls.
    rows = {}
    for key, k in kernels.items():
        if k["class"] != "gemm":
            continue
        gk = ("gemm",) + gemm_key(k)
        calls = k["calls"] / steps
        r = rows.setdefault(gk, dict(kernel=k, calls=0.0, gptc=0.0))
        r["calls"] += calls
        r["gptc"] += gptc_best[key] * calls
    gemm_gptc = sum(r["gptc"] for r in rows.values())
    gemm_torch = sum(torch_best[gk] * r["calls"] for gk, r in rows.items())
    gemm_flops = sum(r["kernel"]["flops"] * r["calls"] for r in rows.values())
    # Attention: gptc's forward and backward against SDPA's both.
    att_gptc, att_torch, att_flops = 0.0, 0.0, 0.0
    for key, k in kernels.items():
        if k["class"] == "attention":
            calls = k["calls"] / steps
            att_gptc += gptc_best[key] * calls
            att_flops += k["flops"] * calls
            if k["op"] == "CAUSAL_ATTENTION":
                att_torch += torch_best[("attention",) + attention_key(k)] * calls
    # Memory-bound kernels moving >= 1 MiB a call.
    small = prof["small_kernel_bytes"]
    mem_bytes, mem_time = 0.0, 0.0
    worst = []
    for key, k in kernels.items():
        if k["class"] == "memory" and k["bytes"] >= small:
            calls = k["calls"] / steps
            mem_bytes += k["bytes"] * calls
            mem_time += gptc_best[key] * calls
            worst.append((gptc_best[key] * calls, k["bytes"] / gptc_best[key], k))
    mem_rate = mem_bytes / mem_time if mem_time else 0.0
    copy = max(copies.values())

    result = dict(
        artifact=os.path.basename(a.artifact), device=prof["device"],
        step_seconds=prof["step_seconds"],
        gemm_seconds=gemm_gptc, gemm_torch_seconds=gemm_torch,
        gemm_ratio=gemm_torch / gemm_gptc if gemm_gptc else 0.0,
        gemm_tflops=gemm_flops / gemm_gptc * 1e-12 if gemm_gptc else 0.0,
        attention_seconds=att_gptc, attention_torch_seconds=att_torch,
        attention_ratio=att_torch / att_gptc if att_gptc else 0.0,
        attention_tflops=att_flops / att_gptc * 1e-12 if att_gptc else 0.0,
        memory_seconds=mem_time, memory_gbps=mem_rate * 1e-9,
        copy_gbps_gptc=copies["gptc"] * 1e-9, copy_gbps_torch=copies["torch"] * 1e-9,
        memory_of_copy=mem_rate / copy if copy else 0.0,
        gemms=[dict(op=r["kernel"]["op"], inputs=r["kernel"]["inputs"],
                    transpose_lhs=r["kernel"].get("transpose_lhs", False),
                    transpose_rhs=r["kernel"].get("transpose_rhs", False),
                    epilogue=r["kernel"].get("epilogue", "NONE"),
                    calls_per_step=r["calls"], gptc_seconds=r["gptc"] / r["calls"],
                    torch_seconds=torch_best[gk])
               for gk, r in rows.items()])

    print("gptc's kernels on %s (%s), a step of %.2f ms; per step:" % (
        result["device"], result["artifact"], 1e3 * result["step_seconds"]))
    print("| kernels | gptc ms | PyTorch alone ms | ratio | gptc rate |")
    print("| --- | --- | --- | --- | --- |")
    print("| GEMMs | %.2f | %.2f | %.2f | %.1f TFLOP/s |" % (
        1e3 * gemm_gptc, 1e3 * gemm_torch, result["gemm_ratio"], result["gemm_tflops"]))
    if att_gptc:
        print("| attention (fwd + bwd) | %.2f | %.2f | %.2f | %.1f TFLOP/s |" % (
            1e3 * att_gptc, 1e3 * att_torch, result["attention_ratio"],
            result["attention_tflops"]))
    print("| memory-bound (>= 1 MiB) | %.2f | | | %.0f GB/s = %.0f%% of the copy's %.0f GB/s "
          "(gptc's %.0f, PyTorch's %.0f) |" % (
              1e3 * mem_time, result["memory_gbps"], 100 * result["memory_of_copy"],
              copy * 1e-9, copies["gptc"] * 1e-9, copies["torch"] * 1e-9))
    print("GEMMs by shape (gptc us, PyTorch us, ratio):")
    for gk, r in sorted(rows.items(), key=lambda kv: -kv[1]["gptc"]):
        k = r["kernel"]
        shapes = " x ".join("%s%s" % (i["dtype"].lower(), i["shape"]) for i in k["inputs"][:2])
        tr = "".join(["T" if k.get("transpose_lhs") else "N",
                      "T" if k.get("transpose_rhs") or k["op"] == "LINEAR" else "N"])
        extra = [] if k.get("epilogue", "NONE") == "NONE" else [k["epilogue"]]
        if k["op"] == "LINEAR" and len(k["inputs"]) > 2:
            extra.append("bias")
        print("  %-7s %s %-48s %8.1f %8.1f %5.2f %s" % (
            k["op"], tr, shapes, 1e6 * r["gptc"] / r["calls"], 1e6 * torch_best[gk],
            torch_best[gk] * r["calls"] / r["gptc"], " ".join(extra)))
    print("the slowest memory-bound kernels (ms a step, GB/s, % of the copy):")
    for t, rate, k in sorted(worst, key=lambda w: -w[0])[:8]:
        print("  %7.3f %7.0f %4.0f%%  %s" % (1e3 * t, rate * 1e-9, 100 * rate / copy, k["name"]))
    # gptc's own report of its last window.
    lines = stderr[stderr.find("gptc: @"):].splitlines() if "gptc: @" in stderr else []
    for i, line in enumerate(lines):
        if i and line.startswith("gptc:"):
            break
        print(line)
    if a.json:
        json.dump(result, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
