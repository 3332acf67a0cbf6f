#!/usr/bin/env python3
"""Training throughput and memory on the CPU: gptc against PyTorch eager,
torch.compile and eager with autocast bf16, same model, batch, optimizer
(AdamW + clipping) and thread count, in one run.

    bench/.venv/bin/python bench/train_throughput.py [--build build] [--json out.json]

This machine's speed swings by up to 2x within a minute, so the contenders
run in alternating short windows (gptc, eager, compile, autocast, gptc,
...) and each keeps its best window. Each contender is its own process, so
its peak resident memory (ru_maxrss) is its own: PyTorch's run in a
persistent worker process per contender (started once: torch.compile
compiles once), gptc as one `gptc train` per window (its tok/s is after the
first step, which includes loading the compiled kernels).

Also reported, measured in the same run: oneDNN's large-GEMM ceiling in
fp32 and bf16 (build/bin/gptc-gemm-ceiling) and gptc's achieved FLOP/s
against the fp32 one, and gptc's own memory prediction (--emit=summary:
parameters and moments + training-step buffers).

Nothing here sets an environment variable: the figures are those of the
environment a user has. PyTorch comes from PyPI (bench/.venv).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("models/tiny.pbtxt", 40),
          ("bench/models/mid-4x256.pbtxt", 8),
          ("bench/models/gpt2-small-ctx64.pbtxt", 2)]
TORCH = ["eager", "compile", "autocast"]


def description(path):
    text = open(path).read()
    get = lambda key: int(re.search(r"\b%s:\s*(\d+)" % key, text).group(1))
    return dict(vocab=get("vocab_size"), ctx=get("context_length"),
                layers=get("num_layers"), heads=get("num_heads"),
                width=get("model_dim"), batch=get("batch_size"),
                seq=get("seq_len"))


def flops_per_token(d):
    c, L, V, T = d["width"], d["layers"], d["vocab"], d["seq"]
    n = V * c + d["ctx"] * c + L * (12 * c * c + 13 * c) + 2 * c
    return 6 * n + 12 * L * T * c


#===-------------------------------------------------------------------===#
# PyTorch worker (a process of its own per contender)
#===-------------------------------------------------------------------===#

def worker(model_path, kind, threads):
    import torch
    from gpt_torch import GPT
    torch.set_num_threads(threads)

    d = description(model_path)
    model = GPT(d["vocab"], d["ctx"], d["layers"], d["heads"], d["width"])
    if kind == "checkpoint":
        # Each block's activations recomputed in its backward
        # (torch.utils.checkpoint): the peer of gptc's --recompute=full.
        from torch.utils.checkpoint import checkpoint

        class Checkpointed(torch.nn.Module):
            def __init__(self, block):
                super().__init__()
                self.block = block

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=False)

        model.h = torch.nn.ModuleList(Checkpointed(b) for b in model.h)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    fn = torch.compile(model) if kind == "compile" else model
    # fp16 needs loss scaling, as gptc's: GradScaler with its defaults.
    scaler = torch.amp.GradScaler("cpu") if kind == "autocast-fp16" else None
    data = open("/usr/share/common-licenses/GPL-3", "rb").read()
    g = torch.Generator().manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - d["seq"] - 1, (d["batch"],), generator=g)
        t = torch.tensor([list(data[s:s + d["seq"] + 1]) for s in starts.tolist()],
                         dtype=torch.long)
        opt.zero_grad(set_to_none=True)
        if kind == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = fn(t[:, :-1], t[:, 1:])
        elif kind == "autocast-fp16":
            with torch.autocast("cpu", dtype=torch.float16):
                loss = fn(t[:, :-1], t[:, 1:])
        else:
            loss = fn(t[:, :-1], t[:, 1:])
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            return
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):  # warm-up, torch.compile's compilation included
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "quit":
            break
        steps = int(cmd[1])
        start = time.perf_counter()
        for _ in range(steps):
            step()
        rate = steps * d["batch"] * d["seq"] / (time.perf_counter() - start)
        print("rate %f" % rate, flush=True)
    print("maxrss %d" % peak_resident_bytes(), flush=True)


def peak_resident_bytes():
    """VmHWM: this process's peak resident memory since exec (ru_maxrss
    would include the parent's image at fork)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return -1


class TorchContender:
    def __init__(self, model, kind, threads):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", kind,
             "--model", model, "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError("%s worker failed to start" % kind)

    def window(self, steps):
        self.proc.stdin.write("run %d\n" % steps)
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline().split()[1])

    def finish(self):
        """Peak resident memory in bytes."""
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        rss = int(self.proc.stdout.readline().split()[1])
        self.proc.wait()
        return rss


class GptcContender:
    def __init__(self, build, model, precision=None, extra=(), env=None):
        self.gptc = os.path.join(build, "bin", "gptc")
        self.model = model
        self.env = env
        self.added = 0
        self.extra = list(extra)
        self.rss = 0
        if precision:
            # The same description with `precision: BF16` (or FP16).
            fd, self.model = tempfile.mkstemp(suffix=".pbtxt")
            with os.fdopen(fd, "w") as f:
                text = re.sub(r"\bprecision:\s*\w+", "", open(model).read())
                f.write(re.sub(r"training \{", "training {\n  precision: " + precision,
                               text, count=1))

    def window(self, steps):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "log")
            with open(log, "w") as err:
                proc = subprocess.Popen(
                    [self.gptc, "train", self.model, "--steps", str(steps + 1),
                     "--eval-interval", "0", "--log-interval", "0",
                     "--checkpoint", os.path.join(tmp, "c.ckpt")] + self.extra,
                    stdout=subprocess.DEVNULL, stderr=err, env=self.env)
                status = proc.wait()
            text = open(log).read()
        if status:
            sys.exit("gptc train failed:\n" + text)
        # gptc reports its own peak (VmHWM), which a parent's rusage would
        # inflate with its own image at fork.
        self.rss = max(self.rss, int(re.search(r"peak resident memory (\d+) bytes",
                                               text).group(1)))
        # What training added to the compiler and libraries' memory, which
        # --emit=summary's "training memory" predicts.
        added = re.search(r"training added (\d+) bytes", text)
        if added:
            self.added = max(getattr(self, "added", 0), int(added.group(1)))
        return float(re.search(r"([0-9.]+) tok/s after the first step", text).group(1))

    def finish(self):
        return self.rss


def predicted_bytes(build, model):
    """--emit=summary's training memory (parameters, moments, step buffers,
    kernel scratch) for the run the benchmark makes: without evaluation
    (`--eval-interval 0`), so the description is summarized with
    eval_interval 0 (otherwise the prediction adds @forward's buffers)."""
    fd, path = tempfile.mkstemp(suffix=".pbtxt")
    try:
        with os.fdopen(fd, "w") as f:
            text = re.sub(r"\beval_interval:\s*\d+", "", open(model).read())
            f.write(re.sub(r"training \{", "training {\n  eval_interval: 0", text, count=1))
        out = subprocess.run([os.path.join(build, "bin", "gptc"), path, "--emit=summary"],
                             capture_output=True, text=True).stdout
    finally:
        os.remove(path)
    return int(re.search(r"training memory per device: (\d+) bytes", out).group(1))


def gemm_ceilings(build):
    out = subprocess.run([os.path.join(build, "bin", "gptc-gemm-ceiling")],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        kind, rate, impl = line.split(maxsplit=2)
        got[kind] = (float(rate), impl)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--models", default="", help="comma-separated subset (file stems)")
    ap.add_argument("--json", default="")
    ap.add_argument("--fp16", action="store_true",
                    help="also gptc fp16 against autocast fp16 with GradScaler")
    ap.add_argument("--epilogues", action="store_true",
                    help="also gptc with --gemm-epilogues (the GPU's default) in "
                         "fp32 and bf16, against gptc without")
    ap.add_argument("--worker", default="")
    ap.add_argument("--model", default="")
    args = ap.parse_args()
    if args.worker:
        return worker(args.model, args.worker, args.threads)

    version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    ceil = gemm_ceilings(args.build)
    print("threads %d; PyTorch %s; oneDNN large-GEMM ceiling: fp32 %.1f GFLOP/s (%s), "
          "bf16 %.1f GFLOP/s (%s)" % (args.threads, version, ceil["fp32"][0],
                                      ceil["fp32"][1], ceil["bf16"][0], ceil["bf16"][1]))
    results = []
    for rel, steps in MODELS:
        model = os.path.join(ROOT, rel)
        stem = os.path.basename(rel).replace(".pbtxt", "")
        if args.models and stem not in args.models.split(","):
            continue
        d = description(model)
        contenders = {"gptc": GptcContender(args.build, model),
                      "gptc-bf16": GptcContender(args.build, model, "BF16")}
        if args.fp16:
            contenders["gptc-fp16"] = GptcContender(args.build, model, "FP16")
        if args.epilogues:
            contenders["gptc-epi"] = GptcContender(args.build, model,
                                                   extra=["--gemm-epilogues"])
            contenders["gptc-bf16-epi"] = GptcContender(args.build, model, "BF16",
                                                        extra=["--gemm-epilogues"])
        for kind in TORCH + (["autocast-fp16"] if args.fp16 else []):
            try:
                contenders[kind] = TorchContender(model, kind, args.threads)
            except RuntimeError as ex:
                print("%s: %s" % (stem, ex))
        best = {k: 0.0 for k in contenders}
        for _ in range(args.rounds):
            for k, c in contenders.items():
                best[k] = max(best[k], c.window(steps))
        rss = {k: c.finish() for k, c in contenders.items()}
        predicted = predicted_bytes(args.build, model)
        fpt = flops_per_token(d)
        row = dict(model=stem, tok_s=best, peak_rss=rss,
                   predicted_bytes=predicted,
                   gptc_gflops=best["gptc"] * fpt / 1e9,
                   gemm_ceiling_fp32=ceil["fp32"][0], gemm_ceiling_bf16=ceil["bf16"][0])
        results.append(row)
        g = best["gptc"]
        ratio = lambda k: g / best[k] if best.get(k) else float("nan")
        h = best["gptc-bf16"]
        row["gptc_bf16_gflops"] = h * fpt / 1e9
        print("%-18s tok/s: gptc %8.0f | gptc-bf16 %8.0f | eager %8.0f | compile %8.0f"
              " | autocast-bf16 %8.0f" % (stem, g, h, best.get("eager", 0),
                                          best.get("compile", 0), best.get("autocast", 0)))
        print("%-18s gptc/eager %.2f | gptc/compile %.2f | gptc-bf16/autocast %.2f"
              " | gptc %.1f GFLOP/s = %.0f%% of fp32 ceiling | gptc-bf16 %.1f GFLOP/s"
              " = %.0f%% of bf16 ceiling"
              % (stem, ratio("eager"), ratio("compile"),
                 h / best["autocast"] if best.get("autocast") else float("nan"),
                 row["gptc_gflops"], 100 * row["gptc_gflops"] / ceil["fp32"][0],
                 row["gptc_bf16_gflops"], 100 * row["gptc_bf16_gflops"] / ceil["bf16"][0]))
        if args.epilogues:
            print("%-18s GEMM epilogues (--gemm-epilogues) against without: fp32 %.3f"
                  " (%.0f tok/s) | bf16 %.3f (%.0f tok/s)"
                  % (stem, best["gptc-epi"] / g, best["gptc-epi"],
                     best["gptc-bf16-epi"] / h, best["gptc-bf16-epi"]), flush=True)
            row["epilogues_fp32_ratio"] = best["gptc-epi"] / g
            row["epilogues_bf16_ratio"] = best["gptc-bf16-epi"] / h
        added = getattr(contenders["gptc"], "added", 0)
        row["training_added_bytes"] = added
        print("%-18s peak RSS MB: gptc %7.1f (training added %.1f, predicted %.1f) | gptc-bf16"
              " %7.1f | eager %7.1f | compile %7.1f | autocast %7.1f"
              % (stem, rss["gptc"] / 1e6, added / 1e6, row["predicted_bytes"] / 1e6,
                 rss["gptc-bf16"] / 1e6, rss.get("eager", 0) / 1e6,
                 rss.get("compile", 0) / 1e6, rss.get("autocast", 0) / 1e6), flush=True)
        if args.fp16:
            f16 = best["gptc-fp16"]
            print("%-18s fp16 tok/s: gptc-fp16 %8.0f | autocast-fp16 %8.0f | ratio %.2f"
                  " | peak RSS MB gptc-fp16 %.1f, autocast-fp16 %.1f"
                  % (stem, f16, best.get("autocast-fp16", 0),
                     f16 / best["autocast-fp16"] if best.get("autocast-fp16") else float("nan"),
                     rss["gptc-fp16"] / 1e6, rss.get("autocast-fp16", 0) / 1e6), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
