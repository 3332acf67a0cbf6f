#!/usr/bin/env bash
# The device check for a machine with a GPU: build for sm_90, run the lit
# suite (the cuda-device tests included) and print what the runtime sees.
# Run on the lent GPU machine as one command; figures go to
# docs/performance.md by hand. GPU benchmarks join this script as the CUDA
# target grows.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build-gpu}"

scripts/install-deps.sh
BUILD_DIR="$build_dir" scripts/build.sh

echo "== devices"
"$build_dir/bin/gptc-device-info"

echo "== GPU tests"
/usr/lib/llvm-22/bin/lit -sv "$build_dir/test" --filter='Runtime/'
