#!/usr/bin/env bash
# Installs what the tests need, builds gptc and runs every test: the lit
# suite (check-gptc: every op, pass, tool and diagnostic) and the
# GoogleTest units, through ctest. Pass --clean to build from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
if [ "${1:-}" = "--clean" ]; then rm -rf "$build_dir"; fi

scripts/install-deps.sh
scripts/build.sh

cd "$build_dir"
ctest --output-on-failure --timeout 1200 -j "$(nproc)"
