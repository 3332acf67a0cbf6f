#!/usr/bin/env python3
"""Activation recomputation on the CPU: gptc with --recompute=none,
selective and full against PyTorch eager without and with
torch.utils.checkpoint on every block (the peer of full recomputation),
same model, batch, optimizer and threads, alternating short windows and
keeping each contender's best (train_throughput.py's machinery). Prints
tokens/s, peak resident memory, what training added to gptc's process
against --emit=summary's prediction, and the ratios.

    bench/.venv/bin/python bench/recompute.py [--build build] [--rounds 3]
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_throughput as tt  # noqa: E402

MODELS = [("bench/models/mid-4x256.pbtxt", 8),
          ("bench/models/gpt2-small-ctx64.pbtxt", 2)]
MODES = ["none", "selective", "full"]


def predicted(build, model, mode):
    out = subprocess.run([os.path.join(build, "bin", "gptc"), model,
                          "--recompute=" + mode, "--emit=summary"],
                         capture_output=True, text=True).stdout
    return int(re.search(r"training memory per device: (\d+) bytes",
                         out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(tt.ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    for rel, steps in MODELS:
        model = os.path.join(tt.ROOT, rel)
        stem = os.path.basename(rel).replace(".pbtxt", "")
        gptc = {m: tt.GptcContender(a.build, model, extra=["--recompute=" + m])
                for m in MODES}
        torch = {k: tt.TorchContender(model, k, a.threads)
                 for k in ["eager", "checkpoint"]}
        best = {}
        for _ in range(a.rounds):
            for name, c in list(gptc.items()) + list(torch.items()):
                best[name] = max(best.get(name, 0.0), c.window(steps))
        rss = {name: c.finish() for name, c in
               list(gptc.items()) + list(torch.items())}
        print(f"{stem}: tok/s (best of {a.rounds}) and peak RSS MB")
        for name in MODES + ["eager", "checkpoint"]:
            extra = ""
            if name in gptc:
                extra = (f"  training added {gptc[name].added / 1e6:.1f} MB, "
                         f"predicted {predicted(a.build, model, name) / 1e6:.1f}")
            label = ("gptc " + name) if name in gptc else \
                ("eager" if name == "eager" else "eager + checkpoint")
            print(f"  {label:<22} {best[name]:>9.0f} tok/s {rss[name] / 1e6:>8.1f} MB{extra}")
        print(f"  gptc full / none: {best['full'] / best['none']:.2f}x tok/s; "
              f"selective / none: {best['selective'] / best['none']:.2f}x; "
              f"eager checkpoint / eager: {best['checkpoint'] / best['eager']:.2f}x")
        print(f"  gptc full / eager + checkpoint: "
              f"{best['full'] / best['checkpoint']:.2f}x tok/s; "
              f"gptc none / eager: {best['none'] / best['eager']:.2f}x")


if __name__ == "__main__":
    main()
