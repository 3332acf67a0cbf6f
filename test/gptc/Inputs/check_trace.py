"""Checks a `gptc train --trace` file and prints one summary line.

usage: check_trace.py TRACE.json RANK

The file must be a Chrome trace (JSON, traceEvents) of process RANK whose
slices are steps, evaluations and checkpoints on track 0 and kernels on
track 1; every kernel must lie inside a step or an evaluation, and every
step must hold kernels. Prints the counts by category and the kernel
names that contain "ALL_REDUCE" (collectives), or FAIL lines.
"""
import json
import sys
from collections import Counter


def main():
    path, rank = sys.argv[1], int(sys.argv[2])
    events = json.load(open(path))["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    failures = []
    if any(e["pid"] != rank for e in events):
        failures.append("an event of another process")
    outer = [e for e in slices if e["tid"] == 0]
    kernels = [e for e in slices if e["tid"] == 1]
    inside = Counter()
    for k in kernels:
        host = [o for o in outer if o["cat"] in ("step", "evaluate") and
                o["ts"] <= k["ts"] + 1e-3 and k["ts"] + k["dur"] <= o["ts"] + o["dur"] + 1e-3]
        if not host:
            failures.append("kernel %s outside every step" % k["name"])
        else:
            inside[host[0]["name"]] += 1
    for o in outer:
        if o["cat"] == "step" and not inside[o["name"]]:
            failures.append("%s holds no kernel" % o["name"])
    for f in failures[:5]:
        print("FAIL", f)
    counts = Counter(e["cat"] for e in slices)
    collectives = sum("ALL_REDUCE" in k["name"] for k in kernels)
    print("trace: rank %d, %d steps, %d evaluations, %d kernels (%d all-reduces), %d failures" % (
        rank, counts["step"], counts["evaluate"], counts["kernel"], collectives, len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
