#!/usr/bin/env bash
# Copies the reference generated from ODS (dialect ops, passes) into docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
cmake --build "$build_dir" --target gptc-doc
mkdir -p docs/Dialects
cp "$build_dir/docs/Dialects/GptcDialect.md" docs/Dialects/GptcDialect.md
for f in GptcPasses GptcConversionPasses GptcCPUPasses GptcCUDAPasses; do
  cp "$build_dir/docs/$f.md" "docs/$f.md"
done
echo "docs/Dialects/GptcDialect.md and docs/Gptc{,Conversion,CPU,CUDA}Passes.md updated"
