"""Training an ONNX-exported GPT-2 on the CPU: gptc against PyTorch.

    bench/.venv/bin/python bench/onnx_train.py [--build build] [--rounds 3]
    .venv/bin/python bench/onnx_train.py --model hf [--rounds 3]

--model hf: Hugging Face's GPT2LMHeadModel (transformers from PyPI,
scripts/install-pytorch.sh) at the same size with sdpa attention, exported
as gptc.torch does (torch.onnx.export(dynamo=True, optimize=False)): gptc
trains the export (Conv1D weights held transposed, every block raised),
PyTorch the module itself (eager, torch.compile, autocast bf16); there is no
gptc-native contender.

The module of test/Onnx/Inputs/gpt2_export.py (nanoGPT's layout: fused
c_attn, tanh GELU, tied head) at mid-4x256's size (vocabulary 256, 4
layers, width 256, 4 heads, batch 8 x 128), exported with
torch.onnx.export (opset 17). Contenders, each its own process, in
alternating windows (this machine's speed swings 2x within a minute), best
of each kept, default environment, the same thread count:

  gptc-onnx   gptc train MODEL.onnx (AdamW, clipping), tok/s after the
              first step of a window
  gptc-native the same model as a gptc description (separate q/k/v
              projections; gptc's fused attention), for what recognizing
              the exported graph's attention would give
  eager       PyTorch eager training of the exported module (AdamW,
              clipping)
  compile     the same under torch.compile
  gptc-onnx-bf16  the ONNX model with precision BF16 (a description naming
              it: bf16 GEMMs, fp32 master weights)
  autocast    eager under torch.autocast("cpu", torch.bfloat16)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Onnx", "Inputs"))

V, T, C, H, L, B = 256, 128, 256, 4, 4, 8
BF16 = """name: "gpt2_bf16"
onnx_model: "gpt2.onnx"
training { batch_size: %d seq_len: %d steps: 100000 precision: BF16 }
""" % (B, T)
NATIVE = """name: "native"
model { vocab_size: %d context_length: %d num_layers: %d num_heads: %d model_dim: %d }
training { batch_size: %d seq_len: %d steps: 100000 }
""" % (V, T, L, H, C, B, T)


def hf_model():
    """The Hugging Face module and a (tokens, targets) -> (loss, logits)
    wrapper of it, as gpt2_export.build's modules compute."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    gpt2 = GPT2LMHeadModel(config)

    class WithLoss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, idx, targets):
            logits = self.m(input_ids=idx, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
            return loss, logits

    return WithLoss(gpt2)


def worker(kind, threads, which="nanogpt"):
    import torch
    import gpt2_export
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if which == "hf":
        model = hf_model()
    else:
        model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                            weight_decay=0.1)
    fn = torch.compile(model) if kind == "compile" else model
    data = open("/usr/share/common-licenses/GPL-3", "rb").read()
    g = torch.Generator().manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - T - 1, (B,), generator=g)
        t = torch.tensor([list(data[s:s + T + 1]) for s in starts.tolist()],
                         dtype=torch.long)
        opt.zero_grad(set_to_none=True)
        if kind == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss, _ = fn(t[:, :-1].contiguous(), t[:, 1:].contiguous())
        else:
            loss, _ = fn(t[:, :-1].contiguous(), t[:, 1:].contiguous())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):
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
        print("rate %f" % (steps * B * T / (time.perf_counter() - start)), flush=True)


def export(path, which="nanogpt"):
    import torch
    import gpt2_export
    torch.manual_seed(0)
    ids = torch.zeros((B, T), dtype=torch.long)
    if which == "hf":
        model = hf_model()
        torch.onnx.export(model, (ids, torch.ones((B, T), dtype=torch.long)), path,
                          dynamo=True, optimize=False, external_data=True,
                          input_names=["idx", "targets"],
                          output_names=["loss", "logits"])
        return
    model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L)
    torch.onnx.export(model, (ids, ids), path, opset_version=17,
                      input_names=["idx", "targets"],
                      output_names=["loss", "logits"],
                      do_constant_folding=False, dynamo=False)


def gptc_rate(gptc, model, steps, work):
    out = subprocess.run([gptc, "train", model, "--steps", str(steps),
                          "--eval-interval", "0", "--log-interval", "0",
                          "--checkpoint", os.path.join(work, "ck"), "--overwrite"],
                         capture_output=True, text=True, check=True).stderr
    return float(re.search(r"([0-9.]+) tok/s after the first step", out).group(1))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--model", choices=("nanogpt", "hf"), default="nanogpt")
    args = ap.parse_args()
    gptc = os.path.join(args.build, "bin", "gptc")
    work = tempfile.mkdtemp(prefix="gptc-onnx-bench-")
    onnx = os.path.join(work, "gpt2.onnx")
    export(onnx, args.model)
    native = os.path.join(work, "native.pbtxt")
    with open(native, "w") as f:
        f.write(NATIVE)
    bf16 = os.path.join(work, "bf16.pbtxt")
    with open(bf16, "w") as f:
        f.write(BF16)
    workers = {}
    for kind in ("eager", "compile", "autocast"):
        p = subprocess.Popen([sys.executable, __file__, "--worker", kind, str(args.threads),
                              args.model],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        workers[kind] = p
    best = {}
    for r in range(args.rounds):
        kinds = ("gptc-onnx", "gptc-native", "eager", "compile", "gptc-onnx-bf16",
                 "autocast")
        for kind in kinds[:1] + kinds[2:] if args.model == "hf" else kinds:
            if kind == "gptc-onnx":
                rate = gptc_rate(gptc, onnx, args.steps, work)
            elif kind == "gptc-onnx-bf16":
                rate = gptc_rate(gptc, bf16, args.steps, work)
            elif kind == "gptc-native":
                rate = gptc_rate(gptc, native, args.steps, work)
            else:
                p = workers[kind]
                p.stdin.write("run %d\n" % args.steps)
                p.stdin.flush()
                rate = float(p.stdout.readline().split()[1])
            best[kind] = max(best.get(kind, 0.0), rate)
            print("round %d %-12s %9.0f tok/s" % (r + 1, kind, rate), flush=True)
    for p in workers.values():
        p.stdin.write("quit\n")
        p.stdin.flush()
        p.wait()
    print("\n%s: best of %d rounds, %d threads, batch %d x %d, %d steps a window:"
          % (args.model, args.rounds, args.threads, B, T, args.steps))
    for kind, rate in best.items():
        print("  %-12s %9.0f tok/s  %.2fx eager" % (kind, rate, rate / best["eager"]))
    print("  gptc-onnx / compile: %.2fx; gptc-onnx-bf16 / autocast: %.2fx"
          % (best["gptc-onnx"] / best["compile"],
             best["gptc-onnx-bf16"] / best["autocast"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
