#!/usr/bin/env bash
# The device check, on a machine with an NVIDIA GPU (sm_90), from the
# bundle scripts/gpu-prepare.sh made (carry .gpu). Checks the GPU step
# against the CPU step, then benchmarks GPT-2 124M against torch.compile on
# the same GPU, and prints one table. Needs python3 with numpy and a CUDA
# build of PyTorch. docs/Testing.md says how the session runs it.
#
#   scripts/gpu-check.sh [BUNDLE]     (default .gpu/bundle.tar.xz)
set -uo pipefail
cd "$(dirname "$0")/.."
bundle="${1:-.gpu/bundle.tar.xz}"
work=/tmp/gptc-gpu
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf "$bundle" || exit 1
# The bundle's libraries, then CUDA's own (cudart, cuBLASLt) from the
# toolkit or, failing that, from PyTorch's wheels.
cuda_libs=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
wheel_libs=$(python3 -c "import os, nvidia.cublas, nvidia.cuda_runtime as r; print(os.path.dirname(nvidia.cublas.__file__) + '/lib:' + os.path.dirname(r.__file__) + '/lib')" 2>/dev/null || true)
# NCCL (not bundled: 200 MB) from PyTorch's wheel where the toolkit lacks it.
nccl_libs=$(python3 -c "import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], 'lib'))" 2>/dev/null || true)
wheel_libs="$wheel_libs${nccl_libs:+:$nccl_libs}"
export LD_LIBRARY_PATH="$work/lib:$cuda_libs${wheel_libs:+:$wheel_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rt="$work/gptc-runtime"
status=0
if ldd "$rt" | grep "not found"; then
  echo "gpu-check: gptc-runtime misses the libraries above"
  exit 1
fi

echo "== device"
nvidia-smi -L || true

echo "== the GPU step against the CPU step"
check() { # NAME [compare flags]
  local name=$1; shift
  if "$rt" "$work/art/$name.gptc" --device cuda --stop-at-step 10 --eval-interval 0 \
      --log-interval 0 --data "$work/data.txt" --checkpoint "$work/$name.ckpt" \
      --dump-dir "$work/gpu-$name" 2>"$work/$name.log"; then
    if [ -d "$work/ref/$name" ]; then
      python3 test/Parallel/Inputs/compare_runs.py "$work/ref/$name" "$work/gpu-$name" 1 "$@" || status=1
    else
      python3 scripts/run_digest.py "$work/gpu-$name" > "$work/gpu-$name.json"
      python3 scripts/run_digest.py --compare "$work/ref/$name.json" "$work/gpu-$name.json" "$@" || status=1
    fi
  else
    status=1
    echo "FAIL $name:"; tail -20 "$work/$name.log"
  fi
}
check tiny
check tiny-accum
# bf16: the tensor-core attention rounds its probabilities (test/Runtime/train-cuda.test).
check tiny-bf16 --tol 1e-2 --loss-tol 1e-3
check gpt2-b4

echo "== pipeline stages on the GPU (one process each, under the bundled mpiexec)"
pipeline() { # NAME PROCESSES
  local name=$1 np=$2
  if PATH="$work/mpi:$PATH" "$work/mpi/mpiexec.hydra" -np "$np" "$rt" "$work/art/$name.gptc" \
      --device cuda --stop-at-step 10 --eval-interval 0 --log-interval 0 \
      --data "$work/data.txt" --checkpoint "$work/$name.ckpt" --dump-dir "$work/gpu-$name" \
      >"$work/$name.log" 2>&1; then
    python3 test/Parallel/Inputs/compare_runs.py "$work/ref/tiny8" "$work/gpu-$name" "$np" || status=1
  else
    status=1
    echo "FAIL $name:"; tail -20 "$work/$name.log"
  fi
}
pipeline tiny8-pp2 2
pipeline tiny8-dp2pp2 4

echo "== the attention kernels alone: checked, then against PyTorch's SDPA"
"$work/gptc-attention-bench" --batch 2 --seq 200 --heads 4 --head-dim 64 --type f16 --check-only || status=1
"$work/gptc-attention-bench" --batch 1 --seq 300 --heads 2 --head-dim 128 --type bf16 --check-only || status=1
ajson=""
if [ -n "${OUT:-}" ]; then ajson="--json $OUT/gpu-attention.json"; fi
python3 bench/gpu_attention.py --bench "$work/gptc-attention-bench" $ajson || status=1

echo "== GPT-2 124M's bf16 kernels: GEMMs and attention against PyTorch alone, memory-bound against the copy"
kjson=""
if [ -n "${OUT:-}" ]; then kjson="--json $OUT/gpu-kernels.json"; fi
python3 bench/kernel_efficiency.py --device cuda --runtime "$rt" --artifact "$work/art/gpt2-bench.gptc" \
  --data "$work/data.txt" --steps 4 --rounds 2 $kjson || status=1

echo "== GEMM epilogues on and off (GPT-2 124M bf16, 6 steps each, alternating, best of 2)"
for round in 1 2; do
  for variant in gpt2-bench gpt2-bench-noepi; do
    "$rt" "$work/art/$variant.gptc" --device cuda --stop-at-step 6 --eval-interval 0 \
      --log-interval 0 --data "$work/data.txt" --checkpoint "$work/epi.ckpt" 2>&1 |
      grep -o '[0-9]* tok/s after the first step' | sed "s/^/$variant round $round: /" || status=1
    rm -rf "$work/epi.ckpt"
  done
done

echo "== GPT-2 124M bf16 against torch.compile"
json=""
if [ -n "${OUT:-}" ]; then json="--json $OUT/gpu-bench.json"; fi
python3 bench/gpu_throughput.py --runtime "$rt" --artifact "$work/art/gpt2-bench.gptc" \
  --model bench/models/gpt2-124m-gpu.pbtxt --data "$work/data.txt" $json || status=1
exit $status
