#!/usr/bin/env python3
"""Runs the CUDA target's thread mapping on the CPU and checks its numbers.

No GPU is needed to check the index arithmetic gptc-gpu-map-kernel writes
(blocks x threads over the iteration space linearized row-major, the
guarded tail, temporaries between nests): the mapped `scf.parallel` loops
run as ordinary loops under mlir-runner, every (block, thread) pair in
turn.

`kernels OUT.mlir REF.npz` writes gptc kernel functions (tensor form, what
gptc-outline-kernels builds) and the inputs and float64 results.
`main MAPPED.mlir REF.npz OUT.mlir` appends to the mapped module (kernels
in destination-passing style on buffers) globals for the inputs and a
@main that calls each kernel and prints its results. `check OUT.txt
REF.npz` compares what mlir-runner printed (relative error below 1e-5 of
each result's largest magnitude).
(test/Inputs/printed_results.py parses and compares.)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "Inputs"))
import printed_results  # noqa: E402

rng = np.random.default_rng(11)


def ty(shape, kind="tensor", elt="f32"):
    return f"{kind}<" + "".join(f"{d}x" for d in shape) + elt + ">"


def tyx(x, kind="tensor"):
    """The type of array `x`: i32 labels, f32 otherwise."""
    return ty(x.shape, kind, "i32" if x.dtype == np.int32 else "f32")



def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_grad(x, dy):
    t = np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))
    dt = (1 - t * t) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x * x)
    return dy * (0.5 * (1 + t) + 0.5 * x * dt)


def cases():
    """(name, gptc body, inputs, results): the body names inputs %a0...
    and returns its results."""
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    out = []
    # 2,800 iterations: 11 blocks of 256, the last one 240 threads short.
    a, b = f(4, 100, 7), f(4, 100, 7)
    out.append(("ew", [
        f"%s = gptc.add %a0, %a1 : {ty(a.shape)}",
        f"%g = gptc.gelu %s : {ty(a.shape)}",
        f"return %g : {ty(a.shape)}"], [a, b], [gelu(a.astype(np.float64) + b)]))
    # 105 iterations: one block of 105 threads.
    c, d = f(3, 5, 7), f(3, 5, 7)
    out.append(("small", [
        f"%s = gptc.add %a0, %a1 : {ty(c.shape)}",
        f"return %s : {ty(c.shape)}"], [c, d], [c.astype(np.float64) + d]))
    # Two results fused from one producer: two launches, each recomputing it.
    x, dy = f(3, 300), f(3, 300)
    xs = x.astype(np.float64) + dy
    out.append(("two", [
        f"%s = gptc.add %a0, %a1 : {ty(x.shape)}",
        f"%g = gptc.gelu %s : {ty(x.shape)}",
        f"%d = gptc.gelu_grad %s, %a1 : {ty(x.shape)}",
        f"return %g, %d : {ty(x.shape)}, {ty(x.shape)}"],
        [x, dy], [gelu(xs), gelu_grad(xs, dy.astype(np.float64))]))
    # Row reductions (a thread per row) and the temporaries between nests.
    xn, g, be = f(5, 300), f(300), f(300)
    xd = xn.astype(np.float64)
    mean = xd.mean(-1, keepdims=True)
    var = ((xd - mean) ** 2).mean(-1, keepdims=True)
    out.append(("layer_norm", [
        f"%y = gptc.layer_norm %a0, %a1, %a2 eps 1.0e-05 : {ty(xn.shape)}, {ty(g.shape)}, {ty(be.shape)} -> {ty(xn.shape)}",
        f"return %y : {ty(xn.shape)}"],
        [xn, g, be], [(xd - mean) / np.sqrt(var + 1e-5) * g + be]))
    xs2 = f(7, 33) * 3
    e = np.exp(xs2.astype(np.float64) - xs2.max(-1, keepdims=True))
    out.append(("softmax", [
        f"%y = gptc.softmax %a0 : {ty(xs2.shape)}",
        f"return %y : {ty(xs2.shape)}"], [xs2], [e / e.sum(-1, keepdims=True)]))
    # A bias gradient's column sums over 3 x 501 rows: cut into 5 chunks of
    # 301 rows (the last one 299), a thread per (chunk, column), then a
    # thread per column combining its chunks.
    cs = f(3, 501, 20)
    out.append(("column_sums", [
        f"%s = gptc.reduce_sum %a0 [0, 1] : {ty(cs.shape)} -> {ty((20,))}",
        f"return %s : {ty((20,))}"], [cs], [cs.astype(np.float64).sum((0, 1))]))
    # Layer norm's gradient over 3 x 300 rows of 20: its weight and bias
    # gradients are one reduction with two results, cut into 3 chunks of
    # 300 rows and combined per column (both results from one pass).
    lx, lw, ldy = f(3, 300, 20), f(20), f(3, 300, 20)
    lxd, ldyd = lx.astype(np.float64), ldy.astype(np.float64)
    lmean = lxd.mean(-1, keepdims=True)
    lrstd = 1 / np.sqrt(((lxd - lmean) ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = (lxd - lmean) * lrstd
    g = ldyd * lw
    ldx = lrstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    out.append(("layer_norm_grad", [
        f"%dx, %dw, %db = gptc.layer_norm_grad %a0, %a1, %a2 eps 1.0e-05 : "
        f"{ty(lx.shape)}, {ty(lw.shape)}, {ty(ldy.shape)} -> {ty(lx.shape)}, {ty(lw.shape)}, {ty(lw.shape)}",
        f"return %dx, %dw, %db : {ty(lx.shape)}, {ty(lw.shape)}, {ty(lw.shape)}"],
        [lx, lw, ldy], [ldx, (ldyd * xhat).sum((0, 1)), ldyd.sum((0, 1))]))
    # Row kernels: the residual sum and layer norm after it in one nest (a
    # row per warp, the statistics in registers), both results written.
    ra, rb, rw, rbe = f(6, 50), f(6, 50), f(50), f(50)
    rs = ra.astype(np.float64) + rb
    rmean = rs.mean(-1, keepdims=True)
    rvar = ((rs - rmean) ** 2).mean(-1, keepdims=True)
    out.append(("add_layer_norm", [
        f"%s = gptc.add %a0, %a1 : {ty(ra.shape)}",
        f"%y = gptc.layer_norm %s, %a2, %a3 eps 1.0e-05 : {ty(ra.shape)}, {ty(rw.shape)}, {ty(rbe.shape)} -> {ty(ra.shape)}",
        f"return %s, %y : {ty(ra.shape)}, {ty(ra.shape)}"],
        [ra, rb, rw, rbe], [rs, (rs - rmean) / np.sqrt(rvar + 1e-5) * rw + rbe]))
    # Layer norm's gradient from a sum of three gradients, plus the
    # residual's: the row sums and the input gradient in one nest, the
    # weight and bias gradients (column sums reading the row statistics
    # the nest stores) after it.
    gx, gw = f(2, 300, 24), f(24)
    d0, d1, d2, res = f(2, 300, 24), f(2, 300, 24), f(2, 300, 24), f(2, 300, 24)
    gxd = gx.astype(np.float64)
    gdy = d0.astype(np.float64) + d1 + d2
    gmean = gxd.mean(-1, keepdims=True)
    grstd = 1 / np.sqrt(((gxd - gmean) ** 2).mean(-1, keepdims=True) + 1e-5)
    gxhat = (gxd - gmean) * grstd
    gg = gdy * gw
    gdx = grstd * (gg - gg.mean(-1, keepdims=True) - gxhat * (gg * gxhat).mean(-1, keepdims=True))
    t3 = ty(gx.shape)
    out.append(("add_add_layer_norm_grad", [
        f"%s0 = gptc.add %a2, %a3 : {t3}",
        f"%s1 = gptc.add %s0, %a4 : {t3}",
        f"%dx, %dw, %db = gptc.layer_norm_grad %a0, %a1, %s1 eps 1.0e-05 : "
        f"{t3}, {ty(gw.shape)}, {t3} -> {t3}, {ty(gw.shape)}, {ty(gw.shape)}",
        f"%r = gptc.add %a5, %dx : {t3}",
        f"return %dw, %db, %r : {ty(gw.shape)}, {ty(gw.shape)}, {t3}"],
        [gx, gw, d0, d1, d2, res],
        [(gdy * gxhat).sum((0, 1)), gdy.sum((0, 1)), res + gdx]))
    # The loss: per row the max and the log-sum-exp with the label's logit
    # (one nest), then the mean over the rows not ignored (reductions to
    # scalars after it); and its gradient, softmax minus the one-hot label.
    lg = f(3, 10, 37) * 2
    lb = rng.integers(0, 37, size=(3, 10)).astype(np.int32)
    lb[0, 3] = lb[2, 9] = -1
    lgd = lg.astype(np.float64)
    lse = np.log(np.exp(lgd - lgd.max(-1, keepdims=True)).sum(-1)) + lgd.max(-1)
    picked = np.take_along_axis(lgd, np.maximum(lb, 0)[..., None], -1)[..., 0]
    keep = lb != -1
    out.append(("cross_entropy", [
        f"%l = gptc.cross_entropy %a0, %a1 ignore -1 : {ty(lg.shape)}, {tyx(lb)} -> tensor<f32>",
        "return %l : tensor<f32>"], [lg, lb],
        [np.array(((lse - picked) * keep).sum() / keep.sum())]))
    # The gradient: the token count (a reduction to a scalar) runs before
    # the nest, which reads it.
    cg = np.array(0.5, np.float32)
    soft = np.exp(lgd - lse[..., None])
    onehot = (np.arange(37) == lb[..., None]).astype(np.float64)
    out.append(("cross_entropy_grad", [
        f"%d = gptc.cross_entropy_grad %a0, %a1, %a2 ignore -1 : {ty(lg.shape)}, {tyx(lb)}, tensor<f32> -> {ty(lg.shape)}",
        f"return %d : {ty(lg.shape)}"], [lg, lb, cg],
        [(soft - onehot) * 0.5 / keep.sum() * keep[..., None]]))
    # A reduction to a scalar (in f64) and the scalar code after it: the
    # loads sunk to their use, one thread running the run.
    gw, gb = f(20, 30), f(30)
    out.append(("global_norm", [
        f"%n = gptc.global_norm %a0, %a1 : {ty(gw.shape)}, {ty(gb.shape)}",
        "return %n : tensor<f32>"], [gw, gb],
        [np.sqrt((gw.astype(np.float64) ** 2).sum() + (gb.astype(np.float64) ** 2).sum())]))
    # A large one (90000 elements): cut into 5625 strided partials (a
    # thread each), then their sum; with a small tensor's beside it.
    bw = f(300, 300)
    out.append(("global_norm_split", [
        f"%n = gptc.global_norm %a0, %a1 : {ty(bw.shape)}, {ty(gb.shape)}",
        "return %n : tensor<f32>"], [bw, gb],
        [np.sqrt((bw.astype(np.float64) ** 2).sum() + (gb.astype(np.float64) ** 2).sum())]))
    # AdamW updates of two parameters scaled by the clipping scale of ten
    # gradients' norm: the scale is longer than a thread recomputes (the
    # norm's 10 loads and sums, its square root, the scale), so one thread
    # stores it to a temporary the two update nests load.
    grads = [f(6, 7) for _ in range(10)]
    norm = np.sqrt(sum((gr.astype(np.float64) ** 2).sum() for gr in grads))
    scale = min(1.0, 1.0 / (norm + 1e-6))
    params = [f(6, 7), f(6, 7)]
    moms = [f(6, 7), f(6, 7)]
    vels = [np.abs(f(6, 7)), np.abs(f(6, 7))]
    lr, step = np.array(1e-3, np.float32), np.array(4, np.int32)
    t = 5
    updates = []
    for pp, gg, mm, vv in zip(params, [grads[0], grads[9]], moms, vels):
        g64 = gg.astype(np.float64) * scale
        m1 = 0.9 * mm + 0.1 * g64
        v1 = 0.95 * vv + 0.05 * g64 * g64
        p1 = pp * (1 - 1e-3 * 0.1) - 1e-3 * (m1 / (1 - 0.9 ** t)) / (
            np.sqrt(v1 / (1 - 0.95 ** t)) + 1e-8)
        updates += [p1, m1, v1]
    gtys = ", ".join(ty(gr.shape) for gr in grads)
    names = ", ".join(f"%a{i}" for i in range(10))
    t67 = ty((6, 7))
    out.append(("clip_update", [
        f"%n = gptc.global_norm {names} : {gtys}",
        "%s = gptc.clip_scale %n max 1.0",
        f"%p0, %m0, %v0 = gptc.adamw %a10, %a0, %a12, %a14 lr %a16 step %a17 scale %s beta1 0.9 beta2 0.95 eps 1.0e-08 decay 0.1 : {t67}",
        f"%p9, %m9, %v9 = gptc.adamw %a11, %a9, %a13, %a15 lr %a16 step %a17 scale %s beta1 0.9 beta2 0.95 eps 1.0e-08 decay 0.1 : {t67}",
        f"return %p0, %m0, %v0, %p9, %m9, %v9 : " + ", ".join([t67] * 6)],
        grads + params + moms + vels + [lr, step], updates))
    # Token and position embeddings, their sum and the layer norm after it
    # (GPT-2's first kernel): the positions (gptc.iota) read the first 16
    # of 20 rows of their table as a broadcast, so the sum fuses into the
    # row kernel.
    ids = rng.integers(0, 50, (4, 16)).astype(np.int32)
    wte, wpe, eg, eb = f(50, 32), f(20, 32), f(32), f(32)
    ex = wte.astype(np.float64)[ids] + wpe.astype(np.float64)[None, :16]
    em = ex.mean(-1, keepdims=True)
    ev = ((ex - em) ** 2).mean(-1, keepdims=True)
    out.append(("embed_positions", [
        f"%e = gptc.embedding %a0, %a1 : {tyx(ids)}, {ty(wte.shape)} -> {ty(ex.shape)}",
        f"%p = gptc.iota dim 1 : {tyx(ids)}",
        f"%q = gptc.embedding %p, %a2 : {tyx(ids)}, {ty(wpe.shape)} -> {ty(ex.shape)}",
        f"%x = gptc.add %e, %q : {ty(ex.shape)}",
        f"%y = gptc.layer_norm %x, %a3, %a4 eps 1.0e-05 : {ty(ex.shape)}, {ty(eg.shape)}, {ty(eb.shape)} -> {ty(ex.shape)}",
        f"return %x, %y : {ty(ex.shape)}, {ty(ex.shape)}"],
        [ids, wte, wpe, eg, eb],
        [ex, (ex - em) / np.sqrt(ev + 1e-5) * eg + eb]))
    # Large elementwise nests (with the test's coarsen-min-elements=4096):
    # 4 iterations a thread, 8 x 64 x 48 = 24 blocks' worth, two results
    # (two launches) whose strides are 2 of dimension 0's slices, and
    # 3 x 64 x 64, whose stride is not a whole slice.
    cx, cy = f(8, 64, 48), f(8, 64, 48)
    cs = cx.astype(np.float64) + cy
    out.append(("coarse_two", [
        f"%s = gptc.add %a0, %a1 : {ty(cx.shape)}",
        f"%g = gptc.gelu %s : {ty(cx.shape)}",
        f"%d = gptc.gelu_grad %s, %a1 : {ty(cx.shape)}",
        f"return %g, %d : {ty(cx.shape)}, {ty(cx.shape)}"],
        [cx, cy], [gelu(cs), gelu_grad(cs, cy.astype(np.float64))]))
    gx, gy = f(3, 64, 64), f(3, 64, 64)
    out.append(("coarse_general", [
        f"%p = gptc.binary mul %a0, %a1 : {ty(gx.shape)}",
        f"return %p : {ty(gx.shape)}"], [gx, gy], [gx.astype(np.float64) * gy]))
    return out


def dense(a):
    if a.dtype == np.int32:
        return np.array2string(a, separator=", ", threshold=1 << 30).replace("\n", "")
    return np.array2string(np.asarray(a, np.float32), separator=", ",
                           threshold=1 << 30, floatmode="unique").replace("\n", "")


def main():
    mode = sys.argv[1]
    if mode == "kernels":
        lines, arrays = [], {}
        for name, body, inputs, results in cases():
            args = ", ".join(f"%a{i}: {tyx(x)}" for i, x in enumerate(inputs))
            rets = ", ".join(ty(r.shape) for r in results)
            lines.append(f"func.func @{name}({args}) -> ({rets}) {{")
            lines += ["  " + l for l in body]
            lines.append("}")
            for i, x in enumerate(inputs):
                arrays[f"{name}.in{i}"] = x
            for i, r in enumerate(results):
                arrays[f"{name}.out{i}"] = r
        open(sys.argv[2], "w").write("\n".join(lines) + "\n")
        np.savez(sys.argv[3], **arrays)
        return 0
    refs = np.load(sys.argv[3])
    names = [name for name, *_ in cases()]
    if mode == "main":
        text = open(sys.argv[2]).read().rstrip()
        assert text.endswith("}"), "expected a module"
        glob, body = [], []
        for name in names:
            ins = sorted((k for k in refs.files if k.startswith(name + ".in")),
                         key=lambda k: int(k.split(".in")[1]))
            outs = sorted((k for k in refs.files if k.startswith(name + ".out")),
                          key=lambda k: int(k.split(".out")[1]))
            args, types = [], []
            for k in ins:
                x = refs[k]
                sym = k.replace(".", "_")
                glob.append(f'  memref.global "private" constant @{sym} : {tyx(x, "memref")} = dense<{dense(x)}>')
                body.append(f"    %{sym} = memref.get_global @{sym} : {tyx(x, 'memref')}")
                args.append(f"%{sym}")
                types.append(tyx(x, "memref"))
            for k in outs:
                sym = k.replace(".", "_")
                body.append(f"    %{sym} = memref.alloc() : {ty(refs[k].shape, 'memref')}")
                args.append(f"%{sym}")
                types.append(ty(refs[k].shape, "memref"))
            body.append(f"    call @{name}({', '.join(args)}) : ({', '.join(types)}) -> ()")
            for k in outs:
                sym = k.replace(".", "_")
                body.append(f"    %u_{sym} = memref.cast %{sym} : {ty(refs[k].shape, 'memref')} to memref<*xf32>")
                body.append(f"    call @printMemrefF32(%u_{sym}) : (memref<*xf32>) -> ()")
        extra = (["  func.func private @printMemrefF32(memref<*xf32>)"] + glob +
                 ["  func.func @main() {"] + body + ["    return", "  }"])
        open(sys.argv[4], "w").write(text[:-1] + "\n".join(extra) + "\n}\n")
        return 0
    got = printed_results.parse(open(sys.argv[2]).read())
    expected = [refs[f"{n}.out{i}"] for n in names
                for i in range(sum(k.startswith(n + ".out") for k in refs.files))]
    return printed_results.compare(got, expected,
                                   "results of the GPU-mapped kernels")

if __name__ == "__main__":
    sys.exit(main())
