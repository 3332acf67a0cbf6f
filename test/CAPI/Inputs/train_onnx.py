"""train_onnx.py MODEL.onnx TOKENS: an ONNX model through the Python
binding starts from its initializers and trains on a token file."""
import sys

import numpy as np

import gptc

t = gptc.Trainer(sys.argv[1], steps=100)
print("parameters %s" % sorted(t.parameter_shapes().items()))
print("wte row 0 %s" % np.array2string(t.read("wte")[0], precision=2))
first = t.train(steps=1, data=sys.argv[2])
last = t.train(steps=99, data=sys.argv[2])
print("loss %.3f after 1 step, %.3f after 100: falling %s" % (first, last, last < first))
