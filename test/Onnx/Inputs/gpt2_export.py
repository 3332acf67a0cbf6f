"""A GPT-2 (nanoGPT's module layout: learned positions, pre-norm blocks,
tanh GELU, a causal mask buffer, the head tied to the token embedding)
exported from PyTorch with torch.onnx.export, and its forward compared
with gptc's.

  gpt2_export.py export DIR   writes DIR/gpt2.onnx, DIR/idx.npy,
                              DIR/targets.npy and DIR/ref.npz (PyTorch's
                              loss and logits, float64 from float32)
  gpt2_export.py check DIR OUT compares OUT/0.npy (loss) and OUT/1.npy
                              (logits) with ref.npz
"""
import math
import os
import sys

import numpy as np


def build(V=96, T=16, C=32, H=4, L=2, exact=False, sdpa=False):
    """The module; `exact`: F.gelu's exact (erf) form and the causal mask as
    masked_fill(triu(ones, 1), -inf) computed in forward, as a plain GPT
    written today has them; `sdpa`: attention by
    F.scaled_dot_product_attention(is_causal=True) (torch 2)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, Tx, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q = q.view(B, Tx, H, C // H).transpose(1, 2)
            k = k.view(B, Tx, H, C // H).transpose(1, 2)
            v = v.view(B, Tx, H, C // H).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                y = y.transpose(1, 2).contiguous().view(B, Tx, C)
                x = x + self.c_proj(y)
                h = self.c_fc(self.ln_2(x))
                h = F.gelu(h) if exact else F.gelu(h, approximate="tanh")
                return x + self.mlp_proj(h)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            if exact:
                future = torch.triu(torch.ones(Tx, Tx, dtype=torch.bool), diagonal=1)
                att = att.masked_fill(future, float("-inf"))
            else:
                att = att.masked_fill(self.bias[:, :, :Tx, :Tx] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, Tx, C)
            x = x + self.c_proj(y)
            h = self.c_fc(self.ln_2(x))
            h = F.gelu(h) if exact else F.gelu(h, approximate="tanh")
            return x + self.mlp_proj(h)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, targets):
            B, Tx = idx.shape
            pos = torch.arange(0, Tx, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
            return loss, logits

    torch.manual_seed(0)
    model = GPT().eval()
    # Trained-looking weights: GPT-2's init scale, biases and norms moved.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02 if "wpe" not in name else 0.01)
            else:
                p.normal_(1.0 if "ln" in name and "weight" in name else 0.0, 0.05)
    return model, V, T


def legacy_exporter(torch):
    """torch.onnx.export's TorchScript exporter: the default before torch
    2.9 (which has no `dynamo` argument), asked for by name after."""
    return {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}


def export(out):
    import torch
    model, V, T = build()
    rng = np.random.default_rng(1)
    idx = rng.integers(0, V, size=(2, T)).astype(np.int64)
    targets = rng.integers(0, V, size=(2, T)).astype(np.int64)
    it, tt = torch.from_numpy(idx), torch.from_numpy(targets)
    # No constant folding: the position embedding stays a parameter
    # (folded, wpe(arange) would become a constant).
    torch.onnx.export(model, (it, tt), os.path.join(out, "gpt2.onnx"),
                      **legacy_exporter(torch), opset_version=17, input_names=["idx", "targets"],
                      output_names=["loss", "logits"],
                      do_constant_folding=False)
    with torch.no_grad():
        loss, logits = model(it, tt)
    np.save(os.path.join(out, "idx.npy"), idx)
    np.save(os.path.join(out, "targets.npy"), targets)
    np.savez(os.path.join(out, "ref.npz"), loss=loss.double().numpy(),
             logits=logits.double().numpy())
    return 0


def check(out, got):
    ref = np.load(os.path.join(out, "ref.npz"))
    loss = np.load(os.path.join(got, "0.npy")).astype(np.float64)
    logits = np.load(os.path.join(got, "1.npy")).astype(np.float64)
    if logits.shape != ref["logits"].shape:
        print(f"FAIL logits shape {logits.shape} != {ref['logits'].shape}")
        return 1
    dl = abs(float(loss) - float(ref["loss"])) / abs(float(ref["loss"]))
    dg = np.abs(logits - ref["logits"]).max() / np.abs(ref["logits"]).max()
    status = "PASS" if dl <= 1e-5 and dg <= 1e-5 else "FAIL"
    print(f"{status} gpt2 forward: loss {float(loss):.6f} (PyTorch "
          f"{float(ref['loss']):.6f}, relative {dl:.1e}), logits max relative "
          f"{dg:.1e} (tolerance 1e-5)")
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    if sys.argv[1] == "export":
        sys.exit(export(sys.argv[2]))
    sys.exit(check(sys.argv[2], sys.argv[3]))
