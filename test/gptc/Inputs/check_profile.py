#!/usr/bin/env python3
"""Checks a --profile-json file against the costs derived here from each
kernel's operands (independently of the runtime's KernelProfile.cpp).

    check_profile.py PROFILE STEPS [FUNCTION=CALLS ...]

FUNCTION=CALLS: every kernel of FUNCTION ran CALLS times (default: each
function's kernels ran STEPS times). Prints one summary line.
"""
import json
import math
import sys

SIZES = {"F32": 4, "F64": 8, "I32": 4, "I64": 8, "BF16": 2, "F16": 2}
GEMM = {"LINEAR", "MATMUL"}
ATTENTION = {"CAUSAL_ATTENTION", "CAUSAL_ATTENTION_GRAD"}
COLLECTIVE = {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_SLICE",
              "ALL_REDUCE_MAX"}
OTHER = {"CONSTANT", "IOTA", "RESHAPE", "ACCUMULATE", "LEARNING_RATE",
         "SHARD_OFFSET", "LOSS_SCALE_UPDATE", "CLIP_SCALE", "SQRT"}


def nbytes(t):
    return math.prod(t["shape"]) * SIZES[t["dtype"]]


def main():
    prof = json.load(open(sys.argv[1]))
    steps = int(sys.argv[2])
    calls = dict(a.split("=") for a in sys.argv[3:])
    failures = []
    counts = {"gemm": 0, "attention": 0, "memory": 0, "collective": 0, "other": 0}

    def fail(k, what):
        failures.append("%s#%d %s: %s" % (k["function"], k["index"], k["op"], what))
    if prof["steps"] != steps:
        failures.append("steps %s, expected %d" % (prof["steps"], steps))
    if not prof["copy_bytes_per_second"] > 0:
        failures.append("no copy bandwidth")
    total = 0.0
    for k in prof["kernels"]:
        op = k["op"]
        expected_class = ("gemm" if op in GEMM else "attention" if op in ATTENTION
                          else "collective" if op in COLLECTIVE
                          else "other" if op in OTHER else "memory")
        if k["class"] != expected_class:
            fail(k, "class %s, expected %s" % (k["class"], expected_class))
        counts[k["class"]] = counts.get(k["class"], 0) + 1
        want_calls = int(calls.get(k["function"], steps))
        if k["calls"] != want_calls:
            fail(k, "%d calls, expected %d" % (k["calls"], want_calls))
        b = sum(nbytes(t) for t in k["inputs"] + k["outputs"])
        if op == "EMBEDDING":
            table = [t for t in k["inputs"] if t["dtype"] not in ("I32", "I64")][0]
            b += math.prod(k["outputs"][0]["shape"]) * SIZES[table["dtype"]] - nbytes(table)
        if k["bytes"] != b:
            fail(k, "%s bytes, expected %d" % (k["bytes"], b))
        flops = 0
        if op == "LINEAR":
            flops = 2 * math.prod(k["outputs"][0]["shape"]) * k["inputs"][0]["shape"][-1]
        elif op == "MATMUL":
            lhs = k["inputs"][0]["shape"]
            depth = lhs[-2] if k.get("transpose_lhs") else lhs[-1]
            flops = 2 * math.prod(k["outputs"][0]["shape"]) * depth
        elif op in ATTENTION:
            bb, t, c = k["inputs"][0]["shape"]
            flops = 2 * bb * t * t * c * (2.5 if op.endswith("GRAD") else 1)
        if k["flops"] != flops:
            fail(k, "%s FLOPs, expected %d" % (k["flops"], flops))
        if not k["seconds"] >= 0:
            fail(k, "negative time")
        total += k["seconds"]
    # The kernels ran inside the profiled steps (10% and 1 ms for the
    # clocks' granularity).
    wall = prof["steps"] * prof["step_seconds"]
    if not 0 < total <= 1.1 * wall + 1e-3:
        failures.append("%.6f s in kernels, %.6f s of steps" % (total, wall))
    for f in failures:
        print("FAIL " + f)
    print("profile: %d kernels, %d GEMMs, %d attention, %d memory-bound, "
          "%d collectives, %d other, %d failures" % (
              len(prof["kernels"]), counts["gemm"], counts["attention"],
              counts["memory"], counts["collective"], counts["other"], len(failures)))


if __name__ == "__main__":
    main()
