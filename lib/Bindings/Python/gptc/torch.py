"""The PyTorch bridge: train an nn.Module with gptc, on your batches, and get
the trained weights back in the module.

    import gptc.torch
    result = gptc.torch.train(model, batches, mesh="dp=2")   # or mesh=None
    print(result.losses)          # gptc's loss at each step
    # model's parameters now hold the trained weights

`model` is a language model: forward(ids) -> logits [B, T, V] (a tensor, a
tuple whose first element is the logits, or an object with `.logits`, as
Hugging Face's models return). `batches` is a sequence of (tokens, labels)
pairs of [B, T] integer tensors (labels: the ids each position predicts).

What happens: the module is exported with today's exporter
(torch.onnx.export(dynamo=True, optimize=False), the weights in an external
data file) at the batch's shape, gptc imports it (its layers raised to
gptc's fused ops, so that a mesh shards it), trains one AdamW step per batch
with the settings given (gptc's defaults: lr 6e-4 cosine to 0.1x, betas
0.9/0.95, weight decay 0.1 on matrices but embedding tables, clipping at
1), and writes the trained parameters back into the module.

Under mpirun every rank runs the same script with the same batches (each
rank trains its share of each batch: a data-parallel mesh splits the batch's
rows); every rank gets the whole trained weights. docs/PyTorch.md.
"""
import os
import re
import tempfile

import numpy as np

import gptc as _gptc

__all__ = ["train", "make_trainer", "TrainResult", "load_parameters"]


class TrainResult:
    """What `train` did: `losses` and `norms` (gptc's, per step), the
    trainer's `mesh`, the exported model's `onnx_path`, and `untrained`:
    the module's parameters gptc did not hold (none for a module exported
    with optimize=False; a parameter the forward never reads)."""

    def __init__(self, losses, norms, mesh, onnx_path, untrained):
        self.losses, self.norms = losses, norms
        self.mesh, self.onnx_path, self.untrained = mesh, onnx_path, untrained

    def __repr__(self):
        return "TrainResult(steps=%d, last loss=%s, mesh=%r)" % (
            len(self.losses), self.losses[-1] if self.losses else None, self.mesh)


def _rank():
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def _data_parallel(mesh):
    """The data-parallel degree of a mesh string ("dp=2,tp=2": 2)."""
    if not mesh or mesh == "auto":
        return 1
    m = re.search(r"(?:^|,)\s*dp\s*=\s*(\d+)", mesh)
    return int(m.group(1)) if m else 1


def _logits_module(module):
    import torch

    class Logits(torch.nn.Module):
        """forward(ids) -> logits, whatever the module returns."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            try:
                out = self.m(ids, use_cache=False)
            except TypeError:
                out = self.m(ids)
            if hasattr(out, "logits"):
                return out.logits
            if isinstance(out, (tuple, list)):
                return out[0]
            return out

    return Logits(module)


def _settings(onnx_name, batch, seq, steps, lr, weight_decay, betas, grad_clip,
              warmup_steps, min_lr_ratio, decay):
    decays = {"cosine": "COSINE", "linear": "LINEAR", "constant": "CONSTANT"}
    if decay not in decays:
        raise ValueError("decay is one of %s, got %r" % (sorted(decays), decay))
    return ('onnx_model: "%s"\n'
            "training {\n"
            "  batch_size: %d seq_len: %d steps: %d eval_interval: 0\n"
            "  optimizer { lr: %r beta1: %r beta2: %r weight_decay: %r }\n"
            "  lr_schedule { decay: %s warmup_steps: %d min_lr_ratio: %r }\n"
            "  grad_clip: %r\n"
            "}\n") % (onnx_name, batch, seq, steps, float(lr), float(betas[0]),
                      float(betas[1]), float(weight_decay), decays[decay],
                      int(warmup_steps), float(min_lr_ratio), float(grad_clip))


def load_parameters(module, parameters, prefix=""):
    """Copies gptc's parameters ({name: array}, as Trainer.parameters()
    gives them) into `module`: a name is the module's, `<name>.T` its
    transpose (a [in, out] weight gptc holds as its linear's [out, in]),
    and `<name>.part<i>` / `<name>.T.part<i>` the pieces of a fused
    projection gptc split (joined along the first dimension). Tied
    parameters are found under any of their names. Returns the module's
    parameter names that `parameters` did not hold."""
    import torch
    whole = {}
    parts = {}
    for name, value in parameters.items():
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        m = re.fullmatch(r"(.*)\.part(\d+)", name)
        if m:
            parts.setdefault(m.group(1), {})[int(m.group(2))] = value
        else:
            whole[name] = value
    for base, pieces in parts.items():
        whole[base] = np.concatenate([pieces[i] for i in sorted(pieces)], axis=0)
    for name in [n for n in whole if n.endswith(".T")]:
        whole[name[:-2]] = np.ascontiguousarray(whole.pop(name).T)
    aliases = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), (p, []))[1].append(n)
    missing = []
    with torch.no_grad():
        for p, names in aliases.values():
            found = next((whole[n] for n in names if n in whole), None)
            if found is None:
                missing.append(names[0])
                continue
            if tuple(found.shape) != tuple(p.shape):
                raise _gptc.GptcError("gptc's '%s' is %s, the module's %s"
                                      % (names[0], tuple(found.shape), tuple(p.shape)))
            p.copy_(torch.from_numpy(np.asarray(found, dtype=np.float32)).to(p.dtype))
    return missing


def make_trainer(module, batch_shape, steps, mesh=None, lr=6e-4, weight_decay=0.1,
                 betas=(0.9, 0.95), grad_clip=1.0, warmup_steps=0, min_lr_ratio=0.1,
                 decay="cosine", workdir=None, hardware=None, devices=0):
    """A gptc.Trainer of `module` for batches of `batch_shape` (the whole
    step's [B, T]) and a schedule of `steps`, as `train` makes it: the
    module exported (today's exporter, optimize=False, external data) at
    the rows per data-parallel rank, and compiled with these settings. The
    exported files are kept in `workdir` (rank<r>/), or removed once the
    trainer is compiled. gptc's parameter names carry the wrapper's prefix
    "m." (load_parameters(module, trainer.parameters(), prefix="m."))."""
    import torch
    rows, seq = (int(d) for d in batch_shape)
    dp = _data_parallel(mesh)
    if rows % dp:
        raise ValueError("gptc.torch: %d sequences do not split over dp=%d" % (rows, dp))
    tmp = tempfile.TemporaryDirectory(prefix="gptc-torch-") if workdir is None else None
    # Every rank exports its own copy (the export is deterministic), so
    # that no rank waits on another's files.
    where = os.path.join(tmp.name if tmp else workdir, "rank%d" % _rank())
    os.makedirs(where, exist_ok=True)
    try:
        wrapped = _logits_module(module)
        was_training = module.training
        wrapped.eval()
        example = torch.zeros((rows // dp, seq), dtype=torch.long)
        torch.onnx.export(wrapped, (example,), os.path.join(where, "model.onnx"),
                          dynamo=True, optimize=False, external_data=True,
                          input_names=["ids"], output_names=["logits"])
        module.train(was_training)
        settings = os.path.join(where, "train.pbtxt")
        with open(settings, "w") as f:
            f.write(_settings("model.onnx", rows, seq, steps, lr, weight_decay, betas,
                              grad_clip, warmup_steps, min_lr_ratio, decay))
        return _gptc.Trainer(settings, mesh=mesh, hardware=hardware, devices=devices)
    finally:
        if tmp is not None:
            tmp.cleanup()


def train(module, batches, mesh=None, steps=None, lr=6e-4, weight_decay=0.1,
          betas=(0.9, 0.95), grad_clip=1.0, warmup_steps=0, min_lr_ratio=0.1,
          decay="cosine", workdir=None, hardware=None, devices=0):
    """Trains `module` with gptc for `steps` steps (default: one per batch),
    one AdamW step per (tokens, labels) batch, and loads the trained
    parameters back into it. `mesh`: None (one process), a mesh ("dp=2",
    "tp=2", "dp=2,tp=2": run under `mpirun -np N`), or "auto" with
    `hardware` and `devices` (gptc plan's first plan). The learning rate
    follows `decay` ("cosine", "linear" or "constant") from `lr` to
    `lr * min_lr_ratio` over `steps`, after `warmup_steps`. `workdir` keeps
    the exported model and the settings (removed by default). Returns a
    TrainResult."""
    import torch
    batches = list(batches)
    if not batches:
        raise ValueError("gptc.torch.train: no batches")
    steps = len(batches) if steps is None else int(steps)
    if steps < 1 or steps > len(batches):
        raise ValueError("gptc.torch.train: %d steps for %d batches" % (steps, len(batches)))
    shape = tuple(torch.as_tensor(batches[0][0]).shape)
    if len(shape) != 2:
        raise ValueError("gptc.torch.train: a batch is [B, T] token ids, got %s" % (shape,))
    losses, norms = [], []
    with make_trainer(module, shape, steps, mesh=mesh, lr=lr, weight_decay=weight_decay,
                      betas=betas, grad_clip=grad_clip, warmup_steps=warmup_steps,
                      min_lr_ratio=min_lr_ratio, decay=decay, workdir=workdir,
                      hardware=hardware, devices=devices) as trainer:
        for tokens, labels in batches[:steps]:
            loss, norm = trainer.train_batch(
                torch.as_tensor(tokens).numpy(), torch.as_tensor(labels).numpy())
            losses.append(loss)
            norms.append(norm)
        untrained = load_parameters(module, trainer.parameters(), prefix="m.")
        used_mesh = trainer.mesh
    onnx_path = None if workdir is None else os.path.join(workdir, "rank%d" % _rank(),
                                                            "model.onnx")
    return TrainResult(losses, norms, used_mesh, onnx_path, untrained)
