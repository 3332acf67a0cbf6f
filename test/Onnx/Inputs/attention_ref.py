"""ONNX Attention's reference for attention.test's padmask.onnx: 2 query
heads sharing 1 key/value head, [1, H, 3, 4] operands, the default scale
(1/sqrt(4)), a boolean mask whose second row hides every key.

  attention_ref.py MODEL OUT         writes OUT/q.npy, OUT/k.npy, OUT/v.npy
  attention_ref.py MODEL OUT check   compares OUT/gptc/0.npy (gptc-run's
                                     output) with NumPy's attention
"""
import os
import sys

import numpy as np

MASK = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=bool)


def inputs():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    v = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    return q, k, v


def reference(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    k = np.repeat(k, 2, axis=1)
    v = np.repeat(v, 2, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(4.0)
    s = np.where(MASK, s, -np.inf)
    y = np.zeros_like(q)
    for h in range(2):
        for i in range(3):
            if not MASK[i].any():
                continue  # ONNX: a row that sees nothing is 0
            p = np.exp(s[0, h, i] - s[0, h, i].max())
            y[0, h, i] = (p / p.sum()) @ v[0, h]
    return y


def main():
    out = sys.argv[2]
    q, k, v = inputs()
    if len(sys.argv) > 3 and sys.argv[3] == "check":
        got = np.load(os.path.join(out, "gptc", "0.npy")).astype(np.float64)
        want = reference(q, k, v)
        worst = np.abs(got - want).max()
        hidden = np.all(got[0, :, 1] == 0)
        ok = got.shape == want.shape and worst < 1e-6 and hidden
        print("attention: %d outputs %s the reference to 1e-6 (worst %.1e); the hidden row is %s"
              % (got.size, "equal" if ok else "DIFFER from", worst, "0" if hidden else "NOT 0"))
        return 0 if ok else 1
    os.makedirs(out, exist_ok=True)
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(os.path.join(out, name + ".npy"), x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
