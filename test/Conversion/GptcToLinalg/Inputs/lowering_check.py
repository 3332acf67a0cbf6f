#!/usr/bin/env python3
"""Runs the linalg lowerings of gptc ops and checks their numbers.

`gen OUT.mlir REF.npz` writes a module whose @main applies gptc ops to
random constant inputs and prints each result (printMemrefF32), and the
NumPy (float64) results they must equal. `check OUT.txt REF.npz` reads what
mlir-runner printed and compares, result by result (relative error below
1e-5 of the result's largest magnitude).
(test/Inputs/printed_results.py parses and compares.)
"""
import os
import sys

import math

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "Inputs"))
import printed_results  # noqa: E402

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

    def copy(self, value, t):
        """A writable copy of `value` (printing a folded constant directly
        would hand the runtime a read-only buffer)."""
        self.n += 1
        self.lines.append(f"  %e{self.n} = tensor.empty() : {t}")
        self.lines.append(f"  %k{self.n} = linalg.copy ins({value} : {t}) outs(%e{self.n} : {t}) -> {t}")
        return f"%k{self.n}"

    def show(self, value, shape, ref):
        """Prints an already computed value."""
        value = self.copy(value, ty(shape))
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

    def show_i32(self, value, shape, ref):
        value = self.copy(value, ty(shape, "i32"))
        self.n += 1
        self.lines.append(f"  %u{self.n} = tensor.cast {value} : {ty(shape, 'i32')} to tensor<*xi32>")
        self.lines.append(f"  call @printMemrefI32(%u{self.n}) : (tensor<*xi32>) -> ()")
        self.refs.append(np.asarray(ref, np.float64))

    def text(self):
        return ("func.func private @printMemrefF32(tensor<*xf32>)\n"
                "func.func private @printMemrefI32(tensor<*xi32>)\n"
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

    # The elementwise functions of imported graphs (gptc.unary, gptc.binary).
    xu = f(3, 7) * 2
    pos = np.abs(f(3, 7)) + 0.1
    cxu, cpos = m.const(xu), m.const(pos)
    xud, pud = xu.astype(np.float64), pos.astype(np.float64)
    erf = np.vectorize(math.erf)
    unaries = {
        "neg": (cxu, -xud), "sqrt": (cpos, np.sqrt(pud)), "exp": (cxu, np.exp(xud)),
        "log": (cpos, np.log(pud)), "tanh": (cxu, np.tanh(xud)),
        "erf": (cxu, erf(xud)), "reciprocal": (cpos, 1 / pud),
        "relu": (cxu, np.maximum(xud, 0)), "sigmoid": (cxu, 1 / (1 + np.exp(-xud))),
        "abs": (cxu, np.abs(xud)), "step": (cxu, (xud > 0).astype(np.float64)),
        "sign": (cxu, np.sign(xud)),
    }
    for fn, (operand, ref) in unaries.items():
        m.op(f"gptc.unary {fn} {operand} : {ty(xu.shape)}", xu.shape, ref)
    binaries = {"sub": xud - pud, "mul": xud * pud, "div": xud / pud}
    for fn, ref in binaries.items():
        m.op(f"gptc.binary {fn} {cxu}, {cpos} : {ty(xu.shape)}", xu.shape, ref)
    m.op(f"gptc.binary pow {cpos}, {cxu} : {ty(xu.shape)}", xu.shape, pud ** xud)

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

    # Vocabulary parallelism: the padded vocabulary (8 ids, 7 real; the pad
    # column's large logit must count nowhere) in two blocks of 4; the
    # partials summed over the blocks give the same loss and gradient.
    padded = np.concatenate([logits, np.full((2, 4, 1), 50.0, np.float32)], -1)
    b0, b1 = m.const(padded[..., :4]), m.const(padded[..., 4:])
    m.op(f"gptc.row_max {cl} : {ty(logits.shape)} -> {ty((2, 4))}", (2, 4), ld.max(-1))
    m.lines.append(f"  %gmax = gptc.row_max {cl} : {ty(logits.shape)} -> {ty((2, 4))}")
    m.lines.append("  %o0 = arith.constant dense<0> : tensor<i32>")
    m.lines.append("  %o4 = arith.constant dense<4> : tensor<i32>")
    blk = ty((2, 4, 4))
    rows = ty((2, 4))
    lab = ty(labels.shape, "i32")
    m.lines.append(f"  %p0:2 = gptc.vocab_parallel_partials {b0}, %gmax, {clab} offset %o0 vocab 7 : {blk}, {rows}, {lab} -> {rows}, {rows}")
    m.lines.append(f"  %p1:2 = gptc.vocab_parallel_partials {b1}, %gmax, {clab} offset %o4 vocab 7 : {blk}, {rows}, {lab} -> {rows}, {rows}")
    m.lines.append(f"  %se = gptc.add %p0#0, %p1#0 : {rows}")
    m.lines.append(f"  %tg = gptc.add %p0#1, %p1#1 : {rows}")
    m.show("%se", (2, 4), np.exp(ld - ld.max(-1, keepdims=True)).sum(-1))
    m.op(f"gptc.vocab_parallel_loss %gmax, %se, %tg, {clab} ignore 3 : {rows}, {lab} -> tensor<f32>",
         (), per[kept].sum() / kept.sum())
    m.lines.append(f"  %vg:2 = gptc.vocab_parallel_loss_grad %se, {clab}, %dl ignore 3 : {rows}, {lab}, tensor<f32>")
    m.op(f"gptc.vocab_parallel_partials_grad {b1}, %gmax, {clab} offset %o4, %vg#0, %vg#1 vocab 7 : {blk}, {rows}, {lab}, {rows}, {rows} -> {blk}",
         (2, 4, 4), np.concatenate([grad[..., 4:], np.zeros((2, 4, 1))], -1))

    # Gradient accumulation: two microbatches of two rows, their sums added.
    xa = f(4, 3)
    cxa = m.const(xa)
    m.lines.append(f"  %acc = gptc.accumulate {cxa} microbatches 2 : ({ty((4, 3))}) -> ({ty((3,))}) {{")
    m.lines.append(f"  ^bb0(%mb: {ty((2, 3))}):")
    m.lines.append(f"    %part = gptc.reduce_sum %mb [0] : {ty((2, 3))} -> {ty((3,))}")
    m.lines.append(f"    gptc.yield %part : {ty((3,))}")
    m.lines.append("  }")
    m.show("%acc", (3,), xa.astype(np.float64).sum(0))

    # Causal attention (2 heads of width 4) and its gradient.
    qa, ka, va, da = f(2, 5, 8), f(2, 5, 8), f(2, 5, 8), f(2, 5, 8)
    cqa, cka, cva, cda = (m.const(a) for a in (qa, ka, va, da))
    att = ty((2, 5, 8))
    split = lambda a: a.astype(np.float64).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    merge = lambda a: a.transpose(0, 2, 1, 3).reshape(2, 5, 8)
    Q, K, V, DY = (split(a) for a in (qa, ka, va, da))
    S = Q @ K.transpose(0, 1, 3, 2) / 2.0
    S = np.where(np.tril(np.ones((5, 5), bool)), S, -np.inf)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    m.op(f"gptc.causal_attention {cqa}, {cka}, {cva} heads 2 : {att}, {att}, {att} -> {att}",
         (2, 5, 8), merge(P @ V))
    dV = P.transpose(0, 1, 3, 2) @ DY
    dP = DY @ V.transpose(0, 1, 3, 2)
    dS = P * (dP - (P * dP).sum(-1, keepdims=True)) / 2.0
    dQ, dK = dS @ K, dS.transpose(0, 1, 3, 2) @ Q
    m.lines.append(f"  %ag:3 = gptc.causal_attention_grad {cqa}, {cka}, {cva}, {cda} heads 2 : "
                   f"{att}, {att}, {att}, {att} -> {att}, {att}, {att}")
    for i, r in enumerate((dQ, dK, dV)):
        m.show(f"%ag#{i}", (2, 5, 8), merge(r))

    # The optimizer: AdamW (plain, skipped, and two tensors in one
    # multi_adamw), the gradient norm, clipping, the schedule, fp16's loss
    # scaling and the token count.
    pw, gw, mw, vw = f(3, 4), f(3, 4), f(3, 4) * 0.1, np.abs(f(3, 4)) * 0.01
    pb, gb, mb, vb = f(4), f(4), f(4) * 0.1, np.abs(f(4)) * 0.01
    cpw, cgw, cmw, cvw = (m.const(a) for a in (pw, gw, mw, vw))
    cpb, cgb, cmb, cvb = (m.const(a) for a in (pb, gb, mb, vb))
    m.lines.append("  %lr = arith.constant dense<1.0e-02> : tensor<f32>")
    m.lines.append("  %step = arith.constant dense<4> : tensor<i32>")
    m.lines.append("  %scale = arith.constant dense<0.5> : tensor<f32>")
    m.lines.append("  %skip = arith.constant dense<1.0> : tensor<f32>")

    def adamw(p, g, mm, vv, wd, lr=1e-2, step=4, scale=0.5, b1=0.9, b2=0.95, eps=1e-8):
        p, g, mm, vv = (a.astype(np.float64) for a in (p, g, mm, vv))
        t = step + 1
        grad = g * scale
        m1 = mm + (1 - b1) * (grad - mm)
        v1 = vv * b2 + (1 - b2) * grad * grad
        denom = np.sqrt(v1) / np.sqrt(1 - b2 ** t) + eps
        return p * (1 - lr * wd) - lr / (1 - b1 ** t) * m1 / denom, m1, v1

    m.lines.append(f"  %aw:3 = gptc.adamw {cpw}, {cgw}, {cmw}, {cvw} lr %lr step %step scale %scale "
                   f"beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : {ty(pw.shape)}")
    for i, r in enumerate(adamw(pw, gw, mw, vw, 0.1)):
        m.show(f"%aw#{i}", pw.shape, r)
    m.lines.append(f"  %as:3 = gptc.adamw {cpw}, {cgw}, {cmw}, {cvw} lr %lr step %step scale %scale skip %skip "
                   f"beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : {ty(pw.shape)}")
    m.show("%as#0", pw.shape, pw)
    m.lines.append(f"  %ma:6 = gptc.multi_adamw ({cpw}, {cpb}) grads ({cgw}, {cgb}) m ({cmw}, {cmb}) "
                   f"v ({cvw}, {cvb}) lr %lr step %step scale %scale beta1 0.9 beta2 0.95 eps 1.0e-8 "
                   f"decays [0.1, 0.0] : {ty(pw.shape)}, {ty(pb.shape)}")
    rw, rb = adamw(pw, gw, mw, vw, 0.1), adamw(pb, gb, mb, vb, 0.0)
    for j in range(3):
        m.show(f"%ma#{j * 2}", pw.shape, rw[j])
        m.show(f"%ma#{j * 2 + 1}", pb.shape, rb[j])
    total = (gw.astype(np.float64) ** 2).sum() + (gb.astype(np.float64) ** 2).sum()
    m.op(f"gptc.global_norm {cgw}, {cgb} : {ty(gw.shape)}, {ty(gb.shape)}", (), np.sqrt(total))
    m.op(f"gptc.sum_squares {cgw}, {cgb} : {ty(gw.shape)}, {ty(gb.shape)}", (), total)
    m.lines.append("  %five = arith.constant dense<5.0> : tensor<f32>")
    m.lines.append("  %four = arith.constant dense<4.0> : tensor<f32>")
    m.op("gptc.clip_scale %five max 1.0", (), 1 / (5 + 1e-6))
    m.op("gptc.clip_scale %five max 1.0 loss_scale %four", (), min(1.0, 1 / (5 / 4 + 1e-6)) / 4)
    m.op("gptc.sqrt %five", (), np.sqrt(5))
    m.op("gptc.div %five, %four", (), 1.25)
    m.lines.append("  %s1 = arith.constant dense<1> : tensor<i32>")
    m.lines.append("  %s5 = arith.constant dense<5> : tensor<i32>")
    m.op('gptc.learning_rate %s1 peak 6.0e-4 min 6.0e-5 warmup 4 total 20 "cosine"', (), 6e-4 * 2 / 4)
    m.op('gptc.learning_rate %s5 peak 6.0e-4 min 6.0e-5 warmup 4 total 20 "cosine"', (),
         6e-5 + 0.5 * (1 + np.cos(np.pi * 1 / 16)) * (6e-4 - 6e-5))
    m.op('gptc.learning_rate %s5 peak 6.0e-4 min 6.0e-5 warmup 4 total 20 "linear"', (),
         6e-5 + (1 - 1 / 16) * (6e-4 - 6e-5))
    m.lines.append("  %withinf = arith.constant dense<[1.0, 0x7F800000, 2.0]> : tensor<3xf32>")
    m.op("gptc.found_inf %withinf : tensor<3xf32>", (), 1.0)
    m.op(f"gptc.found_inf {cgw} : {ty(gw.shape)}", (), 0.0)
    m.op(f"gptc.count_tokens {clab} ignore 3 : {ty(labels.shape, 'i32')}", (), kept.sum())
    m.lines.append("  %ls = arith.constant dense<1024.0> : tensor<f32>")
    m.lines.append("  %good = arith.constant dense<3> : tensor<i32>")
    m.lines.append("  %upd = arith.constant dense<7> : tensor<i32>")
    m.lines.append("  %ok = arith.constant dense<0.0> : tensor<f32>")
    m.lines.append("  %lsu:3 = gptc.loss_scale_update %ls, %good, %upd, %ok growth 2.0 backoff 0.5 interval 4")
    m.show("%lsu#0", (), 2048.0)
    m.show_i32("%lsu#1", (), 0)
    m.show_i32("%lsu#2", (), 8)
    m.lines.append("  %lso:3 = gptc.loss_scale_update %ls, %good, %upd, %skip growth 2.0 backoff 0.5 interval 4")
    m.show("%lso#0", (), 512.0)
    m.show_i32("%lso#1", (), 0)
    m.show_i32("%lso#2", (), 7)
    return m


def main():
    mode = sys.argv[1]
    if mode == "gen":
        m = build()
        open(sys.argv[2], "w").write(m.text())
        np.savez(sys.argv[3], *m.refs)
        return 0
    refs = np.load(sys.argv[3])
    got = printed_results.parse(open(sys.argv[2]).read())
    expected = [refs[f"arr_{i}"] for i in range(len(refs.files))]
    return printed_results.compare(got, expected, "results")

if __name__ == "__main__":
    sys.exit(main())
