"""Every kernel of a model's step, as the GPU runs it and as plain loops.

emulate-model.test: the kernel functions gptc-outline-kernels builds for the
CUDA target are lowered twice, by the CUDA pipeline (run under the NVVM
emulation) and by plain loops over the same linalg, and each kernel's
results must agree on the same inputs.

  split FULL.mlir KERNELS.mlir MANIFEST.json
      The module @gptc_kernels of FULL as a module of its own, and each
      kernel's inputs and results (shapes, element types).
  main LOWERED.mlir MANIFEST.json OUT.mlir
      LOWERED (host functions taking inputs then results as memrefs) with a
      main that fills each kernel's inputs from a seed (gptc_emu_fill), calls
      it and appends its results (at most SAMPLE elements of each, evenly
      strided) to GPTC_EMU_DUMP's file (gptc_emu_dump).
  compare MANIFEST.json GPU.bin LOOPS.bin
      The two dumps, result by result.
"""

import json
import re
import sys

import numpy as np

TYPE = re.compile(r"tensor<((?:\d+x)*)([a-z0-9]+)>")
KINDS = {"f32": (0, np.float32), "bf16": (1, np.uint16), "f16": (2, np.float16),
         "i32": (3, np.int32), "i64": (4, np.int64), "f64": (5, np.float64)}


def parse_types(text):
    return [([int(d) for d in dims.split("x") if d], elt)
            for dims, elt in TYPE.findall(text)]


def split(full, kernels_out, manifest_out):
    lines = open(full).read().splitlines()
    start = lines.index("  module @gptc_kernels {")
    end = lines.index("  }", start)
    body = [l[2:] for l in lines[start + 1:end]]
    open(kernels_out, "w").write("module {\n" + "\n".join(body) + "\n}\n")
    manifest = []
    for l in body:
        m = re.match(r"  func\.func @(\w+)\((.*)\) -> (.*) \{$", l)
        if not m:
            continue
        manifest.append({"name": m.group(1), "inputs": parse_types(m.group(2)),
                         "results": parse_types(m.group(3))})
    json.dump(manifest, open(manifest_out, "w"))
    print(f"{len(manifest)} kernels")
    return 0


# A result of more elements is compared at every stride(count)th element
# (the same ones on both sides): GPT-2's embedding table and its moments
# are 38.6M elements each.
SAMPLE = 1 << 18


def stride(count):
    return -(-count // SAMPLE)


def memref(shape, elt):
    return "memref<" + "".join(f"{d}x" for d in shape) + elt + ">"


def main_function(lowered, manifest_path, out):
    manifest = json.load(open(manifest_path))
    text = open(lowered).read().rstrip()
    assert text.endswith("}"), "expected a module"
    body = []
    n = 0

    def address(value, mtype):
        nonlocal n
        n += 1
        body.append(f"    %p{n} = memref.extract_aligned_pointer_as_index {value} : {mtype} -> index")
        body.append(f"    %a{n} = arith.index_cast %p{n} : index to i64")
        return f"%a{n}"

    def const(v, t="i64"):
        nonlocal n
        n += 1
        body.append(f"    %c{n} = arith.constant {v} : {t}")
        return f"%c{n}"

    for k, kernel in enumerate(manifest):
        args, types = [], []
        for i, (shape, elt) in enumerate(kernel["inputs"] + kernel["results"]):
            t = memref(shape, elt)
            v = f"%k{k}_{i}"
            body.append(f"    {v} = memref.alloc() : {t}")
            args.append(v)
            types.append(t)
            if i < len(kernel["inputs"]):
                count = int(np.prod(shape)) if shape else 1
                body.append(f"    call @gptc_emu_fill({address(v, t)}, {const(count)}, "
                            f"{const(KINDS[elt][0], 'i32')}, {const(1000 * k + i)}) : "
                            f"(i64, i64, i32, i64) -> ()")
        body.append(f"    call @{kernel['name']}({', '.join(args)}) : ({', '.join(types)}) -> ()")
        for i, (shape, elt) in enumerate(kernel["results"]):
            j = len(kernel["inputs"]) + i
            count = int(np.prod(shape)) if shape else 1
            size = np.dtype(KINDS[elt][1]).itemsize
            body.append(f"    call @gptc_emu_dump({address(args[j], types[j])}, {const(count)}, "
                        f"{const(size)}, {const(stride(count))}) : (i64, i64, i64, i64) -> ()")
        for v, t in zip(args, types):
            body.append(f"    memref.dealloc {v} : {t}")
    extra = ["  func.func private @gptc_emu_fill(i64, i64, i32, i64)",
             "  func.func private @gptc_emu_dump(i64, i64, i64, i64)",
             "  func.func @main() {"] + body + ["    return", "  }"]
    open(out, "w").write(text[:-1] + "\n".join(extra) + "\n}\n")
    return 0


def as_float(raw, elt):
    if elt == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64)


def compare(manifest_path, gpu_path, loops_path):
    manifest = json.load(open(manifest_path))
    gpu, loops = open(gpu_path, "rb").read(), open(loops_path, "rb").read()
    if len(gpu) != len(loops):
        print(f"FAIL: {len(gpu)} bytes of GPU results, {len(loops)} of loops'")
        return 1
    offset, results, elements, finite, worst = 0, 0, 0, 0, {}
    for kernel in manifest:
        for i, (shape, elt) in enumerate(kernel["results"]):
            count = int(np.prod(shape)) if shape else 1
            count = -(-count // stride(count))
            dtype = KINDS[elt][1]
            nbytes = count * np.dtype(dtype).itemsize
            g = as_float(np.frombuffer(gpu, dtype, count, offset), elt)
            e = as_float(np.frombuffer(loops, dtype, count, offset), elt)
            offset += nbytes
            results += 1
            elements += count
            what = f"{kernel['name']} result {i} ({elt})"
            if not np.array_equal(np.isnan(g), np.isnan(e)) or \
                    not np.array_equal(np.isinf(g), np.isinf(e)) or \
                    not np.array_equal(g[np.isinf(g)], e[np.isinf(e)]):
                print(f"FAIL: {what}: NaN or infinity where the other has none")
                return 1
            ok = np.isfinite(e)
            finite += int(ok.sum())
            if not ok.any():
                continue
            scale = max(np.abs(e[ok]).max(), 1e-30)
            err = np.abs(g[ok] - e[ok]).max() / scale
            # f32: the lanes' reduction order against the loops' (1e-6
            # typically); 16-bit results: one rounding step apart (2^-7
            # of the largest magnitude at most in bf16, 2^-10 in f16).
            tolerance = {"f32": 1e-4, "f64": 1e-4, "bf16": 8e-3, "f16": 1e-3}.get(elt, 0)
            if err > tolerance:
                print(f"FAIL: {what} off by {err:.3g} of its largest magnitude")
                return 1
            worst[elt] = max(worst.get(elt, 0.0), err)
    if offset != len(gpu):
        print("FAIL: the dumps hold more than the manifest's results")
        return 1
    if finite < 0.9 * elements:
        print(f"FAIL: only {finite} of {elements} result elements are finite")
        return 1
    errors = ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items()))
    print(f"{len(manifest)} kernels, {results} results: the GPU's equal the loops' "
          f"(worst relative error {errors})")
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "split":
        sys.exit(split(*sys.argv[2:5]))
    if mode == "main":
        sys.exit(main_function(*sys.argv[2:5]))
    if mode == "compare":
        sys.exit(compare(*sys.argv[2:5]))
    sys.exit(f"unknown mode {mode}")
