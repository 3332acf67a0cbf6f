"""train_mesh.py MODEL MESH [HARDWARE DEVICES]: under mpirun, every rank
trains MODEL five steps on MESH ("dp=2", or "auto" planned for DEVICES
devices of HARDWARE) through the Python binding; rank 0 prints."""
import sys

import gptc

model, mesh = sys.argv[1], sys.argv[2]
hardware, devices = (sys.argv[3], int(sys.argv[4])) if len(sys.argv) > 4 else (None, 0)
t = gptc.Trainer(model, steps=5, mesh=mesh, hardware=hardware, devices=devices)
losses = [t.train(steps=1) for _ in range(5)]
if t.rank == 0:
    print("mesh '%s', %d processes" % (t.mesh, t.num_processes))
    for i, loss in enumerate(losses):
        print("step %d loss %.6f" % (i + 1, loss))
