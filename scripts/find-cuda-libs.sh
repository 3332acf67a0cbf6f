#!/usr/bin/env bash
# Finds the CUDA libraries a program was linked against (the CUDA runtime,
# cuBLASLt, NCCL: their sonames read off the program), wherever this
# machine has them and whatever CUDA version installed them: a toolkit
# under /usr/local (cuda, cuda-12.8, ...), the dynamic linker's cache, or
# the NVIDIA wheels of any python3 (PyTorch's: nvidia/cublas/lib for CUDA
# 12, nvidia/cu13/lib for CUDA 13, nvidia/nccl/lib).
#
#   scripts/find-cuda-libs.sh PROGRAM [ROOT...]
#
# Prints the directories to put on LD_LIBRARY_PATH (colon-separated) and
# exits 0 when every library was found. Otherwise says, on stderr, which
# soname is missing and which versions of that library the machine has
# (a program built with CUDA 13 needs libcudart.so.13; a machine with
# only CUDA 12's libcudart.so.12 needs a bundle built with CUDA 12), and
# exits 1. ROOTs replace the places searched (for tests).
set -uo pipefail
program=${1:?usage: find-cuda-libs.sh PROGRAM [ROOT...]}
shift
if ! needed=$(objdump -p "$program" 2>/dev/null |
  awk '$1 == "NEEDED" && $2 ~ /^lib(cudart|cublasLt|cublas|nccl)\.so/ {print $2}'); then
  echo "find-cuda-libs: cannot read '$program' (objdump)" >&2
  exit 1
fi
if [ $# -gt 0 ]; then
  roots=("$@")
else
  roots=()
  for d in /usr/local/cuda /usr/local/cuda-*; do [ -d "$d" ] && roots+=("$d"); done
  while read -r d; do [ -d "$d/nvidia" ] && roots+=("$d/nvidia"); done < <(
    python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  while read -r d; do roots+=("$d"); done < <(
    ldconfig -p 2>/dev/null | awk '/lib(cudart|cublasLt|nccl)\.so/ {print $NF}' | xargs -r -n1 dirname | sort -u)
fi
# Every version of each library under the roots, in the roots' order.
candidates=$(for r in "${roots[@]}"; do
  find -L "$r" -maxdepth 6 \( -name 'libcudart.so*' -o -name 'libcublasLt.so*' \
    -o -name 'libcublas.so*' -o -name 'libnccl.so*' \) \( -type f -o -type l \) 2>/dev/null
done)
path=""
status=0
for soname in $needed; do
  file=$(printf '%s\n' "$candidates" | awk -v s="$soname" '{n = split($0, p, "/")} p[n] == s {print; exit}')
  if [ -n "$file" ]; then
    dir=$(dirname "$file")
    case ":$path:" in *":$dir:"*) ;; *) path="${path:+$path:}$dir" ;; esac
  else
    stem=${soname%%.so*}
    others=$(printf '%s\n' "$candidates" | awk -F/ -v s="$stem" 'index($NF, s ".so.") == 1 {print $NF}' |
      sort -u | paste -sd, - | sed 's/,/, /g')
    echo "find-cuda-libs: '$program' needs $soname, which this machine does not have" \
      "(it has: ${others:-no $stem at all}); build the program with this machine's CUDA" >&2
    status=1
  fi
done
echo "$path"
exit $status
