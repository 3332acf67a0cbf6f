"""train_tiny.py MODEL DIR: trains MODEL five steps through the Python
binding, printing each loss, and exercises parameters, checkpoints and
errors (test/CAPI/python.test)."""
import os
import sys

import numpy as np

import gptc
from outcome import error

model, work = sys.argv[1], sys.argv[2]
t = gptc.Trainer(model, steps=5)
shapes = t.parameter_shapes()
print("%d parameters, batch %s, %d tensors, wte %s"
      % (t.num_parameters, t.batch_shape, len(shapes), shapes["wte"]))
for _ in range(t.num_steps):
    loss = t.train(steps=1)
    print("step %d loss %.6f" % (t.step, loss))
wte = t.read("wte")
t.write("wte", wte * 0.5)
print("halved wte: round trip %s" % ("exact" if np.array_equal(t.read("wte"), wte * 0.5) else "differs"))
ck = os.path.join(work, "py.ckpt")
t.save(ck)
with gptc.Trainer(model, steps=5) as u:
    u.load(ck)
    same = all(np.array_equal(u.read(n), t.read(n)) for n in shapes)
    print("checkpoint: step %d, parameters %s" % (u.step, "equal" if same else "differ"))
# The schedule's rules (as gptc train's): no step past its end, no
# checkpoint past it, and another schedule only when asked for.
print("train at the end: %s" % error(lambda: t.train(steps=1)))
with gptc.Trainer(model, steps=8) as v:
    print("train past the end: %s" % error(lambda: v.train(steps=9)))
    print("step after the refusal: %d" % v.step)
    print("load another schedule: %s" % error(lambda: v.load(ck)))
    notes = v.load(ck, changed=True)
    print("load changed: step %d; %s" % (v.step, notes))
    v.train(steps=3)
    print("trained on: step %d" % v.step)
with gptc.Trainer(model, steps=3) as w:
    print("load past the end: %s" % error(lambda: w.load(ck)))
bad = os.path.join(work, "bad.pbtxt")
with open(bad, "w") as f:
    f.write("model { vocab_size: -3 }\n")
for attempt in (lambda: gptc.Trainer(bad), lambda: t.read("nope")):
    try:
        attempt()
        print("no error")
    except gptc.GptcError as e:
        print("GptcError: %s" % str(e).splitlines()[0])
