"""What mlir-runner printed, compared with NumPy's results.

Shared by the lowering checks (test/Conversion/GptcToLinalg/Inputs) and
the GPU mapping check (test/Target/CUDA/Inputs), which both print each
result with printMemrefF32/I32 and compare it, result by result, with a
float64 reference: relative error below 1e-5 of the result's largest
magnitude. A NaN or infinity where the reference is finite (a result
the code left unwritten) fails.
"""
import re

import numpy as np


def parse(text):
    """The numbers of each printed memref, in order."""
    out = []
    for block in text.split("Unranked Memref")[1:]:
        body = block.split("data =", 1)[1]
        out.append(np.array([float(v) for v in re.findall(r"[-+0-9.eE]+(?:nan|inf)?", body)]))
    return out


def compare(got, expected, what):
    """Prints the verdict; returns the exit status (0: all match)."""
    if len(got) != len(expected):
        print(f"FAIL: {len(got)} results printed, {len(expected)} expected")
        return 1
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e, np.float64).reshape(-1)
        if g.size != e.size:
            print(f"FAIL: result {i} has {g.size} elements, expected {e.size}")
            return 1
        err = np.abs(g - e).max() / max(np.abs(e).max(), 1e-30)
        if not np.isfinite(err) or err > 1e-5:
            print(f"FAIL: result {i} off by {err:.3g} (relative)")
            return 1
        worst = max(worst, err)
    print(f"{len(got)} {what} match NumPy (worst relative error {worst:.1e})")
    return 0
