"""refusals.py MODEL: settings of gptc.Trainer out of their domain, each
refused by name (GptcError's first line)."""
import sys

import gptc
from outcome import error

model = sys.argv[1]
for label, settings in [
        ("pipeline_schedule without pp", dict(pipeline_schedule="gpipe")),
        ("recompute='most'", dict(recompute="most")),
        ("pipeline_schedule='zz'", dict(mesh="pp=2", pipeline_schedule="zz")),
        ("sequence_parallel=2", dict(sequence_parallel=2)),
        ("lr=-1", dict(lr=-1)),
        ("checkpoint_interval=2", dict(checkpoint_interval=2)),
        ("mesh='auto' with grad_accum=2", dict(mesh="auto", hardware="h100-node", devices=2,
                                               grad_accum=2)),
        ("warmup_steps=50 of steps=10", dict(steps=10, warmup_steps=50))]:
    print("%s: %s" % (label, error(lambda: gptc.Trainer(model, **settings))))
