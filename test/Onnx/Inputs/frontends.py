"""GPTs as users export them today, trained by gptc and checked against
PyTorch training the same module on the same batches. Needs the current
PyTorch stack (scripts/install-pytorch.sh: torch 2.15, onnx, onnxscript,
transformers).

  frontends.py export DIR VARIANT  writes DIR/model.onnx (its weights in
                                   DIR/model.onnx.data), DIR/init.npz (the
                                   module's parameters) and DIR/variant
  frontends.py check DIR DUMP      DUMP is `gptc train DIR/model.onnx
                                   --steps 10 --dump-dir DUMP`'s: the
                                   initial parameters must be the module's
                                   (bit for bit), and ten AdamW steps of
                                   PyTorch (gptc's defaults, as
                                   gpt2_train.py) on DUMP's batches must give
                                   gptc's losses and gradient norms to 1e-4
                                   and its final parameters to 1e-4

Variants (V 256, T 32, C 64, 4 heads, 2 layers, 4 sequences a rank):
  dynamo    nanoGPT's layout with F.scaled_dot_product_attention(is_causal)
            and the exact GELU, torch.onnx.export(dynamo=True) at opset 18
  dynamo23  the same at opset 23, where the exporter writes the attention
            as ONNX's Attention op (is_causal)
  hf-eager  Hugging Face's GPT2LMHeadModel (its own config, tied head,
            Conv1D projections), attn_implementation="eager": the additive
            finfo.min mask of its mask builders; the logits exported
            (dynamo, its default opset), gptc adds the loss
  hf-sdpa   the same with attn_implementation="sdpa": PyTorch's
            scaled_dot_product_attention decomposition and its NaN guard
All are exported with optimize=False (the exporter's optimizer folds zero
biases, merges identical initializers and gathers the position table into
a constant: what trains no longer is the module) and external data.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_export  # noqa: E402
import gpt2_train  # noqa: E402

V, T, C, H, L, B = 256, 32, 64, 4, 2, 4
STEPS = gpt2_train.STEPS


def build(variant):
    """The module, with trained-looking weights (no two initializers
    alike), and whether it computes its own loss (idx, targets) -> (loss,
    logits) or only the logits."""
    import torch
    if variant in ("dynamo", "dynamo23"):
        model, _, _ = gpt2_export.build(V=V, T=T, C=C, H=H, L=L, exact=True, sdpa=True)
        return model, True
    from transformers import GPT2Config, GPT2LMHeadModel
    impl = {"hf-eager": "eager", "hf-sdpa": "sdpa"}[variant]
    config = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                        bos_token_id=0, eos_token_id=0, attn_implementation=impl,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(config)

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    model = Logits(gpt2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if "ln" in name and "weight" in name else 0.0,
                      0.02 if p.dim() == 2 else 0.05)
    return model, False


def export(out, variant):
    import torch
    model, own_loss = build(variant)
    model.eval()
    ids = torch.randint(0, V, (B, T))
    args = (ids, torch.randint(0, V, (B, T))) if own_loss else (ids,)
    names = ["idx", "targets"] if own_loss else ["ids"]
    outputs = ["loss", "logits"] if own_loss else ["logits"]
    opset = ({"opset_version": 18} if variant == "dynamo" else
             {"opset_version": 23} if variant == "dynamo23" else {})
    torch.onnx.export(model, args, os.path.join(out, "model.onnx"), dynamo=True,
                      optimize=False, external_data=True, input_names=names,
                      output_names=outputs, **opset)
    open(os.path.join(out, "variant"), "w").write(variant)
    np.savez(os.path.join(out, "init.npz"),
             **{n: p.detach().numpy() for n, p in model.named_parameters()})
    return 0


def load(dump, prefix, name):
    """A parameter as gptc dumped it: whole, transposed (`<name>.T`: a
    [in, out] Conv1D weight gptc holds as [out, in]), in pieces
    (`<name>.part<i>`: a fused projection gptc split) or both."""
    def pieces(base):
        path = os.path.join(dump, "%s.%s.npy" % (prefix, base))
        if os.path.exists(path):
            return np.load(path)
        parts, i = [], 0
        while os.path.exists(os.path.join(dump, "%s.%s.part%d.npy" % (prefix, base, i))):
            parts.append(np.load(os.path.join(dump, "%s.%s.part%d.npy" % (prefix, base, i))))
            i += 1
        return np.concatenate(parts, axis=0) if parts else None

    whole = pieces(name)
    if whole is not None:
        return whole
    held = pieces(name + ".T")
    return None if held is None else held.T


def check(out, dump):
    import torch
    torch.set_num_threads(1)
    failures = 0

    def report(ok, what):
        nonlocal failures
        failures += not ok
        print("%s %s" % ("PASS" if ok else "FAIL", what))

    variant = open(os.path.join(out, "variant")).read()
    model, own_loss = build(variant)
    init = dict(np.load(os.path.join(out, "init.npz")))
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(init[n]))
    # A tied parameter is one module parameter with several names (GPT-2's
    # head is its token table): gptc has it under the one the graph kept.
    aliases = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), []).append(n)
    params = dict(model.named_parameters())

    def dumped(prefix, n):
        for alias in aliases[id(params[n])]:
            v = load(dump, prefix, alias)
            if v is not None:
                return v
        raise FileNotFoundError("%s: no %s.%s in %s" % (variant, prefix, n, dump))

    same = all(np.array_equal(dumped("param", n), init[n]) for n in params)
    report(same, "%d initial parameters are the module's" % len(params))

    # gptc's weight decay: matrices, but not the tables an embedding reads.
    tables = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    decay = [p for p in params.values() if p.dim() >= 2 and id(p) not in tables]

    def loss_of(t, y):
        if own_loss:
            return model(t, y)[0]
        logits = model(t)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))

    model.train()
    worst_loss, worst_norm, finite = gpt2_train.train_like_gptc(
        list(params.values()), decay, dump, loss_of)
    report(finite and worst_loss < 1e-4,
           "%s: %d AdamW steps, losses agree with PyTorch's, worst relative error %.1e"
           % (variant, STEPS, worst_loss))
    report(finite and worst_norm < 1e-4,
           "gradient norms agree (finite), worst relative error %.1e" % worst_norm)
    worst = 0.0
    for n, p in params.items():
        final = dumped("final", n).astype(np.float64)
        ref = p.detach().double().numpy()
        worst = max(worst, np.linalg.norm(final - ref) / np.linalg.norm(ref))
    report(worst < 1e-4, "final parameters agree, worst relative error %.1e" % worst)
    print("frontend training: %d passed, %d failed" % (4 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "export":
        sys.exit(export(sys.argv[2], sys.argv[3]))
    sys.exit(check(sys.argv[2], sys.argv[3]))
