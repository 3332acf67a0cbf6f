#!/usr/bin/env python3
"""Pipeline parallelism's throughput on the CPU: tokens/s of `gptc train`
on one process against the same model on P pipeline stages (P MPI
processes, GPipe, 1F1B, interleaved and zero-bubble ZB-H1, M
microbatches), same global
batch and cores, in one run, contenders alternating in short windows and
each keeping its best (this machine's speed swings 2x within a minute).

    python3 bench/pipeline_throughput.py [--build build] [--stages 2] [--microbatches 4]

One process uses every core; P processes use cores/P threads each (gptc
sets that itself). With the same cores in both, a pipeline cannot beat one
process: its backward recomputes each chunk's forward (4/3 of the FLOPs)
and its stages idle for the bubble, so its ideal is (1 - bubble) x 3/4 of
one process (0.6x for 2 stages and 4 microbatches); the figure measures
how close the runtime comes to that. ZB-H1's bubble is (p-1)/(3m+p-1)
(1/13 for 2 stages and 4 microbatches), so its ideal is 0.69x; its
ratio to 1F1B in the same run is what splitting the backward buys here.
See docs/performance.md.

    python3 bench/pipeline_throughput.py --replicas 2 [--stages 2] [--precision FP16]

compares, on P x R processes (pp=P, dp=R, 1F1B), ZeRO-1, ZeRO-2 and ZeRO-3
against ZeRO-1: what slicing the gradients' reduction (2) and the
parameters, gathered whole for each chunk run (3), cost on this machine.
--precision replaces the description's (FP16: dynamic loss scaling).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rate(build, mpirun, model, steps, stages=1, micro=1, schedule=None,
         replicas=1, zero=0):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [os.path.join(build, "bin", "gptc"), "train", model, "--steps", str(steps + 1),
               "--eval-interval", "0", "--log-interval", "0",
               "--checkpoint", os.path.join(tmp, "c.ckpt")]
        if stages > 1:
            mesh = "pp=%d" % stages + (",dp=%d" % replicas if replicas > 1 else "")
            cmd = [mpirun, "-np", str(stages * replicas)] + cmd + [
                "--mesh", mesh, "--grad-accum", str(micro),
                "--pipeline-schedule=" + schedule]
            if zero:
                cmd += ["--zero-stage", str(zero)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(" ".join(cmd) + "\n" + out.stderr[-2000:])
        return float(re.search(r"([0-9.]+) tok/s after the first step", out.stderr).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mpirun", default="mpirun.mpich")
    ap.add_argument("--model", default=os.path.join(ROOT, "bench", "models", "mid-4x256.pbtxt"))
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=1,
                    help="data-parallel replicas of the pipeline: compare ZeRO-1, 2, 3")
    ap.add_argument("--precision", choices=["FP32", "BF16", "FP16"],
                    help="the description's precision replaced")
    a = ap.parse_args()
    tmp_model = None
    model_name = os.path.basename(a.model) + (" in " + a.precision if a.precision else "")
    if a.precision:
        text = open(a.model).read()
        text, n = re.subn(r"precision:\s*\w+", "precision: " + a.precision, text)
        if n == 0:
            text = text.replace("training {", "training {\n  precision: %s" % a.precision, 1)
        tmp_model = tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False)
        tmp_model.write(text)
        tmp_model.close()
        a.model = tmp_model.name
    if a.replicas > 1:
        contenders = [("pp=%d,dp=%d ZeRO-%d" % (a.stages, a.replicas, z),
                       dict(stages=a.stages, micro=a.microbatches, schedule="1f1b",
                            replicas=a.replicas, zero=z)) for z in (1, 2, 3)]
        best = {name: 0.0 for name, _ in contenders}
        for _ in range(a.rounds):
            for name, kw in contenders:
                best[name] = max(best[name], rate(a.build, a.mpirun, a.model, a.steps, **kw))
        base = best[contenders[0][0]]
        print("model %s, %d cores, %d processes, %d microbatches, best of %d windows"
              % (model_name, os.cpu_count(), a.stages * a.replicas, a.microbatches,
                 a.rounds))
        for name, _ in contenders:
            print("%-24s %9.0f tok/s  %.2fx ZeRO-1" % (name, best[name], best[name] / base))
        if tmp_model:
            os.unlink(tmp_model.name)
        return
    contenders = [("one process", dict())]
    for s in ("gpipe", "1f1b", "interleaved", "zb-h1"):
        contenders.append(("pp=%d %s" % (a.stages, s),
                           dict(stages=a.stages, micro=a.microbatches, schedule=s)))
    best = {name: 0.0 for name, _ in contenders}
    for _ in range(a.rounds):
        for name, kw in contenders:
            best[name] = max(best[name], rate(a.build, a.mpirun, a.model, a.steps, **kw))
    base = best["one process"]
    print("model %s, %d cores, %d microbatches, best of %d windows"
          % (os.path.basename(a.model), os.cpu_count(), a.microbatches, a.rounds))
    for name, _ in contenders:
        print("%-22s %9.0f tok/s  %.2fx one process" % (name, best[name], best[name] / base))
    zb, f = "pp=%d zb-h1" % a.stages, "pp=%d 1f1b" % a.stages
    print("%s / %s: %.2fx" % (zb, f, best[zb] / best[f]))


if __name__ == "__main__":
    main()
