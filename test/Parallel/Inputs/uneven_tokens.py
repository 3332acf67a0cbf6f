"""Uneven real tokens over data-parallel ranks: gptc's weighting gives the
full-batch step; a plain mean of the ranks' means does not.

usage: uneven_tokens.py WORKDIR GPTC_RUN MPIRUN single.mlir weighted.mlir plain.mlir

single.mlir is the one-device @train_step for the global batch; the other
two are 2-rank data-parallel programs (each rank holds half the rows) with
token weighting on and off. The ranks' labels ignore (label -1) 5% and 60%
of their positions. One step from the same random parameters; prints one
line per program that the lit test matches.
"""
import os
import re
import subprocess
import sys

import numpy as np


def role_name(attrs):
    """An argument's name by its role: a parameter's own, "m:<name>" and
    "v:<name>" for its moments, "tokens", "labels", "step"."""
    param = re.search(r'gptc\.param = "([^"]*)"', attrs)
    if param:
        return param.group(1)
    state = re.search(r'gptc\.state = #gptc\.state<(\w+)(?: "([^"]*)")?>', attrs)
    if state:
        return state.group(1) + ":" + state.group(2) if state.group(2) else state.group(1)
    data = re.search(r'gptc\.input = #gptc\.input<(\w+)>', attrs)
    return data.group(1) if data else ""


def signature(path):
    """(dtype, shape, role) of each @train_step argument."""
    text = open(path).read()
    start = text.index("func.func @train_step(")
    header = text[start:text.index(") -> (", start)]
    args = []
    for piece in re.split(r", (?=%arg\d+:)", header[len("func.func @train_step("):]):
        m = re.match(r"%arg\d+: tensor<([^>]*)>(.*)", piece)
        dims = m.group(1).split("x")
        dtype = {"f32": np.float32, "i32": np.int32}[dims[-1]]
        shape = tuple(int(d) for d in dims[:-1])
        args.append((dtype, shape, role_name(m.group(2))))
    return args


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(" ".join(cmd[:6]) + " ...\n" + r.stdout + r.stderr)
        sys.exit(1)


def outputs(directory, count):
    return [np.load(os.path.join(directory, "%d.npy" % i)) for i in range(count)]


def main():
    work, gptc_run, mpirun, single, weighted, plain = sys.argv[1:7]
    rng = np.random.default_rng(7)
    args = signature(single)
    n = sum(1 for a in args if a[2] and not a[2].startswith(("m:", "v:")) and a[2] not in ("step", "tokens", "labels"))
    B, T = [a for a in args if a[2] == "tokens"][0][1]
    tokens = rng.integers(0, 256, size=(B, T), dtype=np.int32)
    labels = rng.integers(0, 256, size=(B, T), dtype=np.int32)
    half = B // 2
    # Rank 0's rows keep 95% of their labels, rank 1's 40%.
    labels[:half][rng.random((half, T)) < 0.05] = -1
    labels[half:][rng.random((B - half, T)) < 0.60] = -1
    kept = [(labels[:half] >= 0).sum(), (labels[half:] >= 0).sum()]

    files = []
    for i, (dtype, shape, role) in enumerate(args):
        if role == "tokens" or role == "labels":
            whole = tokens if role == "tokens" else labels
            np.save(os.path.join(work, "in%d.npy" % i), whole)
            for r in range(2):
                np.save(os.path.join(work, "in%d.rank%d.npy" % (i, r)), whole[r * half:(r + 1) * half])
            files.append(("in%d.npy" % i, "in%d.rank%%r.npy" % i))
            continue
        if role == "step" or role.startswith(("m:", "v:")):
            value = np.zeros(shape, dtype)
        else:
            value = (rng.standard_normal(shape) * 0.05).astype(dtype)
        np.save(os.path.join(work, "in%d.npy" % i), value)
        files.append(("in%d.npy" % i, "in%d.npy" % i))

    def inputs(which):
        return ["--input=" + os.path.join(work, f[which]) for f in files]

    run([gptc_run, single, "--function=train_step", "--output-dir=" + os.path.join(work, "single")] + inputs(0))
    ref = outputs(os.path.join(work, "single"), 3 * n + 3)
    print("tokens kept: rank 0 %d, rank 1 %d" % tuple(kept))
    for name, program in (("weighted", weighted), ("plain mean", plain)):
        out = os.path.join(work, name.replace(" ", "_") + ".%r")
        run([mpirun, "-np", "2", gptc_run, program, "--mpi", "--function=train_step",
             "--output-dir=" + out] + inputs(1))
        ranks = [outputs(out.replace("%r", str(r)), 3 * n + 3) for r in range(2)]
        got = ranks[0]
        loss = abs(float(got[3 * n]) - float(ref[3 * n])) / abs(float(ref[3 * n]))
        norm = abs(float(got[3 * n + 1]) - float(ref[3 * n + 1])) / abs(float(ref[3 * n + 1]))
        params = max(float(np.max(np.abs(got[i] - ref[i]))) / max(float(np.max(np.abs(ref[i]))), 1e-30)
                     for i in range(n))
        same = all(np.array_equal(a, b) for a, b in zip(ranks[0], ranks[1]))
        verdict = "matches the full batch" if max(loss, norm) < 1e-5 else "differs from the full batch"
        print("%s: loss %.2g, gradient norm %.2g, parameters %.2g relative; ranks %s; %s"
              % (name, loss, norm, params, "bit-identical" if same else "DIFFERENT", verdict))


if __name__ == "__main__":
    main()
