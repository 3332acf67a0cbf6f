#!/usr/bin/env python3
"""Checks that the figures README.md and docs/*.md quote come from one
place, docs/figures.json: every computed figure is what the build computes
now, every measured one is recorded where the registry says, every quote
of a figure is in its file with the registry's values, and no figure-like
phrase in the docs is left unregistered.

Usage: doc_figures.py SRC_ROOT BIN_DIR [--edit PATH OLD NEW]...
(--edit reads PATH, relative to SRC_ROOT, with OLD replaced by NEW: the
test's own check that a drifted figure fails.)"""
import glob
import json
import os
import re
import subprocess
import sys

# The phrases that quote a figure. Each match in README.md or docs/*.md
# (but docs/performance.md, the measurements' record, and the generated
# references) must lie inside some quoted template.
FIGURE_PHRASES = [
    r"within \d[\d.]*%",
    r"\d[\d,]* generated kernels",
    r"\d[\d,]* distinct",
    r"bubble \d[\d.]*%",
]
GENERATED = {"GptcPasses.md", "GptcCPUPasses.md", "GptcCUDAPasses.md",
             "GptcConversionPasses.md", "performance.md"}


def squeeze(text):
    return re.sub(r"\s+", " ", text)


def rule_kernels(out):
    """--emit=program: every compiled kernel and the distinct symbols they
    run."""
    generated = len(re.findall(r"^\s*compiled \{", out, re.M))
    distinct = len(set(re.findall(r'^\s*symbol: "([^"]*)"', out, re.M)))
    return {"generated": f"{generated:,}", "distinct": str(distinct)}


def rule_bubble(out):
    m = re.search(r"bubble fraction: ([0-9.]+) with equal stages", out)
    return {"bubble": f"{round(float(m.group(1)) * 100)}%"} if m else {}


def rule_cuda_step(out):
    """--emit=cuda's first line: the step's kernels and launches."""
    m = re.match(r"(\d+) kernels, (\d+) launches", out)
    return ({"kernels": f"{int(m.group(1)):,}",
             "launches": f"{int(m.group(2)):,}"} if m else {})


RULES = {"kernels": rule_kernels, "bubble": rule_bubble,
         "cuda_step": rule_cuda_step}


def main():
    src, bindir = sys.argv[1], sys.argv[2]
    edits, rest = [], sys.argv[3:]
    while rest:
        if rest[0] != "--edit" or len(rest) < 4:
            raise SystemExit(__doc__)
        edits.append(tuple(rest[1:4]))
        rest = rest[4:]

    def read(path):
        text = open(os.path.join(src, path)).read()
        for where, old, new in edits:
            if where == path:
                if old not in text:
                    raise SystemExit(f"--edit: '{old}' is not in {path}")
                text = text.replace(old, new)
        return text

    registry = json.loads(read("docs/figures.json"))
    failures = []
    docs = {}

    def doc(path):
        if path not in docs:
            docs[path] = squeeze(read(path))
        return docs[path]

    covered = {}  # path -> [(start, end)] the templates cover
    for name, fig in registry["figures"].items():
        values = fig["values"]
        if "computed" in fig:
            cmd = fig["computed"]["command"].split()
            cmd[0] = os.path.join(bindir, cmd[0])
            out = subprocess.run(cmd, cwd=src, capture_output=True,
                                 text=True)
            requires = fig["computed"].get("requires")
            if (out.returncode != 0 and requires == "cuda-toolkit" and
                    "needs the CUDA toolkit" in out.stderr):
                print(f"{name}: not recomputed (needs the CUDA toolkit)")
                got = values
            elif out.returncode != 0:
                failures.append(f"{name}: {fig['computed']['command']} "
                                f"failed: {out.stderr.strip()}")
                got = {}
            else:
                got = RULES[fig["computed"]["rule"]](out.stdout)
            for key, want in values.items():
                if got.get(key) != want:
                    failures.append(f"{name}: {key} is {got.get(key)} now "
                                    f"({fig['computed']['command']}), the "
                                    f"registry says {want}")
        for rec in fig.get("recorded", []):
            path, template = (rec if isinstance(rec, list)
                              else ["docs/performance.md", rec])
            if squeeze(template.format(**values)) not in doc(path):
                failures.append(f"{name}: {path} does not record "
                                f"'{template.format(**values)}'")
        for path, template in fig["quoted"]:
            text = squeeze(template.format(**values))
            at = doc(path).find(text)
            if at < 0:
                failures.append(f"{name}: {path} does not say '{text}'")
                continue
            while at >= 0:
                covered.setdefault(path, []).append((at, at + len(text)))
                at = doc(path).find(text, at + 1)
        print(f"{name}: {', '.join(f'{k} {v}' for k, v in values.items())}"
              f" ({'computed' if 'computed' in fig else 'recorded'}, quoted "
              f"{len(fig['quoted'])} times)")

    paths = ["README.md"] + sorted(
        os.path.relpath(p, src)
        for p in glob.glob(os.path.join(src, "docs", "*.md"))
        if os.path.basename(p) not in GENERATED)
    for path in paths:
        text = doc(path)
        for phrase in FIGURE_PHRASES:
            for m in re.finditer(phrase, text):
                if not any(a <= m.start() and m.end() <= b
                           for a, b in covered.get(path, [])):
                    context = text[max(0, m.start() - 40):m.end() + 20]
                    failures.append(f"{path}: '{m.group(0)}' is not in "
                                    f"docs/figures.json: ...{context}...")
    for f in failures:
        print("FIGURE:", f)
    print(f"{len(registry['figures'])} figures, {len(paths)} docs swept, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
