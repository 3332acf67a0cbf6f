#!/usr/bin/env python3
"""Runs the linalg lowerings of gptc ops and checks their numbers.

`gen OUT.mlir REF.npz` writes a module whose @main applies gptc ops to
random constant inputs and prints each result (printMemrefF32), and the
NumPy (float64) results they must equal. `check OUT.txt REF.npz` reads what
mlir-runner printed and compares, result by result (relative error below
1e-5 of the result's largest magnitude).
"""
import re
import sys

import numpy as np

rng = np.random.default_rng(7)


def dense(a):
    body = np.array2string(np.asarray(a, np.float32), separator=", ",
                           threshold=1 << 30, floatmode="unique")
    return body.replace("\n", "")


def ty(shape, elem="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


class Module:
    def __init__(self):
        self.lines, self.refs, self.n = [], [], 0

    def const(self, a):
        self.n += 1
        name = f"%c{self.n}"
        self.lines.append(f"  {name} = arith.constant dense<{dense(a)}> : {ty(a.shape)}")
        return name

    def iconst(self, a):
        self.n += 1
        name = f"%c{self.n}"
        body = np.array2string(np.asarray(a, np.int32), separator=", ",
                               threshold=1 << 30).replace("\n", "")
        self.lines.append(f"  {name} = arith.constant dense<{body}> : {ty(a.shape, 'i32')}")
        return name

    def show(self, value, shape, ref):
        """Prints an already computed value."""
        self.n += 1
        self.lines.append(f"  %u{self.n} = tensor.cast {value} : {ty(shape)} to tensor<*xf32>")
        self.lines.append(f"  call @printMemrefF32(%u{self.n}) : (tensor<*xf32>) -> ()")
        self.refs.append(np.asarray(ref, np.float64))

    def op(self, text, shape, ref):
        self.n += 1
        name = f"%r{self.n}"
        self.lines.append(f"  {name} = {text}")
        self.lines.append(f"  %u{self.n} = tensor.cast {name} : {ty(shape)} to tensor<*xf32>")
        self.lines.append(f"  call @printMemrefF32(%u{self.n}) : (tensor<*xf32>) -> ()")
        self.refs.append(np.asarray(ref, np.float64))

    def text(self):
        return ("func.func private @printMemrefF32(tensor<*xf32>)\n"
                "func.func @main() {\n" + "\n".join(self.lines) +
                "\n  return\n}\n")


def build():
    m = Module()
    f = lambda *s: rng.standard_normal(s).astype(np.float32)

    # Contractions: plain, transposed operands, batched, linear with bias.
    a, b = f(3, 5), f(5, 4)
    ca, cb = m.const(a), m.const(b)
    m.op(f"gptc.matmul {ca}, {cb} : {ty(a.shape)}, {ty(b.shape)} -> {ty((3, 4))}",
         (3, 4), a.astype(np.float64) @ b)
    at, bt = f(5, 3), f(4, 5)
    cat, cbt = m.const(at), m.const(bt)
    m.op(f"gptc.matmul {cat}, {cbt} transpose_lhs transpose_rhs : {ty(at.shape)}, {ty(bt.shape)} -> {ty((3, 4))}",
         (3, 4), at.T.astype(np.float64) @ bt.T)
    x, y = f(2, 3, 4, 5), f(2, 3, 6, 5)
    cx, cy = m.const(x), m.const(y)
    m.op(f"gptc.matmul {cx}, {cy} transpose_rhs : {ty(x.shape)}, {ty(y.shape)} -> {ty((2, 3, 4, 6))}",
         (2, 3, 4, 6), np.einsum("abik,abjk->abij", x.astype(np.float64), y))
    xl, w, bias = f(2, 3, 8), f(6, 8), f(6)
    cxl, cw, cb2 = m.const(xl), m.const(w), m.const(bias)
    m.op(f"gptc.linear {cxl}, {cw}, {cb2} : {ty(xl.shape)}, {ty(w.shape)}, {ty(bias.shape)} -> {ty((2, 3, 6))}",
         (2, 3, 6), xl.astype(np.float64) @ w.T + bias)

    # Row normalizations.
    xn, g, be = f(2, 3, 16), f(16), f(16)
    cxn, cg, cbe = m.const(xn), m.const(g), m.const(be)
    xd = xn.astype(np.float64)
    mean = xd.mean(-1, keepdims=True)
    var = ((xd - mean) ** 2).mean(-1, keepdims=True)
    m.op(f"gptc.layer_norm {cxn}, {cg}, {cbe} eps 1.0e-05 : {ty(xn.shape)}, {ty(g.shape)}, {ty(be.shape)} -> {ty(xn.shape)}",
         xn.shape, (xd - mean) / np.sqrt(var + 1e-5) * g + be)
    xs = f(4, 9) * 3
    cxs = m.const(xs)
    e = np.exp(xs.astype(np.float64) - xs.max(-1, keepdims=True))
    m.op(f"gptc.softmax {cxs} : {ty(xs.shape)}", xs.shape, e / e.sum(-1, keepdims=True))

    # Data movement and sums.
    xr = f(2, 3, 4)
    cxr = m.const(xr)
    m.op(f"gptc.reduce_sum {cxr} [0, 2] : {ty(xr.shape)} -> {ty((3,))}", (3,),
         xr.astype(np.float64).sum((0, 2)))
    m.op(f"gptc.transpose {cxr} [2, 0, 1] : {ty(xr.shape)} -> {ty((4, 2, 3))}",
         (4, 2, 3), xr.transpose(2, 0, 1))
    m.op(f"gptc.reshape {cxr} : {ty(xr.shape)} -> {ty((4, 6))}", (4, 6),
         xr.reshape(4, 6))
    m.op(f"gptc.broadcast {cb2} [0, 2] : {ty((6,))} -> {ty((2, 6, 3))}",
         (2, 6, 3), np.broadcast_to(bias[None, :, None], (2, 6, 3)))
    m.op(f"gptc.concat {cxr}, {cxr} axis 2 : {ty(xr.shape)}, {ty(xr.shape)} -> {ty((2, 3, 8))}",
         (2, 3, 8), np.concatenate([xr, xr], 2))
    m.lines.append(f"  %s:2 = gptc.split {cxr} axis 1 : {ty(xr.shape)} -> {ty((2, 1, 4))}, {ty((2, 2, 4))}")
    m.op(f"gptc.add %s#1, %s#1 : {ty((2, 2, 4))}", (2, 2, 4), 2 * xr[:, 1:].astype(np.float64))

    # Gradients of the row normalizations.
    y = e / e.sum(-1, keepdims=True)
    dy = f(4, 9)
    cyy, cdy = m.const(y.astype(np.float32)), m.const(dy)
    yd = y.astype(np.float32).astype(np.float64)
    m.op(f"gptc.softmax_grad {cyy}, {cdy} : {ty(y.shape)}", y.shape,
         yd * (dy - (dy * yd).sum(-1, keepdims=True)))
    dyn = f(2, 3, 16)
    cdyn = m.const(dyn)
    m.lines.append(f"  %lg:3 = gptc.layer_norm_grad {cxn}, {cg}, {cdyn} eps 1.0e-05 : "
                   f"{ty(xn.shape)}, {ty(g.shape)}, {ty(dyn.shape)} -> {ty(xn.shape)}, {ty(g.shape)}, {ty(g.shape)}")
    rstd = 1 / np.sqrt(var + 1e-5)
    nrm = (xd - mean) * rstd
    dn = dyn * g
    dx = rstd * (dn - dn.mean(-1, keepdims=True) - nrm * (dn * nrm).mean(-1, keepdims=True))
    m.show("%lg#0", xn.shape, dx)
    m.show("%lg#1", g.shape, (dyn * nrm).sum((0, 1)))
    m.show("%lg#2", g.shape, dyn.sum((0, 1)))

    # Embedding, plain and as a block of rows [2, 8) of a larger table;
    # its gradient, a scatter-add.
    table, ids = f(6, 5), rng.integers(0, 10, (2, 3)).astype(np.int32)
    ct, cids = m.const(table), m.iconst(ids)
    ids6 = ids % 6
    cids6 = m.iconst(ids6)
    m.op(f"gptc.embedding {cids6}, {ct} : {ty(ids.shape, 'i32')}, {ty(table.shape)} -> {ty((2, 3, 5))}",
         (2, 3, 5), table[ids6])
    m.lines.append("  %off = arith.constant dense<2> : tensor<i32>")
    block = np.where(((ids - 2) >= 0)[..., None] & ((ids - 2) < 6)[..., None],
                     table[np.clip(ids - 2, 0, 5)], 0)
    m.op(f"gptc.embedding {cids}, {ct} offset %off : {ty(ids.shape, 'i32')}, {ty(table.shape)} -> {ty((2, 3, 5))}",
         (2, 3, 5), block)
    ge = f(2, 3, 5)
    cge = m.const(ge)
    scatter = np.zeros((6, 5))
    for (i, j), v in np.ndenumerate(ids):
        if 0 <= v - 2 < 6:
            scatter[v - 2] += ge[i, j]
    m.op(f"gptc.embedding_grad {cids}, {cge} offset %off : {ty(ids.shape, 'i32')}, {ty(ge.shape)} -> {ty((6, 5))}",
         (6, 5), scatter)

    # Cross-entropy: the mean over kept labels (label 3 ignored), then over a
    # normalizer; its gradient.
    logits, labels = f(2, 4, 7) * 2, rng.integers(0, 7, (2, 4)).astype(np.int32)
    labels[0, 1] = 3
    cl, clab = m.const(logits), m.iconst(labels)
    ld = logits.astype(np.float64)
    lse = np.log(np.exp(ld - ld.max(-1, keepdims=True)).sum(-1)) + ld.max(-1)
    per = lse - np.take_along_axis(ld, labels[..., None], -1)[..., 0]
    kept = labels != 3
    m.op(f"gptc.cross_entropy {cl}, {clab} ignore 3 : {ty(logits.shape)}, {ty(labels.shape, 'i32')} -> tensor<f32>",
         (), per[kept].sum() / kept.sum())
    m.lines.append("  %norm = arith.constant dense<20.0> : tensor<f32>")
    m.op(f"gptc.cross_entropy {cl}, {clab} over %norm : {ty(logits.shape)}, {ty(labels.shape, 'i32')}, tensor<f32> -> tensor<f32>",
         (), per.sum() / 20)
    m.lines.append("  %dl = arith.constant dense<0.5> : tensor<f32>")
    p = np.exp(ld - lse[..., None])
    onehot = np.eye(7)[labels]
    grad = 0.5 * (p - onehot) / kept.sum() * kept[..., None]
    m.op(f"gptc.cross_entropy_grad {cl}, {clab}, %dl ignore 3 : {ty(logits.shape)}, {ty(labels.shape, 'i32')}, tensor<f32> -> {ty(logits.shape)}",
         logits.shape, grad)
    return m


def parse(text):
    """The numbers of each printed memref, in order."""
    out = []
    for block in text.split("Unranked Memref")[1:]:
        body = block.split("data =", 1)[1]
        out.append(np.array([float(v) for v in re.findall(r"[-+0-9.eE]+(?:nan|inf)?", body)]))
    return out


def main():
    mode = sys.argv[1]
    if mode == "gen":
        m = build()
        open(sys.argv[2], "w").write(m.text())
        np.savez(sys.argv[3], *m.refs)
        return 0
    refs = np.load(sys.argv[3])
    got = parse(open(sys.argv[2]).read())
    expected = [refs[f"arr_{i}"] for i in range(len(refs.files))]
    if len(got) != len(expected):
        print(f"FAIL: {len(got)} results printed, {len(expected)} expected")
        return 1
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        e = e.reshape(-1)
        if g.size != e.size:
            print(f"FAIL: result {i} has {g.size} elements, expected {e.size}")
            return 1
        err = np.abs(g - e).max() / max(np.abs(e).max(), 1e-30)
        worst = max(worst, err)
        if err > 1e-5:
            print(f"FAIL: result {i} off by {err:.3g} (relative)")
            return 1
    print(f"{len(got)} results match NumPy (worst relative error {worst:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
