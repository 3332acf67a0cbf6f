#!/usr/bin/env bash
# Configures and builds gptc into $BUILD_DIR (default: build/).
#   --sanitize   the ASan + UBSan build with clang-22 and the fuzz targets
#                (default directory: build-asan/; no CUDA runtime)
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
if [ "${1:-}" = "--sanitize" ]; then
  build_dir="${BUILD_DIR:-build-asan}"
  extra=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22
         -DGPTC_SANITIZE=ON -DGPTC_ENABLE_CUDA=OFF)
else
  build_dir="${BUILD_DIR:-build}"
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DMLIR_LINK_MLIR_DYLIB=ON "${extra[@]}"
fi
cmake --build "$build_dir"
