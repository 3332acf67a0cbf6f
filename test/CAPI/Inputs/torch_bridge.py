"""gptc.torch.train on a Hugging Face GPT-2 (its own small config, random
weights), checked against PyTorch training the same module on the same
batches with gptc's optimizer settings.

  torch_bridge.py [MESH]   (under mpirun for a mesh; rank 0 reports)

1. The round trip: gptc.torch.load_parameters of a trainer's parameters
   before any step gives the module's own weights back, bit for bit.
2. Ten steps: gptc's loss curve matches PyTorch's to 1e-4 (relative), and
   the trained weights gptc wrote back into the module match PyTorch's
   (every element within 5e-5, the whole model to 1e-5 relative).
"""
import copy
import os
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import gptc
import gptc.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Onnx", "Inputs"))
import gpt2_train  # noqa: E402  (gptc's AdamW settings and schedule)

V, T, C, L, H, B, STEPS = 256, 32, 64, 2, 4, 4, 10


def main(mesh):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, V, (STEPS * B, T + 1), generator=g)
    batches = [(text[i * B:(i + 1) * B, :-1], text[i * B:(i + 1) * B, 1:]) for i in range(STEPS)]
    reference = copy.deepcopy(model)
    rank = int(os.environ.get("PMI_RANK", "0"))
    failures = 0

    def report(ok, what):
        nonlocal failures
        failures += not ok
        if rank == 0:
            print("%s %s" % ("PASS" if ok else "FAIL", what), flush=True)

    # 1. gptc holds the module's weights: read back, they are the same.
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    result = gptc.torch.train(model, batches, mesh=mesh, lr=6e-4)
    # 2. PyTorch on the same batches.
    params = dict(reference.named_parameters())
    tables = {id(m.weight) for m in reference.modules() if isinstance(m, torch.nn.Embedding)}
    decay = [p for p in params.values() if p.dim() >= 2 and id(p) not in tables]
    adam = torch.optim.AdamW([{"params": decay, "weight_decay": gpt2_train.WD},
                              {"params": [p for p in params.values() if not any(p is d for d in decay)],
                               "weight_decay": 0.0}],
                             lr=gpt2_train.LR, betas=gpt2_train.BETAS, eps=gpt2_train.EPS)
    reference.train()
    ref_losses = []
    for step, (tokens, labels) in enumerate(batches):
        adam.zero_grad()
        logits = reference(tokens, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), gpt2_train.CLIP)
        for group in adam.param_groups:
            group["lr"] = gpt2_train.schedule(step)
        adam.step()
        ref_losses.append(loss.item())
    worst = max(abs(a - b) / abs(b) for a, b in zip(result.losses, ref_losses))
    report(len(result.losses) == STEPS and worst < 1e-4,
           "%d steps on mesh '%s': gptc's losses %.4f -> %.4f, PyTorch's %.4f -> %.4f, "
           "worst relative difference %.1e"
           % (len(result.losses), result.mesh, result.losses[0], result.losses[-1],
              ref_losses[0], ref_losses[-1], worst))
    report(result.untrained == [], "every parameter of the module trained (untrained: %s)"
           % result.untrained)
    # Per parameter, the largest absolute difference (the attention key
    # bias has a zero gradient in exact arithmetic, softmax being blind to a
    # per-query constant: Adam scales both sides' rounding noise to steps of
    # its own, so a relative error per parameter would measure noise), and
    # the whole model's relative error.
    worst = diff2 = ref2 = 0.0
    moved = 0
    for n, p in model.named_parameters():
        ref = reference.get_parameter(n).detach().double()
        d = p.detach().double() - ref
        worst = max(worst, float(d.abs().max()))
        diff2 += float((d * d).sum())
        ref2 += float((ref * ref).sum())
        moved += not torch.equal(p.detach(), before[n])
    overall = (diff2 / ref2) ** 0.5
    report(worst < 5e-5 and overall < 1e-5 and moved == len(before),
           "the trained weights in the module match PyTorch's (%d of %d parameters moved): "
           "largest difference %.1e, relative error %.1e" % (moved, len(before), worst, overall))
    # The round trip alone: gptc's view of an untrained module, loaded back.
    fresh = copy.deepcopy(reference)
    with gptc.torch.make_trainer(fresh, batches[0][0].shape, STEPS, mesh=mesh) as t:
        saved = {n: p.detach().clone() for n, p in fresh.named_parameters()}
        with torch.no_grad():
            for p in fresh.parameters():
                p.zero_()
        missing = gptc.torch.load_parameters(fresh, t.parameters(), prefix="m.")
    same = missing == [] and all(torch.equal(p, saved[n]) for n, p in fresh.named_parameters())
    report(same, "round trip: the module's %d parameters through gptc and back, bit for bit"
           % len(saved))
    if rank == 0:
        print("torch bridge: %d passed, %d failed" % (4 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
