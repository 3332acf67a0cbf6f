#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what gptc needs, build
# it, and train the default model (models/tiny.pbtxt, or the description
# given as the first argument): its summary, its forward graph, a training
# run on the CPU, and a sample from the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-models/tiny.pbtxt}"
build_dir="${BUILD_DIR:-build}"

scripts/install-deps.sh
scripts/build.sh

echo
echo "== gptc $model --emit=summary"
"$build_dir/bin/gptc" "$model" --emit=summary
echo
echo "== gptc $model --emit=mlir (written to $build_dir/$(basename "$model" .pbtxt).mlir)"
"$build_dir/bin/gptc" "$model" --emit=mlir -o "$build_dir/$(basename "$model" .pbtxt).mlir"
grep -m1 -A3 "func.func @forward" "$build_dir/$(basename "$model" .pbtxt).mlir" | cut -c1-160
echo "   ... ($(grep -c ' = gptc\.' "$build_dir/$(basename "$model" .pbtxt).mlir") gptc ops)"

echo
echo "== gptc train $model"
"$build_dir/bin/gptc" train "$model" --checkpoint "$build_dir/$(basename "$model" .pbtxt).ckpt" --overwrite
echo
echo "== gptc sample $build_dir/$(basename "$model" .pbtxt).ckpt"
"$build_dir/bin/gptc" sample "$build_dir/$(basename "$model" .pbtxt).ckpt" --length 300
