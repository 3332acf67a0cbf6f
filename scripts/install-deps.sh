#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) packages gptc builds and tests with.
# MLIR/LLVM 22 come from bookworm-security, which a default Debian 12
# installation already lists. Safe to re-run: installs only what is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ gcc python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libprotobuf-dev protobuf-compiler
  libgtest-dev
  libdnnl-dev
  libtcmalloc-minimal4
  libonnx-dev libonnx-testdata
  mpich libmpich-dev
  clang-22 libclang-rt-22-dev clang-format-22
  python3-numpy python3-torch python3-venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
