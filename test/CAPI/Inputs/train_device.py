"""train_device.py MODEL DEVICE: trains MODEL five steps on DEVICE through
the Python binding, printing `step N loss X` (same_losses.py reads them)."""
import sys

import gptc

t = gptc.Trainer(sys.argv[1], steps=5, device=sys.argv[2])
for _ in range(t.num_steps):
    loss = t.train(steps=1)
    print("step %d loss %.6f" % (t.step, loss))
