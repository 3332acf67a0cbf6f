"""parity.py MODEL CLI_DUMP STEPS [KEY=VALUE ...]: trains MODEL through the
Python binding (gptc.Trainer(MODEL, steps=STEPS, KEY=VALUE...), one step
per call) and holds it equal to `gptc train ... --dump-dir CLI_DUMP` with the
same settings as flags: every step's loss and every final parameter. Under
mpirun every rank trains; rank 0 prints one line:
  parity: N steps, M tensors, mesh 'dp=2': losses and parameters equal
or what differs (and exits 1). VALUE is a Python literal where it reads as
one (2, 1e-3, True, [2, 2]), else a string (gpipe, dp=2)."""
import ast
import glob
import os
import sys

import numpy as np

import gptc

model, dump, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = {}
for arg in sys.argv[4:]:
    key, value = arg.split("=", 1)
    try:
        settings[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        settings[key] = value
t = gptc.Trainer(model, steps=steps, **settings)
losses = [t.train(steps=1) for _ in range(steps)]
params = t.parameters()
if t.rank != 0:
    sys.exit(0)
rows = [l.split("\t") for l in open(os.path.join(dump, "steps.tsv")).read().split("\n")[1:] if l]
want = [float(r[1]) for r in rows]
problems = []
if len(want) != len(losses):
    problems.append("%d steps, gptc train ran %d" % (len(losses), len(want)))
for i, (got, ref) in enumerate(zip(losses, want)):
    if abs(got - ref) > 1e-6 * max(1.0, abs(ref)):
        problems.append("step %d loss %.9g, gptc train's %.9g" % (i + 1, got, ref))
finals = {os.path.basename(p)[len("final."):-len(".npy")]: p
          for p in glob.glob(os.path.join(dump, "final.*.npy"))}
if sorted(finals) != sorted(params):
    problems.append("tensors %s, gptc train's %s" % (sorted(params)[:3], sorted(finals)[:3]))
for name in sorted(set(finals) & set(params)):
    ref = np.load(finals[name]).astype(np.float32)
    got = params[name]
    scale = max(float(np.abs(ref).max()), 1e-30)
    if got.shape != ref.shape or float(np.abs(got - ref).max()) > 1e-6 * scale:
        problems.append("%s differs by %.3g" % (name, float(np.abs(got - ref).max())
                                                 if got.shape == ref.shape else float("inf")))
if problems:
    print("parity: FAIL: " + "; ".join(problems[:5]))
    sys.exit(1)
print("parity: %d steps, %d tensors, mesh '%s': losses and parameters equal" %
      (len(losses), len(params), t.mesh))
