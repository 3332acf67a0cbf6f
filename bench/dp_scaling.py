#!/usr/bin/env python3
"""Data-parallel scaling on the CPU: tokens/s of gptc with 1 and N MPI ranks
against PyTorch DistributedDataParallel (gloo) with 1 and N processes, same
model, global batch, optimizer and cores, in one run; and the share of
gptc's step spent in collectives (from `gptc train --profile`). Also gptc's
tensor parallelism (with and without sequence parallelism) over the same N
ranks, which has no peer here; and gptc's data parallelism with its
gradient buckets against one collective per gradient (--bucket-mb 0), and
with its collectives overlapping the backward against each blocking
(--collective-overlap=false), each pair alternating.

    bench/.venv/bin/python bench/dp_scaling.py [--ranks 2] [--build build] [--buckets-only | --overlap-only] [--zero-stage Z]

One process uses every core; N processes use cores/N threads each (gptc
does that itself; the script sets torch's). Best of 3 windows each: this
machine's timings swing by +-20% between identical runs. See
docs/performance.md.
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
sys.path.insert(0, os.path.join(ROOT, "bench"))
REPEATS = 3
COLLECTIVES = ("ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER", "ALL_SLICE")


def gptc_rate(build, mpirun, model, steps, ranks, extra=(), mesh=None, repeats=REPEATS):
    """(best tok/s after the first step, collective share of kernel time)."""
    best, share = 0.0, 0.0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [os.path.join(build, "bin", "gptc"), "train", model,
                   "--steps", str(steps + 1), "--eval-interval", "0", "--profile",
                   "--checkpoint", os.path.join(tmp, "c.ckpt")] + list(extra)
            if ranks > 1:
                cmd = [mpirun, "-np", str(ranks)] + cmd + ["--mesh", mesh or "dp=%d" % ranks]
            env = dict(os.environ)
            env.pop("OPENBLAS_NUM_THREADS", None)
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            sys.exit("gptc train failed:\n" + p.stderr)
        rate = float(re.search(r"([0-9.]+) tok/s after the first step", p.stderr).group(1))
        if rate > best:
            best = rate
            kinds = dict((m.group(1), float(m.group(2))) for m in
                         re.finditer(r"^\s+([A-Z_]+)\s+([0-9.]+)%", p.stderr, re.M))
            share = sum(kinds.get(k, 0.0) for k in COLLECTIVES)
    return best, share


WORKER = r'''
import os, sys, time, torch, torch.distributed as dist
sys.path.insert(0, %(bench)r)
from gpt_torch import GPT
from train_throughput import description
torch.set_num_threads(%(threads)d)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
d = description(%(model)r)
torch.manual_seed(0)
model = GPT(d["vocab"], d["ctx"], d["layers"], d["heads"], d["width"])
if world > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
data = open("/usr/share/common-licenses/GPL-3", "rb").read()
g = torch.Generator().manual_seed(rank)
local = d["batch"] // world
def step():
    starts = torch.randint(0, len(data) - d["seq"] - 1, (local,), generator=g)
    t = torch.tensor([list(data[s:s + d["seq"] + 1]) for s in starts.tolist()])
    opt.zero_grad(set_to_none=True)
    model(t[:, :-1], t[:, 1:]).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
for _ in range(2):
    step()
best = 0.0
for _ in range(%(repeats)d):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(%(steps)d):
        step()
    dist.barrier()
    best = max(best, %(steps)d * d["batch"] * d["seq"] / (time.perf_counter() - start))
if rank == 0:
    print("RATE", best)
dist.destroy_process_group()
'''


def ddp_rate(model, steps, ranks, threads):
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        open(script, "w").write(WORKER % dict(bench=os.path.join(ROOT, "bench"), model=model,
                                              threads=threads, steps=steps, repeats=REPEATS))
        procs = []
        for r in range(ranks):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29517",
                       RANK=str(r), WORLD_SIZE=str(ranks))
            procs.append(subprocess.Popen([sys.executable, script], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate() for p in procs]
        if any(p.returncode for p in procs):
            sys.exit("DDP failed:\n" + "\n".join(o[1] for o in outs))
        return float(re.search(r"RATE ([0-9.]+)", outs[0][0]).group(1))


def paired_rates(build, mpirun, model, steps, ranks, contenders):
    """gptc data parallel under each (name, extra flags) of `contenders`,
    in alternating windows: (best tok/s, collective share) for each."""
    best = dict((name, (0.0, 0.0)) for name, _ in contenders)
    for _ in range(REPEATS):
        for name, extra in contenders:
            r = gptc_rate(build, mpirun, model, steps, ranks, extra, repeats=1)
            if r[0] > best[name][0]:
                best[name] = r
    return best


def bucket_rates(build, mpirun, model, steps, ranks, zero=0):
    """gptc data parallel (ZeRO stage `zero`) with its default buckets
    against one collective per tensor (--bucket-mb 0)."""
    base = ("--zero-stage", str(zero)) if zero else ()
    return paired_rates(build, mpirun, model, steps, ranks,
                        (("buckets", base), ("unbucketed", base + ("--bucket-mb", "0"))))


def overlap_rates(build, mpirun, model, steps, ranks, zero=0):
    """gptc data parallel (ZeRO stage `zero`) with its collectives kept in
    flight over the later kernels the compiler's schedule allows (the
    default) against each completing where it stands
    (--collective-overlap=false). The collective share is then the time
    the step waited for them: what the overlap left exposed."""
    base = ("--zero-stage", str(zero)) if zero else ()
    return paired_rates(build, mpirun, model, steps, ranks,
                        (("overlap", base), ("blocking", base + ("--collective-overlap=false",))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mpirun", default="mpirun.mpich")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json", default="")
    ap.add_argument("--buckets-only", action="store_true",
                    help="only gptc's data parallelism with and without gradient buckets")
    ap.add_argument("--overlap-only", action="store_true",
                    help="only gptc's data parallelism with and without collectives "
                         "overlapping the backward")
    ap.add_argument("--zero-stage", type=int, default=0,
                    help="the ZeRO stage of the bucket and overlap comparisons (1-3: "
                         "parameter all-gathers and gradient reduce-scatters in buckets too)")
    args = ap.parse_args()
    cores = os.cpu_count()
    import torch
    print("cores %d; PyTorch %s (DDP, gloo); gptc under %s" % (cores, torch.__version__, args.mpirun))
    results = []
    for model, steps in ((os.path.join(ROOT, "models", "tiny.pbtxt"), 60),
                         (os.path.join(ROOT, "bench", "models", "gpt2-small-ctx64.pbtxt"), 2)):
        row = dict(model=os.path.basename(model))
        if not args.buckets_only:
            o = overlap_rates(args.build, args.mpirun, model, steps, args.ranks, args.zero_stage)
            row["gptc_overlap_%d" % args.ranks], row["comm_share_overlap_%d" % args.ranks] = o["overlap"]
            row["gptc_blocking_%d" % args.ranks], row["comm_share_blocking_%d" % args.ranks] = o["blocking"]
            print("%-24s %d ranks data parallel, ZeRO-%d: gptc %8.0f tok/s with collectives "
                  "overlapping the backward (%.1f%% waiting for them), %8.0f tok/s each blocking "
                  "(%.1f%% in them): %.2fx"
                  % (row["model"], args.ranks, args.zero_stage, o["overlap"][0], o["overlap"][1],
                     o["blocking"][0], o["blocking"][1], o["overlap"][0] / o["blocking"][0]))
            if args.overlap_only:
                results.append(row)
                continue
        b = bucket_rates(args.build, args.mpirun, model, steps, args.ranks, args.zero_stage)
        row["gptc_buckets_%d" % args.ranks], row["comm_share_buckets_%d" % args.ranks] = b["buckets"]
        row["gptc_unbucketed_%d" % args.ranks], row["comm_share_unbucketed_%d" % args.ranks] = b["unbucketed"]
        print("%-24s %d ranks data parallel, ZeRO-%d: gptc %8.0f tok/s with buckets "
              "(%.1f%% in collectives), %8.0f tok/s with one collective per tensor (%.1f%%): %.2fx"
              % (row["model"], args.ranks, args.zero_stage, b["buckets"][0], b["buckets"][1], b["unbucketed"][0],
                 b["unbucketed"][1], b["buckets"][0] / b["unbucketed"][0]))
        if args.buckets_only:
            results.append(row)
            continue
        for n in (1, args.ranks):
            g, share = gptc_rate(args.build, args.mpirun, model, steps, n)
            t = ddp_rate(model, steps, n, max(1, cores // n))
            row["gptc_%d" % n], row["comm_share_%d" % n], row["ddp_%d" % n] = g, share, t
        n = args.ranks
        # Tensor parallelism (and sequence parallelism) over the same ranks;
        # PyTorch has no peer in this script.
        for name, extra in (("tp", ()), ("tp_sp", ("--sequence-parallel",))):
            g, share = gptc_rate(args.build, args.mpirun, model, steps, n, extra,
                                 mesh="tp=%d" % n)
            row["gptc_%s_%d" % (name, n)], row["comm_share_%s_%d" % (name, n)] = g, share
        row["gptc_scaling"] = row["gptc_%d" % n] / row["gptc_1"]
        row["ddp_scaling"] = row["ddp_%d" % n] / row["ddp_1"]
        row["gptc_vs_ddp"] = row["gptc_%d" % n] / row["ddp_%d" % n]
        results.append(row)
        print("%-24s 1 rank: gptc %8.0f tok/s, torch %8.0f | %d ranks: gptc %8.0f tok/s "
              "(%.2fx, %.1f%% of kernel time in collectives), DDP %8.0f (%.2fx) | gptc/DDP %.2f"
              % (row["model"], row["gptc_1"], row["ddp_1"], n, row["gptc_%d" % n],
                 row["gptc_scaling"], row["comm_share_%d" % n], row["ddp_%d" % n],
                 row["ddp_scaling"], row["gptc_vs_ddp"]))
        print("%-24s %d ranks tensor parallel: gptc %8.0f tok/s (%.1f%% in collectives); "
              "with sequence parallelism %8.0f tok/s (%.1f%%)"
              % (row["model"], n, row["gptc_tp_%d" % n], row["comm_share_tp_%d" % n],
                 row["gptc_tp_sp_%d" % n], row["comm_share_tp_sp_%d" % n]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
