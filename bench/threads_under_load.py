#!/usr/bin/env python3
"""Training throughput on a busy machine: gptc and PyTorch eager, each on an
idle machine and while another process keeps every core busy, in one run.

    .venv/bin/python bench/threads_under_load.py [--build build] [--model M]

The load is one busy-looping process per core of this process's affinity
mask (or --load N), started before and stopped after each loaded window. On a loaded
machine the scheduler gives a training process about its fair share (with
one busy process per core, half the cores), so 2x slower than idle is the
floor; a thread pool that spins while the thread it waits for is not
running, or that runs more threads than it has cores, falls well below it.

Contenders, each in alternating short windows, best window kept:
- gptc: `gptc train` as a user runs it (no variable set);
- gptc, libgomp's spin: the same with GOMP_SPINCOUNT=300000, GNU OpenMP's
  own default, which gptc bounded on 2026-12-06 (the figure before);
- torch eager: PyTorch's own defaults (its thread count, its OpenMP).
Prints, per contender, idle and loaded tok/s and their ratio.
"""
import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_throughput as tt  # noqa: E402


def spin():
    while True:
        pass


class Load:
    def __init__(self, cores):
        self.cores = cores
        self.procs = []

    def __enter__(self):
        ctx = multiprocessing.get_context("fork")
        self.procs = [ctx.Process(target=spin, daemon=True)
                      for _ in range(self.cores)]
        for p in self.procs:
            p.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *args):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(tt.ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(tt.ROOT, "bench/models/mid-4x256.pbtxt"))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", type=int, default=0,
                    help="busy processes (default: one per core)")
    ap.add_argument("--also-spin", type=int, action="append", default=[],
                    help="add gptc with GOMP_SPINCOUNT=N (to tune the default)")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    busy = args.load or cores
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS"):
        env.pop(k, None)
    spin_env = dict(env, GOMP_SPINCOUNT="300000")
    contenders = {
        "gptc": lambda: tt.GptcContender(args.build, args.model, env=env),
        "gptc, libgomp's spin": lambda: tt.GptcContender(args.build, args.model,
                                                         env=spin_env),
        "torch eager": lambda: tt.TorchContender(args.model, "eager", cores),
    }
    for n in args.also_spin:
        contenders["gptc, spin %d" % n] = (
            lambda n=n: tt.GptcContender(args.build, args.model,
                                         env=dict(env, GOMP_SPINCOUNT=str(n))))
    made = {name: make() for name, make in contenders.items()}
    best = {(name, load): 0.0 for name in made for load in (False, True)}
    for _ in range(args.rounds):
        for loaded in (False, True):
            for name, c in made.items():
                if loaded:
                    with Load(busy):
                        rate = c.window(args.steps)
                else:
                    rate = c.window(args.steps)
                best[(name, loaded)] = max(best[(name, loaded)], rate)
    for c in made.values():
        c.finish()
    print("model %s, %d cores, load: %d busy processes, best of %d windows"
          % (os.path.basename(args.model), cores, busy, args.rounds))
    for name in made:
        idle, loaded = best[(name, False)], best[(name, True)]
        print("%-22s idle %8.0f tok/s  loaded %8.0f tok/s  slowdown %.2fx"
              % (name, idle, loaded, idle / loaded))


if __name__ == "__main__":
    main()
