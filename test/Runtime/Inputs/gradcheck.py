#!/usr/bin/env python3
"""Finite-difference check of gptc's gradients, in float64.

For each case (a small @forward function returning a scalar loss), runs
gptc-autodiff and the compiled code (gptc-run) to get the gradient of every
parameter, then compares, for each parameter p and a random direction u,

    <grad_p, u>   with   (L(p + h u) - L(p - h u)) / 2h

computed by running the compiled @forward. Every kernel and every
vector-Jacobian rule is exercised this way. Usage:

    gradcheck.py GPTC_OPT GPTC_RUN [--model MODEL.mlir] [--kernels]

With --kernels the compiled functions group their elementwise ops into
generated kernels (gptc-form-kernels), so the check covers the code the
CPU target generates (in float64) instead of the runtime's reference
kernels.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

# The step along a unit direction. For a whole model the rounding of the
# loss (a mean over every position) dominates below 1e-4; for one op 1e-5 is
# well inside both the rounding and the truncation error.
H_OP, H_MODEL = 1e-5, 1e-4
TOLERANCE = 1e-6

# Parameters whose gradient is exactly zero: the key bias adds q.b to every
# score of a query, which softmax ignores. Their gradient must be zero (to
# rounding) rather than match a finite difference of zero.
EXACTLY_ZERO = re.compile(r"attn\.k_proj\.bias$")

# Each case: the body of @forward over f64 tensors. Parameters carry
# gptc.param; other arguments are data (ids, labels, the projection `r`).
# `r` (shape [C, 1] -> used as a linear weight [1, C]) weights the last
# dimension so that invariances (softmax rows sum to 1, layer norm) do not
# make the check vacuous.
CASES = {}


def case(name, signature, body, result, width):
    """Wraps `body` (ending in %y of type `result`) into a loss:
    sum(linear(%y, %r)) with %r : tensor<1xWIDTHxf64>."""
    CASES[name] = f"""
func.func @forward({signature}, %r: tensor<1x{width}xf64> {{gptc.input = #gptc.input<graph "r">}}) -> tensor<f64> {{
{body}
  %proj = gptc.linear %y, %r : {result}, tensor<1x{width}xf64> -> {re.sub(r'x' + str(width) + 'xf64>$', 'x1xf64>', result)}
  %loss = gptc.reduce_sum %proj [{', '.join(str(i) for i in range(result.count('x')))}] : {re.sub(r'x' + str(width) + 'xf64>$', 'x1xf64>', result)} -> tensor<f64>
  return %loss : tensor<f64>
}}"""


T2 = "tensor<2x3x4xf64>"
case("linear", '%x: tensor<2x3x4xf64> {gptc.param = "x"}, %w: tensor<5x4xf64> {gptc.param = "w"}, %b: tensor<5xf64> {gptc.param = "b"}',
     "  %y = gptc.linear %x, %w, %b : tensor<2x3x4xf64>, tensor<5x4xf64>, tensor<5xf64> -> tensor<2x3x5xf64>",
     "tensor<2x3x5xf64>", 5)
case("matmul", '%a: tensor<2x3x4xf64> {gptc.param = "a"}, %b: tensor<2x4x5xf64> {gptc.param = "b"}, %at: tensor<2x4x3xf64> {gptc.param = "at"}, %bt: tensor<2x5x4xf64> {gptc.param = "bt"}',
     """  %c0 = gptc.matmul %a, %b : tensor<2x3x4xf64>, tensor<2x4x5xf64> -> tensor<2x3x5xf64>
  %c1 = gptc.matmul %a, %bt transpose_rhs : tensor<2x3x4xf64>, tensor<2x5x4xf64> -> tensor<2x3x5xf64>
  %c2 = gptc.matmul %at, %b transpose_lhs : tensor<2x4x3xf64>, tensor<2x4x5xf64> -> tensor<2x3x5xf64>
  %c3 = gptc.matmul %at, %bt transpose_lhs transpose_rhs : tensor<2x4x3xf64>, tensor<2x5x4xf64> -> tensor<2x3x5xf64>
  %s0 = gptc.add %c0, %c1 : tensor<2x3x5xf64>
  %s1 = gptc.add %c2, %c3 : tensor<2x3x5xf64>
  %s2 = gptc.gelu %s1 : tensor<2x3x5xf64>
  %y = gptc.add %s0, %s2 : tensor<2x3x5xf64>""", "tensor<2x3x5xf64>", 5)
case("embedding", '%t: tensor<7x4xf64> {gptc.param = "table"}, %ids: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>}',
     "  %y = gptc.embedding %ids, %t : tensor<2x3xi32>, tensor<7x4xf64> -> tensor<2x3x4xf64>", T2, 4)
case("layer_norm", f'%x: {T2} {{gptc.param = "x"}}, %g: tensor<4xf64> {{gptc.param = "g"}}, %b: tensor<4xf64> {{gptc.param = "b"}}',
     f"  %y = gptc.layer_norm %x, %g, %b eps 1.0e-05 : {T2}, tensor<4xf64>, tensor<4xf64> -> {T2}", T2, 4)
case("gelu", f'%x: {T2} {{gptc.param = "x"}}', f"  %y = gptc.gelu %x : {T2}", T2, 4)
case("gelu_exact", f'%x: {T2} {{gptc.param = "x"}}', f"  %y = gptc.gelu %x exact : {T2}", T2, 4)
case("softmax", f'%x: {T2} {{gptc.param = "x"}}', f"  %y = gptc.softmax %x : {T2}", T2, 4)
case("add_fanout", f'%x: {T2} {{gptc.param = "x"}}, %z: {T2} {{gptc.param = "z"}}',
     f"""  %g = gptc.gelu %x : {T2}
  %s = gptc.add %x, %z : {T2}
  %y = gptc.add %s, %g : {T2}""", T2, 4)
case("causal_attention", '%q: tensor<2x5x6xf64> {gptc.param = "q"}, %k: tensor<2x5x6xf64> {gptc.param = "k"}, %v: tensor<2x5x6xf64> {gptc.param = "v"}',
     "  %y = gptc.causal_attention %q, %k, %v heads 3 : tensor<2x5x6xf64>, tensor<2x5x6xf64>, tensor<2x5x6xf64> -> tensor<2x5x6xf64>",
     "tensor<2x5x6xf64>", 6)
# A sequence long enough (T >= 128) for the kernel's causal query blocks,
# with a partial last block (130 = 4 x 32 + 2).
TA = "tensor<1x130x4xf64>"
case("causal_attention_blocks", f'%q: {TA} {{gptc.param = "q"}}, %k: {TA} {{gptc.param = "k"}}, %v: {TA} {{gptc.param = "v"}}',
     f"  %y = gptc.causal_attention %q, %k, %v heads 2 : {TA}, {TA}, {TA} -> {TA}",
     TA, 4)
case("reshape_transpose", f'%x: {T2} {{gptc.param = "x"}}',
     f"""  %rs = gptc.reshape %x : {T2} -> tensor<6x4xf64>
  %t = gptc.transpose %rs [1, 0] : tensor<6x4xf64> -> tensor<4x6xf64>
  %s = gptc.gelu %t : tensor<4x6xf64>
  %u = gptc.transpose %s [1, 0] : tensor<4x6xf64> -> tensor<6x4xf64>
  %y = gptc.softmax %u : tensor<6x4xf64>""", "tensor<6x4xf64>", 4)
case("split_concat", f'%x: tensor<2x3x6xf64> {{gptc.param = "x"}}',
     """  %p:3 = gptc.split %x axis 2 : tensor<2x3x6xf64> -> tensor<2x3x1xf64>, tensor<2x3x2xf64>, tensor<2x3x3xf64>
  %g = gptc.gelu %p#2 : tensor<2x3x3xf64>
  %c = gptc.concat %g, %p#0 axis 2 : tensor<2x3x3xf64>, tensor<2x3x1xf64> -> tensor<2x3x4xf64>
  %y = gptc.softmax %c : tensor<2x3x4xf64>""", T2, 4)
case("reduce_broadcast", f'%x: {T2} {{gptc.param = "x"}}',
     f"""  %s = gptc.reduce_sum %x [1] : {T2} -> tensor<2x4xf64>
  %g = gptc.gelu %s : tensor<2x4xf64>
  %b = gptc.broadcast %g [1] : tensor<2x4xf64> -> {T2}
  %y = gptc.softmax %b : {T2}""", T2, 4)

# gptc.unary and gptc.binary (the general elementwise ops of imported
# graphs): exp keeps sqrt's and log's operands and pow's base positive.
case("elementwise", f'%x: {T2} {{gptc.param = "x"}}, %z: {T2} {{gptc.param = "z"}}',
     f"""  %e = gptc.unary exp %x : {T2}
  %s = gptc.unary sqrt %e : {T2}
  %l = gptc.unary log %s : {T2}
  %t = gptc.unary tanh %l : {T2}
  %f = gptc.unary erf %z : {T2}
  %g = gptc.unary sigmoid %f : {T2}
  %rc = gptc.unary reciprocal %e : {T2}
  %n = gptc.unary neg %rc : {T2}
  %a = gptc.binary sub %t, %g : {T2}
  %m = gptc.binary mul %a, %n : {T2}
  %d = gptc.binary div %m, %e : {T2}
  %p = gptc.binary pow %e, %z : {T2}
  %ab = gptc.unary abs %z : {T2}
  %rl = gptc.unary relu %x : {T2}
  %q = gptc.add %d, %p : {T2}
  %u = gptc.add %ab, %rl : {T2}
  %y = gptc.add %q, %u : {T2}""", T2, 4)
case("cast", f'%x: {T2} {{gptc.param = "x"}}',
     f"""  %c = gptc.cast %x : {T2} -> tensor<2x3x4xf32>
  %g = gptc.gelu %c : tensor<2x3x4xf32>
  %y = gptc.cast %g : tensor<2x3x4xf32> -> {T2}""", T2, 4)
# The cast case rounds to f32 in the middle: a step of 1e-2 keeps the f32
# rounding (1e-7 / h) and the truncation (h^2) both near 1e-4.
CASE_STEP = {"cast": (1e-2, 1e-3)}

# Cross-entropy is a loss itself: no projection.
CASES["cross_entropy"] = """
func.func @forward(%l: tensor<2x3x7xf64> {gptc.param = "logits"}, %y: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f64> {
  %loss = gptc.cross_entropy %l, %y : tensor<2x3x7xf64>, tensor<2x3xi32> -> tensor<f64>
  return %loss : tensor<f64>
}"""
CASES["cross_entropy_ignore"] = """
func.func @forward(%l: tensor<2x3x7xf64> {gptc.param = "logits"}, %y: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f64> {
  %loss = gptc.cross_entropy %l, %y ignore 3 : tensor<2x3x7xf64>, tensor<2x3xi32> -> tensor<f64>
  return %loss : tensor<f64>
}"""


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def signature(module_text):
    """(name, shape, dtype, is_param, role) of each @forward argument."""
    m = re.search(r"func\.func @forward\((.*?)\)\s*->", module_text, re.S)
    args = []
    for a in re.finditer(r"%[\w.]+: tensor<([^>]*)>(\s*\{[^}]*\})?", m.group(1)):
        dims = a.group(1).split("x")
        dtype, shape = dims[-1], [int(d) for d in dims[:-1]]
        attrs = a.group(2) or ""
        pm = re.search(r'gptc.param = "([^"]+)"', attrs)
        im = re.search(r'gptc.input = #gptc.input<graph "([^">]+)"', attrs)
        args.append((pm.group(1) if pm else (im.group(1) if im else "?"), shape,
                     dtype, bool(pm), im.group(1) if im else None))
    return args


def check(name, text, opt, runner, tmp, rng, vocab_hint=None, scale_params=False):
    H = H_MODEL if scale_params else H_OP
    tolerance = TOLERANCE
    if name in CASE_STEP:
        H, tolerance = CASE_STEP[name]
    path = os.path.join(tmp, name + ".mlir")
    with open(path, "w") as f:
        f.write(text)
    fb = os.path.join(tmp, name + ".fb.mlir")
    with open(fb, "w") as f:
        # The buffer plan is on: a value placed over one still alive would
        # show up as a wrong gradient.
        kernels = "gptc-form-kernels," if KERNELS else ""
        f.write(run([opt, path, "-p", "builtin.module(gptc-autodiff,func.func(canonicalize,cse,%sgptc-plan-buffers))" % kernels]))
    args = signature(text)
    values = []
    for (arg, shape, dtype, is_param, role) in args:
        if dtype == "i32":
            # Ids and labels index the last dimension of their table/logits.
            hi = vocab_hint.get(role, 7) if vocab_hint else 7
            values.append(rng.integers(0, hi, size=shape).astype(np.int32))
        elif scale_params and is_param:
            # A trained model's scale (init std 0.02 and a bit of drift): with
            # N(0, 1) weights a deep model is so curved that no step size
            # gives a finite difference accurate to 1e-6.
            base = 1.0 if re.search(r"ln_\w*\.weight$|ln_f\.weight$", arg) else 0.0
            values.append(base + 0.1 * rng.standard_normal(shape))
        else:
            values.append(rng.standard_normal(shape))

    def evaluate(function, vals, out_dir):
        files = []
        for i, v in enumerate(vals):
            fn = os.path.join(tmp, "%s_in%d.npy" % (name, i))
            np.save(fn, v)
            files.append("--input=" + fn)
        os.makedirs(out_dir, exist_ok=True)
        run([runner, fb, "--function=" + function, "--output-dir=" + out_dir] + files)
        outs = []
        i = 0
        while os.path.exists(os.path.join(out_dir, "%d.npy" % i)):
            outs.append(np.load(os.path.join(out_dir, "%d.npy" % i)))
            os.remove(os.path.join(out_dir, "%d.npy" % i))
            i += 1
        return outs

    outs = evaluate("forward_backward", values, os.path.join(tmp, "fb"))
    grads = outs[1:]
    params = [i for i, a in enumerate(args) if a[3]]
    assert len(grads) == len(params), (name, len(grads), len(params))
    worst = 0.0
    for gi, pi in enumerate(params):
        # A unit direction, so that h is the step's length whatever the
        # parameter's size.
        u = rng.standard_normal(values[pi].shape)
        u /= np.linalg.norm(u)
        analytic = float(np.sum(grads[gi] * u))
        plus = [v.copy() for v in values]
        minus = [v.copy() for v in values]
        plus[pi] = plus[pi] + H * u
        minus[pi] = minus[pi] - H * u
        lp = float(evaluate("forward", plus, os.path.join(tmp, "f"))[0])
        lm = float(evaluate("forward", minus, os.path.join(tmp, "f"))[0])
        numeric = (lp - lm) / (2 * H)
        scale = max(abs(numeric), abs(analytic))
        if EXACTLY_ZERO.search(args[pi][0]):
            if abs(analytic) > 1e-12 or abs(numeric) > 1e-7:
                print("FAIL %s d/d%s: expected zero, analytic %.3g numeric %.3g"
                      % (name, args[pi][0], analytic, numeric))
                return False
            continue
        if scale < 1e-7:
            # A zero directional derivative would check nothing.
            print("FAIL %s d/d%s: vacuous (derivative %.3g)" % (name, args[pi][0], scale))
            return False
        err = abs(numeric - analytic) / scale
        worst = max(worst, err)
        if err > tolerance:
            print("FAIL %s d/d%s: analytic %.10g numeric %.10g (rel %.2e)"
                  % (name, args[pi][0], analytic, numeric, err))
            return False
    print("PASS %s: %d parameters, worst relative error %.1e" % (name, len(params), worst))
    return True


KERNELS = "--kernels" in sys.argv


def main():
    opt, runner = sys.argv[1], sys.argv[2]
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else None
    rng = np.random.default_rng(0)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = dict(CASES)
        hints = {}
        if model:
            with open(model) as f:
                # Initializer dictionaries nest braces; the checks do not
                # need them.
                text = re.sub(r"gptc\.init = \{[^}]*\},?\s*", "", f.read())
                cases = {"model": text}
            # Token and label ids index the vocabulary (the wte rows).
            m = re.search(r'tensor<(\d+)x\d+xf64> \{[^}]*gptc.param = "wte"', cases["model"])
            hints = {"tokens": int(m.group(1)), "labels": int(m.group(1))}
        for name, text in cases.items():
            ok = check(name, text, opt, runner, tmp, rng, hints, scale_params=bool(model))
            passed += ok
            failed += not ok
    print("gradcheck: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
