#!/usr/bin/env python3
"""Context parallelism on the CPU: tokens/s and memory per rank of gptc
with the sequence split over N MPI ranks (--mesh cp=N), with ring
attention (the default) and with all-gather attention, against PyTorch
eager running all-gather context parallelism over N gloo processes (the
sequence in 2N load-balanced chunks, keys and values all-gathered per
layer with torch.distributed.nn's differentiable all_gather, attention
from the rank's queries with the causal mask at their positions,
gradients summed over the ranks), same model, global batch, optimizer
and cores, in one run. Also gptc's data parallelism over the same N
ranks and gptc on one rank, for what splitting the sequence costs and
saves.

    .venv/bin/python bench/cp_scaling.py [--ranks 2] [--build build] [--model bench/models/long-seq.pbtxt]

The contenders run in alternating windows, best of 3 each (this machine's
timings swing by +-20% between identical runs). See docs/performance.md.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from train_throughput import description  # noqa: E402

REPEATS = 3


def gptc_run(build, mpirun, model, steps, ranks, mesh, extra=()):
    """(tok/s after the first step, MiB rank 0's training added to its
    resident memory: activations, state and buffers, without the compiler
    and libraries)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [os.path.join(build, "bin", "gptc"), "train", model,
               "--steps", str(steps + 1), "--eval-interval", "0", "--log-interval", "0",
               "--checkpoint", os.path.join(tmp, "c.ckpt")]
        if ranks > 1:
            cmd = [mpirun, "-np", str(ranks)] + cmd + ["--mesh", mesh] + list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("gptc train failed:\n" + p.stderr)
    rate = float(re.search(r"([0-9.]+) tok/s after the first step", p.stderr).group(1))
    peak = float(re.search(r"training added (\d+) bytes", p.stderr).group(1)) / 2**20
    return rate, peak


WORKER = r'''
import os, resource, sys, time, torch, torch.distributed as dist
import torch.nn.functional as F
import torch.distributed.nn.functional as dnn
sys.path.insert(0, %(bench)r)
from gpt_torch import GPT
from train_throughput import description
torch.set_num_threads(%(threads)d)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
d = description(%(model)r)
T, chunk = d["seq"], d["seq"] // (2 * world)
order = [c for r in range(world) for c in (r, 2 * world - 1 - r)]   # the ranks' order
mine = order[2 * rank:2 * rank + 2]
pos = torch.cat([torch.arange(c * chunk, (c + 1) * chunk) for c in mine])
back = torch.cat([torch.arange(order.index(c) * chunk, (order.index(c) + 1) * chunk)
                  for c in range(2 * world)])                       # gathered -> sequence order
mask = pos[:, None] >= torch.arange(T)[None, :]

def gather(x):   # [b, heads, 2 chunk, d] -> [b, heads, T, d] in sequence order
    return torch.cat(dnn.all_gather(x.contiguous()), dim=2)[:, :, back]

def block_forward(self, x):
    b, t, c = x.shape
    a = self.ln_1(x)
    q, k, v = (m(a).view(b, t, self.heads, c // self.heads).transpose(1, 2)
               for m in (self.q, self.k, self.v))
    y = F.scaled_dot_product_attention(q, gather(k), gather(v), attn_mask=mask)
    x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
    return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

torch.manual_seed(0)
model = GPT(d["vocab"], d["ctx"], d["layers"], d["heads"], d["width"])
for blk in model.h:
    blk.forward = block_forward.__get__(blk)
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
data = open("/usr/share/common-licenses/GPL-3", "rb").read()
g = torch.Generator().manual_seed(0)   # every rank the same rows
def step():
    starts = torch.randint(0, len(data) - T - 1, (d["batch"],), generator=g)
    t = torch.tensor([list(data[s:s + T + 1]) for s in starts.tolist()])
    idx, tgt = t[:, :-1][:, pos], t[:, 1:][:, pos]
    opt.zero_grad(set_to_none=True)
    x = model.wte(idx) + model.wpe(pos)
    for blk in model.h:
        x = blk(x)
    logits = F.linear(model.ln_f(x), model.wte.weight)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                           reduction="sum") / (d["batch"] * T)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
for _ in range(2):
    step()
dist.barrier()
start = time.perf_counter()
for _ in range(%(steps)d):
    step()
dist.barrier()
rate = %(steps)d * d["batch"] * T / (time.perf_counter() - start)
if rank == 0:
    print("RATE", rate, "PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
dist.destroy_process_group()
'''


def torch_run(model, steps, ranks, threads):
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        open(script, "w").write(WORKER % dict(bench=os.path.join(ROOT, "bench"), model=model,
                                              threads=threads, steps=steps))
        procs = []
        for r in range(ranks):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29519",
                       RANK=str(r), WORLD_SIZE=str(ranks))
            procs.append(subprocess.Popen([sys.executable, script], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate() for p in procs]
        if any(p.returncode for p in procs):
            sys.exit("PyTorch context parallelism failed:\n" + "\n".join(o[1] for o in outs))
        m = re.search(r"RATE ([0-9.]+) PEAK ([0-9.]+)", outs[0][0])
        return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mpirun", default="mpirun.mpich")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--model", default=os.path.join(ROOT, "bench", "models", "long-seq.pbtxt"))
    args = ap.parse_args()
    import torch
    n, cores = args.ranks, os.cpu_count()
    d = description(args.model)
    print("cores %d; PyTorch %s (gloo); gptc under %s; %s: batch %d x %d tokens"
          % (cores, torch.__version__, args.mpirun, os.path.basename(args.model),
             d["batch"], d["seq"]))
    contenders = (
        ("gptc cp=%d" % n, lambda: gptc_run(args.build, args.mpirun, args.model, args.steps,
                                            n, "cp=%d" % n)),
        ("gptc cp=%d ag" % n, lambda: gptc_run(args.build, args.mpirun, args.model, args.steps,
                                               n, "cp=%d" % n,
                                               ["--context-attention=all-gather"])),
        ("torch cp=%d" % n, lambda: torch_run(args.model, args.steps, n, max(1, cores // n))),
        ("gptc dp=%d" % n, lambda: gptc_run(args.build, args.mpirun, args.model, args.steps,
                                            n, "dp=%d" % n)),
        ("gptc 1 rank", lambda: gptc_run(args.build, args.mpirun, args.model, args.steps,
                                         1, "")),
    )
    best = dict((name, (0.0, 0.0)) for name, _ in contenders)
    for _ in range(REPEATS):
        for name, run in contenders:
            rate, peak = run()
            if rate > best[name][0]:
                best[name] = (rate, peak)
    for name, _ in contenders:
        print("%-14s %8.0f tok/s, rank 0 %s %7.1f MiB"
              % (name, best[name][0],
                 "peak resident" if name.startswith("torch") else "training added",
                 best[name][1]))
    cp, tcp = best["gptc cp=%d" % n][0], best["torch cp=%d" % n][0]
    ag = best["gptc cp=%d ag" % n][0]
    dp, one = best["gptc dp=%d" % n][0], best["gptc 1 rank"][0]
    print("gptc ring cp / PyTorch all-gather cp %.2fx; gptc all-gather cp / PyTorch %.2fx; "
          "gptc ring / gptc all-gather %.2fx; gptc ring cp / gptc dp %.2fx; "
          "gptc ring cp / one rank %.2fx"
          % (cp / tcp, ag / tcp, cp / ag, cp / dp, cp / one))


if __name__ == "__main__":
    main()
