#!/usr/bin/env python3
"""The cost model against measured CPU runs: calibrates this machine
(`mpirun -np N gptc calibrate`), asks `gptc plan` for every plan of a model
on N processes, trains a spread of them (the best data-parallel, tensor-
parallel and pipeline plans, ZeRO-3, a small-microbatch pipeline, full
and selective recomputation) with
`mpirun -np N gptc train`, alternating the plans in rounds and keeping each
one's best step time, and prints predicted against measured step time and
whether the predicted order holds. Usage:
  bench/plan_accuracy.py [--model bench/models/mid-4x256.pbtxt] [--ranks 2]"""
import argparse
import os
import re
import subprocess
import tempfile


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gptc", default="build/bin/gptc")
    ap.add_argument("--mpirun", default="mpirun.mpich")
    ap.add_argument("--model", default="bench/models/mid-4x256.pbtxt")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    hw = os.path.join(tmp, "cpu.pbtxt")
    run([a.mpirun, "-np", str(a.ranks), a.gptc, "calibrate", "-o", hw])
    table = run([a.gptc, "plan", a.model, "--hardware", hw, "--devices",
                 str(a.ranks), "--top", "1000"])
    rows = []
    for line in table.splitlines():
        m = re.match(r"\s+(\d+)\s+(\S+)\s+(\d)\s+(on|-)\s+(\d+) x (\d+) seqs?\s+"
                     r"(\S+(?: v2| full| selective)?)\s+([\d.]+) (ms|s)\s",
                     line)
        if m:
            t = float(m.group(8)) * (1e-3 if m.group(9) == "ms" else 1)
            rows.append(dict(mesh=m.group(2), zero=int(m.group(3)),
                             sp=m.group(4) == "on", micro=int(m.group(5)),
                             seqs=int(m.group(6)), sched=m.group(7),
                             predicted=t))
    # A spread: the best plan of each kind.
    def first(pred):
        return next((r for r in rows if pred(r)), None)
    picks = [first(lambda r: "tp" not in r["mesh"] and "pp" not in r["mesh"]
                   and r["zero"] < 3),
             first(lambda r: r["zero"] == 3),
             first(lambda r: "tp" in r["mesh"]),
             first(lambda r: "pp" in r["mesh"] and r["sched"] == "1f1b"),
             first(lambda r: "pp" in r["mesh"] and "interleaved" in r["sched"]),
             first(lambda r: "pp" in r["mesh"] and r["seqs"] > 1),
             first(lambda r: r["sched"] == "recompute full"),
             first(lambda r: r["sched"] == "recompute selective")]
    picks = [p for i, p in enumerate(picks) if p and p not in picks[:i]]
    ckpt = os.path.join(tmp, "c.ckpt")
    for p in picks:
        p["measured"] = float("inf")
    for _ in range(a.rounds):
        for p in picks:
            cmd = [a.mpirun, "-np", str(a.ranks), a.gptc, "train", a.model,
                   "--mesh", p["mesh"], "--zero-stage", str(p["zero"]),
                   "--grad-accum", str(p["micro"]), "--steps", str(a.steps),
                   "--eval-interval", "0", "--log-interval", "0",
                   "--checkpoint", ckpt, "--overwrite"]
            if p["sp"]:
                cmd.append("--sequence-parallel")
            if "pp" in p["mesh"]:
                cmd.append("--pipeline-schedule=" + p["sched"].split()[0])
            if p["sched"].startswith("recompute"):
                cmd.append("--recompute=" + p["sched"].split()[1])
            out = run(cmd)
            m = re.search(r"steps in [\d.]+ s; (\d+) tok/s after the first",
                          out)
            tokens = int(re.search(r"batch (\d+) x (\d+)", out).group(1)) * \
                int(re.search(r"batch (\d+) x (\d+)", out).group(2))
            p["measured"] = min(p["measured"], tokens / int(m.group(1)))
    print(f"{'plan':<44} {'predicted':>10} {'measured':>10} {'error':>7}")
    for p in picks:
        name = (f"{p['mesh']} zero {p['zero']}{' sp' if p['sp'] else ''} "
                f"{p['micro']}x{p['seqs']} {p['sched']}")
        err = p["predicted"] / p["measured"] - 1
        print(f"{name:<44} {p['predicted']*1e3:>8.1f}ms "
              f"{p['measured']*1e3:>8.1f}ms {err:>+6.0%}")
    order_p = sorted(range(len(picks)), key=lambda i: picks[i]["predicted"])
    order_m = sorted(range(len(picks)), key=lambda i: picks[i]["measured"])
    print("predicted order:", [i + 1 for i in order_p])
    print("measured order: ", [i + 1 for i in order_m])
    # Pairs the model separates by more than 10%: does the measurement
    # order them the same way?
    pairs = right = 0
    for i in range(len(picks)):
        for j in range(i + 1, len(picks)):
            a, b = picks[i], picks[j]
            if max(a["predicted"], b["predicted"]) < \
                    1.1 * min(a["predicted"], b["predicted"]):
                continue
            pairs += 1
            right += (a["predicted"] < b["predicted"]) == \
                (a["measured"] < b["measured"])
    worst = max(abs(p["predicted"] / p["measured"] - 1) for p in picks)
    print(f"pairs predicted >10% apart ordered as measured: {right} of "
          f"{pairs}; largest error {worst:.0%}")


if __name__ == "__main__":
    main()
