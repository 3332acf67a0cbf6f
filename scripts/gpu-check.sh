#!/usr/bin/env bash
# The device check for a machine with a GPU: build for sm_90, run the lit
# tests that touch CUDA (the cuda-device ones included), compile GPT-2
# 124M's kernels to an sm_90 cubin, and print what the runtime sees. Run on
# the lent GPU machine as one command; figures go to docs/performance.md by
# hand. No GPU runtime executes the generated kernels yet, so there is no
# GPU benchmark to run: it joins this script with the runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build-gpu}"

scripts/install-deps.sh
BUILD_DIR="$build_dir" scripts/build.sh

echo "== devices"
"$build_dir/bin/gptc-device-info"

echo "== GPU and CUDA tests"
/usr/lib/llvm-22/bin/lit -sv "$build_dir/test" --filter='Runtime/|Target/CUDA/|gptc/cuda'

echo "== GPT-2 124M's kernels for sm_90"
start=$(date +%s)
"$build_dir/bin/gptc" models/gpt2-124m.pbtxt --emit=cuda | head -1
"$build_dir/bin/gptc" models/gpt2-124m.pbtxt --emit=cubin -o "$build_dir/gpt2-124m.cubin"
echo "cubin: $(stat -c %s "$build_dir/gpt2-124m.cubin") bytes, $(( $(date +%s) - start )) s"
