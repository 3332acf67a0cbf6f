#!/usr/bin/env python3
"""gptc against a GPT-2 written in PyTorch (float32, CPU).

1. `gptc train` runs 10 steps of the reference model and dumps its initial
   parameters, every batch, and each step's loss, gradient norm and
   learning rate.
2. gptc's compiled @forward_backward (gptc-autodiff + gptc-run) gives the
   loss and every parameter's gradient on the first batch.
3. PyTorch loads the same parameters and batches: the loss must agree to
   1e-5 relative, every gradient to 1e-4 (relative, in norm), and 10 AdamW
   steps (same clipping, schedule and weight-decay groups) must give the
   same losses to 1e-4.

Usage: torch_reference.py GPTC GPTC_OPT GPTC_RUN MODEL.pbtxt WORKDIR
"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(0)

# The hyper-parameters of Inputs/reference.pbtxt.
LAYERS, HEADS, WIDTH, EPS_LN = 2, 4, 64, 1e-5
LR, MIN_RATIO, WARMUP, STEPS = 3e-3, 0.1, 3, 10
BETAS, EPS, WD, CLIP = (0.9, 0.95), 1e-8, 0.1, 0.5


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def attention(q, k, v):
    """Causal attention of [B, H, T, D] heads."""
    T, D = q.shape[-2], q.shape[-1]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def forward(P, tokens, labels):
    """GPT-2 forward in PyTorch, on the parameter dict P (gptc's names)."""
    B, T = tokens.shape
    x = P["wte"][tokens] + P["wpe"][torch.arange(T)]
    D = WIDTH // HEADS
    for l in range(LAYERS):
        h = "h.%d." % l
        a = F.layer_norm(x, (WIDTH,), P[h + "ln_1.weight"], P[h + "ln_1.bias"], EPS_LN)
        q, k, v = (F.linear(a, P[h + "attn.%s_proj.weight" % n], P[h + "attn.%s_proj.bias" % n])
                   .view(B, T, HEADS, D).transpose(1, 2) for n in "qkv")
        y = attention(q, k, v).transpose(1, 2).reshape(B, T, WIDTH)
        x = x + F.linear(y, P[h + "attn.c_proj.weight"], P[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (WIDTH,), P[h + "ln_2.weight"], P[h + "ln_2.bias"], EPS_LN)
        m = F.gelu(F.linear(m, P[h + "mlp.c_fc.weight"], P[h + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(m, P[h + "mlp.c_proj.weight"], P[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (WIDTH,), P["ln_f.weight"], P["ln_f.bias"], EPS_LN)
    logits = F.linear(x, P["wte"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def schedule(step):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    p = min(max((step - WARMUP) / (STEPS - WARMUP), 0.0), 1.0)
    return LR * MIN_RATIO + 0.5 * (1 + math.cos(math.pi * p)) * (LR - LR * MIN_RATIO)


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)) /
                 max(np.linalg.norm(np.asarray(b, np.float64)), 1e-30))


def main():
    gptc, opt, runner, model, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    dump = os.path.join(work, "dump")
    run([gptc, "train", model, "--checkpoint", os.path.join(work, "ref.ckpt"),
         "--dump-dir", dump])
    steps = [l.split("\t") for l in open(os.path.join(dump, "steps.tsv")).read().split("\n")[1:] if l]
    g_loss = [float(s[1]) for s in steps]
    g_norm = [float(s[2]) for s in steps]
    g_lr = [float(s[3]) for s in steps]
    failures = 0

    def report(ok, what):
        nonlocal failures
        failures += not ok
        print("%s %s" % ("PASS" if ok else "FAIL", what))

    # The parameters in argument order, as gptc compiled them.
    fwd = os.path.join(work, "forward.mlir")
    with open(fwd, "w") as f:
        f.write(run([gptc, model, "--emit=mlir"]))
    fb = os.path.join(work, "fb.mlir")
    with open(fb, "w") as f:
        f.write(run([opt, fwd, "--gptc-autodiff"]))
    names = re.findall(r'gptc\.param = "([^"]+)"', open(fwd).read().split("gptc.cross_entropy")[0])
    names = list(dict.fromkeys(names))
    init = {n: np.load(os.path.join(dump, "param.%s.npy" % n)) for n in names}
    batch = lambda i: (np.load(os.path.join(dump, "batch.%d.tokens.npy" % i)),
                       np.load(os.path.join(dump, "batch.%d.labels.npy" % i)))

    # 1. gptc's compiled gradients on the first batch.
    tokens0, labels0 = batch(0)
    np.save(os.path.join(work, "tokens.npy"), tokens0)
    np.save(os.path.join(work, "labels.npy"), labels0)
    out = os.path.join(work, "grads")
    os.makedirs(out, exist_ok=True)
    run([runner, fb, "--function=forward_backward", "--output-dir=" + out] +
        ["--input=" + os.path.join(dump, "param.%s.npy" % n) for n in names] +
        ["--input=" + os.path.join(work, "tokens.npy"), "--input=" + os.path.join(work, "labels.npy")])
    gptc_loss0 = float(np.load(os.path.join(out, "0.npy")))
    gptc_grads = {n: np.load(os.path.join(out, "%d.npy" % (i + 1))) for i, n in enumerate(names)}

    # 2. PyTorch on the same parameters and batch.
    P = {n: torch.tensor(v, requires_grad=True) for n, v in init.items()}
    loss = forward(P, torch.tensor(tokens0).long(), torch.tensor(labels0).long())
    loss.backward()
    r = abs(gptc_loss0 - loss.item()) / abs(loss.item())
    report(r < 1e-5, "loss %.7f vs PyTorch %.7f (relative %.1e)" % (gptc_loss0, loss.item(), r))
    r = abs(g_loss[0] - loss.item()) / abs(loss.item())
    report(r < 1e-5, "gptc train's first loss %.7f vs PyTorch (relative %.1e)" % (g_loss[0], r))
    # Relative to each gradient's norm, floored at 1e-4 of the global norm:
    # the key bias's gradient is exactly zero (softmax ignores the constant
    # q.b it adds to a query's scores), so both sides hold rounding noise
    # there, and that noise must be small against the step, not against 0.
    total = math.sqrt(sum(float(P[n].grad.norm()) ** 2 for n in names))
    errors = []
    for n in names:
        diff = np.linalg.norm(gptc_grads[n].astype(np.float64) - P[n].grad.numpy().astype(np.float64))
        errors.append((diff / max(float(P[n].grad.norm()), 1e-4 * total), n))
    worst = max(errors)
    report(worst[0] < 1e-4, "%d gradients, worst relative error %.1e (%s)" % (len(names), worst[0], worst[1]))
    kb = float(P["h.0.attn.k_proj.bias"].grad.norm())
    report(kb < 1e-6 * total and float(np.linalg.norm(gptc_grads["h.0.attn.k_proj.bias"])) < 1e-6 * total,
           "the key bias's gradient is zero to rounding on both sides")

    # 3. Ten AdamW steps: the same clipping, schedule and decay groups.
    P = {n: torch.tensor(v, requires_grad=True) for n, v in init.items()}
    decay = [P[n] for n in names if P[n].dim() >= 2 and n not in ("wte", "wpe")]
    no_decay = [P[n] for n in names if not (P[n].dim() >= 2 and n not in ("wte", "wpe"))]
    adam = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=LR, betas=BETAS, eps=EPS)
    worst_loss = worst_norm = worst_lr = 0.0
    for step in range(STEPS):
        t, l = batch(step)
        adam.zero_grad()
        loss = forward(P, torch.tensor(t).long(), torch.tensor(l).long())
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(P.values()), CLIP)
        for group in adam.param_groups:
            group["lr"] = schedule(step)
        adam.step()
        worst_loss = max(worst_loss, abs(g_loss[step] - loss.item()) / abs(loss.item()))
        worst_norm = max(worst_norm, abs(g_norm[step] - norm.item()) / abs(norm.item()))
        worst_lr = max(worst_lr, abs(g_lr[step] - schedule(step)) / schedule(step))
    report(worst_loss < 1e-4, "%d AdamW steps: losses agree, worst relative error %.1e" % (STEPS, worst_loss))
    report(worst_norm < 1e-4, "gradient norms agree, worst relative error %.1e" % worst_norm)
    report(worst_lr < 1e-6, "learning rates agree, worst relative error %.1e" % worst_lr)
    print("reference: %d passed, %d failed" % (7 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
