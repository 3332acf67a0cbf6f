"""Training an ONNX-exported GPT-2 with gptc, checked against PyTorch
training the same module.

  gpt2_train.py export DIR [OPSET] [exact]
                                writes DIR/gpt2.onnx (opset 17, or
                                OPSET: 16 has no LayerNormalization;
                                `exact`: exact GELU and a masked_fill(triu)
                                mask, gpt2_export.build's) (gpt2_export.py's
                                module: V 256, T 32, C 64, 4 heads, 2
                                layers, 4 sequences a rank) and DIR/init.npz
                                (PyTorch's parameters, by name)
  gpt2_train.py greedy DIR DUMP "IDS" N
                                the N ids PyTorch's module with DUMP's
                                final parameters picks greedily after the
                                prompt IDS (what gptc sample --token-ids
                                --top-k 1 prints)
  gpt2_train.py check DIR DUMP  DUMP is `gptc train DIR/gpt2.onnx
                                --steps 10 --dump-dir DUMP`'s: the initial
                                parameters must be the ONNX initializers
                                (bit for bit), and ten AdamW steps of
                                PyTorch (gptc's defaults: lr 6e-4, cosine to
                                0.1x, betas 0.9/0.95, weight decay 0.1 on
                                matrices but the embeddings, clipping at 1)
                                on DUMP's batches must give gptc's losses and
                                gradient norms to 1e-4 and its final
                                parameters to 1e-4 (relative)
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_export  # noqa: E402

V, T, C, H, L, B = 256, 32, 64, 4, 2, 4
LR, MIN_RATIO, STEPS = 6e-4, 0.1, 10
BETAS, EPS, WD, CLIP = (0.9, 0.95), 1e-8, 0.1, 1.0


def export(out, opset=17, exact=False):
    import torch
    model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L, exact=exact)
    ids = torch.zeros((B, T), dtype=torch.long)
    torch.onnx.export(model, (ids, ids), os.path.join(out, "gpt2.onnx"),
                      **gpt2_export.legacy_exporter(torch), opset_version=opset, input_names=["idx", "targets"],
                      output_names=["loss", "logits"],
                      do_constant_folding=False)
    open(os.path.join(out, "variant"), "w").write("exact" if exact else "tanh")
    np.savez(os.path.join(out, "init.npz"),
             **{n: p.detach().numpy() for n, p in model.named_parameters()})
    return 0


def schedule(step):
    p = min(max(step / STEPS, 0.0), 1.0)
    return LR * MIN_RATIO + 0.5 * (1 + math.cos(math.pi * p)) * (LR - LR * MIN_RATIO)


def load(dump, prefix, name):
    """A parameter as gptc dumped it: whole, or (a fused projection gptc
    split into one parameter per piece, `<name>.part<i>`) its pieces joined."""
    path = os.path.join(dump, "%s.%s.npy" % (prefix, name))
    if os.path.exists(path):
        return np.load(path)
    parts, i = [], 0
    while os.path.exists(os.path.join(dump, "%s.%s.part%d.npy" % (prefix, name, i))):
        parts.append(np.load(os.path.join(dump, "%s.%s.part%d.npy" % (prefix, name, i))))
        i += 1
    return np.concatenate(parts, axis=0)


def train_like_gptc(params, decay, dump, loss_of):
    """Ten AdamW steps of PyTorch as gptc takes them (the parameters in
    `decay` decayed, the rest not; clipping; the cosine schedule) on DUMP's
    batches, `loss_of(tokens, labels)` the module's loss: the worst relative
    errors of gptc's losses and gradient norms (steps.tsv) against PyTorch's,
    and whether gptc's were all finite and ten."""
    import torch
    steps = [l.split("\t") for l in open(os.path.join(dump, "steps.tsv")).read().split("\n")[1:] if l]
    g_loss = [float(s[1]) for s in steps]
    g_norm = [float(s[2]) for s in steps]
    decayed = {id(p) for p in decay}
    adam = torch.optim.AdamW(
        [{"params": [p for p in params if id(p) in decayed], "weight_decay": WD},
         {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0}],
        lr=LR, betas=BETAS, eps=EPS)
    worst_loss = worst_norm = 0.0
    finite = len(steps) == STEPS
    for step in range(min(STEPS, len(steps))):
        t = torch.from_numpy(np.load(os.path.join(dump, "batch.%d.tokens.npy" % step))).long()
        y = torch.from_numpy(np.load(os.path.join(dump, "batch.%d.labels.npy" % step))).long()
        adam.zero_grad()
        loss = loss_of(t, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
        for group in adam.param_groups:
            group["lr"] = schedule(step)
        adam.step()
        finite &= math.isfinite(g_loss[step]) and math.isfinite(g_norm[step])
        worst_loss = max(worst_loss, abs(g_loss[step] - loss.item()) / abs(loss.item()))
        worst_norm = max(worst_norm, abs(g_norm[step] - norm.item()) / abs(norm.item()))
    return worst_loss, worst_norm, finite


def check(out, dump):
    import torch
    torch.set_num_threads(1)
    failures = 0

    def report(ok, what):
        nonlocal failures
        failures += not ok
        print("%s %s" % ("PASS" if ok else "FAIL", what))

    init = dict(np.load(os.path.join(out, "init.npz")))
    variant = os.path.join(out, "variant")
    exact = os.path.exists(variant) and open(variant).read() == "exact"
    model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L, exact=exact)
    # 1. gptc starts from the ONNX initializers (the tied head is wte).
    same = all(np.array_equal(load(dump, "param", n), v) for n, v in init.items())
    report(same, "%d initial parameters are the ONNX initializers" % len(init))
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(init[n]))

    params = dict(model.named_parameters())
    embeddings = ("wte.weight", "wpe.weight")
    decay = [p for n, p in params.items() if p.dim() >= 2 and n not in embeddings]
    model.train()
    worst_loss, worst_norm, complete = train_like_gptc(
        list(params.values()), decay, dump, lambda t, y: model(t, y)[0])
    report(complete and worst_loss < 1e-4,
           "%d AdamW steps: losses agree with PyTorch's, worst relative error %.1e"
           % (STEPS, worst_loss))
    report(worst_norm < 1e-4, "gradient norms agree, worst relative error %.1e" % worst_norm)
    worst = 0.0
    for n, p in params.items():
        final = load(dump, "final", n).astype(np.float64)
        ref = p.detach().double().numpy()
        worst = max(worst, np.linalg.norm(final - ref) / np.linalg.norm(ref))
    report(worst < 1e-4, "final parameters agree, worst relative error %.1e" % worst)
    print("onnx training: %d passed, %d failed" % (4 - failures, failures))
    return 1 if failures else 0


def greedy(out, dump, prompt, length):
    """The token ids PyTorch's module, with DUMP's final parameters, picks
    greedily after PROMPT (ids): what `gptc sample --token-ids --top-k 1`
    must print (the prompt, then the ids)."""
    import torch
    variant = os.path.join(out, "variant")
    exact = os.path.exists(variant) and open(variant).read() == "exact"
    model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L, exact=exact)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(load(dump, "final", n)))
        ids = [int(t) for t in prompt.split()]
        for _ in range(length):
            window = torch.tensor([ids[-T:]])
            _, logits = model(window, window)
            ids.append(int(logits[0, -1].argmax()))
    print(" ".join(str(i) for i in ids))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "greedy":
        sys.exit(greedy(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    if sys.argv[1] == "export":
        sys.exit(export(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 17,
                        len(sys.argv) > 4 and sys.argv[4] == "exact"))
    sys.exit(check(sys.argv[2], sys.argv[3]))
