#!/usr/bin/env bash
# Installs the current PyTorch stack (scripts/pytorch-requirements.txt:
# torch, onnx, onnxscript, transformers) from PyPI into a virtual
# environment, .venv by default (GPTC_TORCH_VENV to put it elsewhere). The
# tests that need today's exporter, Hugging Face's GPT-2 or the PyTorch
# bridge run with its python (lit's `torch-current` feature); Debian's
# python3-torch (1.13) has none of them. About 1.7 GB downloaded, 5.7 GB on
# disk and 75 s on a fast mirror (docs/Testing.md). Safe to re-run: a venv
# that already has the pinned versions is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${GPTC_TORCH_VENV:-.venv}"
req=scripts/pytorch-requirements.txt
stamp="$venv/.gptc-requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  echo "install-pytorch: $venv has $(grep -c '==' "$req") pinned packages"
  exit 0
fi
start=$(date +%s)
/usr/bin/python3 -m venv "$venv"
# --no-cache-dir: the wheels (1.7 GB) are not kept a second time in
# ~/.cache/pip; a CI machine starts from a clean clone anyway.
"$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir -r "$req"
cp "$req" "$stamp"
echo "install-pytorch: $venv ready in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
