#!/usr/bin/env bash
# Prepares scripts/gpu-check.sh's bundle, on a machine with the compiler.
#
# The GPU machines this project borrows have the CUDA toolkit and PyTorch
# but not MLIR/LLVM 22, protobuf, oneDNN or MPICH, and what travels to
# them is limited (64 MiB), so everything the compiler makes is made
# here: the CUDA artifacts (`gptc --emit=artifact --device=cuda`: sm_90
# cubins and launch plans), the CPU runs the GPU runs are checked against,
# and gptc-runtime (the runtime without the compiler) with the libraries
# it needs there. Output: .gpu/bundle.tar.xz (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
BUILD_DIR="$build_dir" scripts/build.sh >/dev/null
gptc="$build_dir/bin/gptc"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/art" "$stage/ref"

# 1. gptc-runtime and the shared libraries the GPU machine lacks (the C and
#    C++ runtimes and CUDA's libraries are there); MPICH's launcher
#    (mpiexec.hydra and its proxy) for the pipeline's processes.
cp "$build_dir/bin/gptc-runtime" "$build_dir/bin/gptc-attention-bench" "$stage/"
mkdir -p "$stage/mpi"
cp -L /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy "$stage/mpi/"
for bin in "$build_dir/bin/gptc-runtime" /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|\
    librt.so*|ld-linux*|libcuda*|libcublas*|libcudart*|libnccl*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
# (NCCL, 200 MB, is there in PyTorch's wheels.) Symbols are not needed there.
chmod u+w "$stage"/lib/*
strip --strip-unneeded "$stage"/lib/* "$stage/mpi/"* 2>/dev/null || true
cp /usr/share/common-licenses/GPL-3 "$stage/data.txt"

# 2. The artifacts: the checks' (tiny three ways, GPT-2 124M's model with
#    a small batch) and the benchmark's.
"$gptc" models/tiny.pbtxt --emit=artifact --device=cuda -o "$stage/art/tiny.gptc"
"$gptc" models/tiny.pbtxt --grad-accum 2 --emit=artifact --device=cuda -o "$stage/art/tiny-accum.gptc"
"$gptc" test/Parallel/Inputs/tiny-bf16.pbtxt --emit=artifact --device=cuda -o "$stage/art/tiny-bf16.gptc"
"$gptc" test/Runtime/Inputs/gpt2-124m-b4.pbtxt --emit=artifact --device=cuda -o "$stage/art/gpt2-b4.gptc"
"$gptc" bench/models/gpt2-124m-gpu.pbtxt --emit=artifact --device=cuda -o "$stage/art/gpt2-bench.gptc"
# The same step without GEMM epilogues (GELU and bias gradients as kernels).
"$gptc" bench/models/gpt2-124m-gpu.pbtxt --emit=artifact --device=cuda --gemm-epilogues=false \
  -o "$stage/art/gpt2-bench-noepi.gptc"
# The same step with its row kernels looping over each row in every phase
# (no row held in registers, layer norm's weight and bias gradients summed
# after its gradient's nest).
"$gptc" bench/models/gpt2-124m-gpu.pbtxt --emit=artifact --device=cuda --cuda-row-registers=0 \
  -o "$stage/art/gpt2-bench-loops.gptc"
# Pipeline stages (8-layer tiny: two stages, then two replicas of them with
# ZeRO-2), one process each under the bundled mpiexec, sharing the GPU.
pipe=test/Parallel/Inputs/tiny-8layer.pbtxt
"$gptc" $pipe --mesh pp=2 --grad-accum 4 --pipeline-schedule=1f1b --emit=artifact --device=cuda \
  -o "$stage/art/tiny8-pp2.gptc"
"$gptc" $pipe --mesh dp=2,pp=2 --zero-stage 2 --grad-accum 2 --emit=artifact --device=cuda \
  -o "$stage/art/tiny8-dp2pp2.gptc"

# 3. The CPU runs they are checked against (the same schedules: each
#    description's steps, stopped after 10).
run() { # NAME DESCRIPTION [gptc train flags]
  local name=$1 desc=$2; shift 2
  "$gptc" train "$desc" "$@" --stop-at-step 10 --eval-interval 0 --log-interval 0 \
    --data "$stage/data.txt" --checkpoint "$stage/ref/$name.ckpt" --dump-dir "$stage/ref/$name" 2>/dev/null
  rm -rf "$stage/ref/$name.ckpt"
}
run tiny models/tiny.pbtxt
run tiny-accum models/tiny.pbtxt --grad-accum 2
run tiny-bf16 test/Parallel/Inputs/tiny-bf16.pbtxt
run gpt2-b4 test/Runtime/Inputs/gpt2-124m-b4.pbtxt
run tiny8 test/Parallel/Inputs/tiny-8layer.pbtxt
/usr/bin/python3 scripts/run_digest.py "$stage/ref/gpt2-b4" > "$stage/ref/gpt2-b4.json"
rm -rf "$stage/ref/gpt2-b4"

mkdir -p .gpu
tar -C "$stage" -cJf .gpu/bundle.tar.xz .
echo "gpu-prepare: .gpu/bundle.tar.xz, $(stat -c %s .gpu/bundle.tar.xz) bytes"
