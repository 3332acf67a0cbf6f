"""same_losses.py OUT STEPS_TSV: the `step N loss X` lines of OUT (the C API
example or the Python binding) against gptc train's dumped steps.tsv, to
the printed precision (six decimals)."""
import re
import sys

got = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss ([0-9.]+)$", open(sys.argv[1]).read(), re.M)]
rows = [l.split("\t") for l in open(sys.argv[2]).read().split("\n")[1:] if l]
want = [float(r[1]) for r in rows]
bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-6]
if len(got) != len(want) or bad:
    print("FAIL %d losses against %d: %s" % (len(got), len(want), bad[:3]))
    sys.exit(1)
print("%d losses equal gptc train's" % len(got))
