"""seams.py MODEL DIR: what a failed call leaves, and what the binding
refuses (test/CAPI/seams.test). Prints one line per check."""
import os
import sys

import numpy as np

import gptc
from outcome import error

model, work = sys.argv[1], sys.argv[2]


def state(t, path):
    """Every parameter, and the checkpoint's bytes of every tensor (the
    optimizer's moments too) after saving to `path`."""
    t.save(path)
    step = open(os.path.join(path, "latest")).read().strip()
    data = open(os.path.join(path, step, "rank-00000.bin"), "rb").read()
    return {n: t.read(n) for n in t.parameter_shapes()}, data


t = gptc.Trainer(model, steps=6)
B, T = t.batch_shape
rng = np.random.default_rng(1)
tokens = rng.integers(0, 256, size=(B, T))
labels = np.roll(tokens, -1, axis=1)
print("step 1: loss %.4f" % t.train_batch(tokens, labels)[0])

# A step that cannot be finite (an infinite weight): the call fails, and
# the step, every parameter and the optimizer's state are as they were;
# through train_batch, and through train(), whose failing step is not
# applied.
good = t.read("wte")
poisoned = good.copy()
poisoned[3, 5] = np.inf


def failed_call(name, call):
    t.write("wte", poisoned)
    before, before_bytes = state(t, os.path.join(work, name + ".before"))
    print("%s: %s" % (name, error(call)))
    after, after_bytes = state(t, os.path.join(work, name + ".after"))
    same = all(np.array_equal(before[n], after[n], equal_nan=True) for n in before)
    print("after %s: step %d, parameters %s, checkpoint bytes %s"
          % (name, t.step, "unchanged" if same else "CHANGED",
             "unchanged" if before_bytes == after_bytes else "CHANGED"))
    # The trainer goes on from there once the weight is repaired.
    t.write("wte", good)


failed_call("train_batch", lambda: t.train_batch(tokens, labels))
print("step 2: loss %.4f, step %d" % (t.train_batch(tokens, labels)[0], t.step))
failed_call("train", lambda: t.train(steps=1))

# Token ids are converted with checks: none wraps around or truncates.
wide = tokens.astype(np.int64)
wide[1, 2] = 2**32 + 1
print("id 2**32+1: %s" % error(lambda: t.train_batch(wide, labels)))
floats = tokens.astype(np.float64)
floats[0, 7] = 1.5
print("id 1.5: %s" % error(lambda: t.train_batch(floats, labels)))
print("id -1: %s" % error(lambda: t.train_batch(tokens, np.full_like(labels, -1))))
print("step after the refusals: %d" % t.step)
# Whole floats are ids.
print("float ids: loss %.4f" % t.train_batch(tokens.astype(np.float32), labels)[0])

# Counts are integers in their domain.
print("train(steps=2.7): %s" % error(lambda: t.train(steps=2.7)))
print("train(steps=0): %s" % error(lambda: t.train(steps=0)))
print("Trainer(steps=-5): %s" % error(lambda: gptc.Trainer(model, steps=-5)))
print("Trainer(steps='3'): %s" % error(lambda: gptc.Trainer(model, steps="3")))

# The C API's save writes over nothing gptc did not write.
notes = os.path.join(work, "notes.txt")
open(notes, "w").write("precious\n")
print("save over a file: %s" % error(lambda: t.save(notes)))
print("the file: %s" % open(notes).read().strip())
