"""Writes ONNX's backend node test cases, as the installed onnx package
defines them (onnx 1.23 from PyPI: opsets up to 24), into DIR in the
layout gptc-onnx-test reads: DIR/<case>/model.onnx and
DIR/<case>/test_data_set_<n>/{input,output}_<k>.pb. The onnx wheel ships
the cases' generators, not their data; this does what `python -m
onnx.backend.test.cmd_tools generate-data` does for the node cases.

  node_data.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node


def proto(value, info):
    """A case's input or output as the .pb file holds it."""
    t = info.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, info.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, info.name)
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), info.name)


def main(out):
    cases = node.collect_testcases()
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data = os.path.join(d, "test_data_set_%d" % i)
            os.makedirs(data, exist_ok=True)
            for kind, values, infos in (("input", inputs, graph.input),
                                        ("output", outputs, graph.output)):
                for k, value in enumerate(values):
                    with open(os.path.join(data, "%s_%d.pb" % (kind, k)), "wb") as f:
                        f.write(proto(value, infos[k]).SerializeToString())
    print("node_data: %d cases in %s" % (len(cases), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
