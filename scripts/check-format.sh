#!/usr/bin/env bash
# Checks that the C, C++ and CUDA sources are formatted as .clang-format
# says, with clang-format 22 (the version .pre-commit-config.yaml pins;
# CIRCT's checkCodeFormat is the model). Prints each file that is not and
# the command that formats it, and exits 1; exits 0 when every file is.
#
#   scripts/check-format.sh [FILE...]    (default: every tracked source)
set -uo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-22}
if ! command -v "$format" >/dev/null; then
  echo "check-format: $format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.c' '*.cu' '*.cuh')
fi
bad=()
for f in "${files[@]}"; do
  "$format" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files; format them with: $format -i FILE..." >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
