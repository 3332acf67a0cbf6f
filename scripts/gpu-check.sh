#!/usr/bin/env bash
# The device check, on a machine with an NVIDIA GPU (sm_90), from the
# bundle scripts/gpu-prepare.sh made (carry .gpu). Checks the GPU step
# against the CPU step, then benchmarks GPT-2 124M against torch.compile on
# the same GPU, and prints one table. Needs python3 with numpy and a CUDA
# build of PyTorch. docs/Testing.md says how the session runs it.
#
#   scripts/gpu-check.sh [BUNDLE]     (default .gpu/bundle.tar.xz)
#
# Every step runs under its own time limit, so that one that hangs (a
# launcher, a collective) costs its limit and not the machine's time; the
# figures the issue asks for (tokens/s and MFU against torch.compile, the
# kernels against their ceilings) come right after the correctness checks,
# the riskier pipelines under the bundled launcher last. With $OUT set the
# log and each benchmark's JSON are written there as they finish.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle="${1:-.gpu/bundle.tar.xz}"
work=/tmp/gptc-gpu
if [ -n "${OUT:-}" ]; then exec > >(tee "$OUT/gpu-check.log") 2>&1; fi
start=$SECONDS
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf "$bundle" || exit 1
rt="$work/gptc-runtime"
# The bundle's libraries, then CUDA's own (the runtime, cuBLASLt, NCCL:
# not bundled), found wherever this machine keeps the sonames gptc-runtime
# was linked against, whatever CUDA version installed them: a toolkit,
# the linker's cache, or PyTorch's NVIDIA wheels (scripts/find-cuda-libs.sh).
cuda_missing=0
cuda_path=$(scripts/find-cuda-libs.sh "$rt") || cuda_missing=1
export LD_LIBRARY_PATH="$work/lib${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

# Diagnostics first: what a failure below needs to be understood.
echo "== diagnostics"
nvidia-smi || echo "gpu-check: nvidia-smi fails"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm \
  --format=csv 2>/dev/null || true
# The CUDA libraries gptc-runtime was linked against (their sonames), and
# every version of them this machine has, in the search order above.
echo "gptc-runtime needs: $(objdump -p "$rt" 2>/dev/null | awk '/NEEDED/ && /cuda|cublas|nccl/ {printf "%s ", $2}')"
for lib in libcuda.so libcudart.so libcublasLt.so libnccl.so; do
  found=$( (ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 ~ "^"l {print $NF}';
            for d in ${LD_LIBRARY_PATH//:/ }; do ls "$d/$lib"* 2>/dev/null; done) |
          sort -u | tr '\n' ' ')
  echo "  $lib: ${found:-none}"
done
echo "CUDA's libraries from: ${cuda_path:-nowhere}"
echo "resolved:"
ldd "$rt" | grep -E "libcuda|libcublas|libnccl" || true
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'devices', torch.cuda.device_count())" 2>/dev/null || echo "torch: not importable"
if [ $cuda_missing -ne 0 ] || ldd "$rt" | grep "not found"; then
  echo "gpu-check: gptc-runtime misses the libraries above (it links CUDA's"
  echo "sonames of the toolkit it was built with: docs/Limitations.md)"
  exit 1
fi
# The first step with every launch synchronous: an asynchronous fault then
# names the launch that made it, not a later call.
echo "== first step, CUDA_LAUNCH_BLOCKING=1"
CUDA_LAUNCH_BLOCKING=1 timeout --kill-after=10 90 "$rt" "$work/art/tiny.gptc" --device cuda \
  --stop-at-step 1 --eval-interval 0 --log-interval 1 --data "$work/data.txt" \
  --checkpoint "$work/blocking.ckpt" 2>&1 | tail -20 || status=1
rm -rf "$work/blocking.ckpt"

# What each step came to, for the table at the end.
declare -a results=()
# limit SECONDS NAME COMMAND...: runs it under the limit; records ok, FAIL
# or TIMEOUT (and fails the check unless ok). With GPU_CHECK_BUDGET set
# (seconds for the whole check), no step runs past it: each gets what is
# left of it at most, and those it leaves no 15 s for are SKIPPED, so
# that the table below is printed inside the machine's lease.
limit() {
  local secs=$1 name=$2; shift 2
  local t0=$SECONDS rc
  if [ -n "${GPU_CHECK_BUDGET:-}" ]; then
    local left=$((GPU_CHECK_BUDGET - (SECONDS - start)))
    if [ $left -lt 15 ]; then
      results+=("$name|SKIPPED (budget)|0 s")
      status=1
      return 1
    fi
    [ $left -lt "$secs" ] && secs=$left
  fi
  # (bash -c: the command may be one of the functions below, exported.)
  timeout --kill-after=10 "$secs" bash -o pipefail -c '"$@"' _ "$@"
  rc=$?
  local what=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then what="TIMEOUT (${secs} s)"; status=1
  elif [ $rc -ne 0 ]; then what="FAIL (exit $rc)"; status=1; fi
  results+=("$name|$what|$((SECONDS - t0)) s")
  return $rc
}

export work rt
echo "== the GPU step against the CPU step"
gpu_run() { # NAME [compare flags]
  local name=$1; shift
  if "$rt" "$work/art/$name.gptc" --device cuda --stop-at-step 10 --eval-interval 0 \
      --log-interval 0 --data "$work/data.txt" --checkpoint "$work/$name.ckpt" \
      --dump-dir "$work/gpu-$name" 2>"$work/$name.log"; then
    if [ -d "$work/ref/$name" ]; then
      python3 test/Parallel/Inputs/compare_runs.py "$work/ref/$name" "$work/gpu-$name" 1 "$@"
    else
      python3 scripts/run_digest.py "$work/gpu-$name" > "$work/gpu-$name.json" &&
        python3 scripts/run_digest.py --compare "$work/ref/$name.json" "$work/gpu-$name.json" "$@"
    fi
  else
    local rc=$?
    echo "FAIL $name:"; tail -20 "$work/$name.log"
    return $rc
  fi
}
export -f gpu_run
if ! limit 60 "tiny: GPU = CPU" gpu_run tiny && command -v compute-sanitizer >/dev/null; then
  # The first thing to know about a step that fails on the GPU: whether a
  # kernel reads or writes outside its buffers.
  limit 90 "tiny under compute-sanitizer" compute-sanitizer --tool memcheck --print-limit 20 \
    "$rt" "$work/art/tiny.gptc" --device cuda --stop-at-step 2 --eval-interval 0 \
    --log-interval 1 --data "$work/data.txt" --checkpoint "$work/sanitized.ckpt"
fi
limit 60 "tiny, 2 microbatches" gpu_run tiny-accum
# bf16: the tensor-core attention rounds its probabilities (test/Runtime/train-cuda.test).
limit 60 "tiny bf16" gpu_run tiny-bf16 --tol 1e-2 --loss-tol 1e-3
limit 120 "GPT-2 124M, 4 x 128" gpu_run gpt2-b4

echo "== GPT-2 124M bf16 against torch.compile"
json=""
if [ -n "${OUT:-}" ]; then json="--json $OUT/gpu-bench.json"; fi
limit 240 "GPT-2 124M vs torch.compile" python3 bench/gpu_throughput.py --runtime "$rt" \
  --artifact "$work/art/gpt2-bench.gptc" --model bench/models/gpt2-124m-gpu.pbtxt \
  --data "$work/data.txt" $json

echo "== GPT-2 124M's bf16 kernels: GEMMs and attention against PyTorch alone, memory-bound against the copy"
kjson=""
if [ -n "${OUT:-}" ]; then kjson="--json $OUT/gpu-kernels.json"; fi
limit 150 "kernel efficiency" python3 bench/kernel_efficiency.py --device cuda --runtime "$rt" \
  --artifact "$work/art/gpt2-bench.gptc" --data "$work/data.txt" --steps 4 --rounds 2 $kjson

echo "== the attention kernels alone: checked, then against PyTorch's SDPA"
limit 45 "attention f16 check" "$work/gptc-attention-bench" --batch 2 --seq 200 --heads 4 \
  --head-dim 64 --type f16 --check-only
limit 45 "attention bf16 check" "$work/gptc-attention-bench" --batch 1 --seq 300 --heads 2 \
  --head-dim 128 --type bf16 --check-only
ajson=""
if [ -n "${OUT:-}" ]; then ajson="--json $OUT/gpu-attention.json"; fi
limit 90 "attention vs SDPA" python3 bench/gpu_attention.py --bench "$work/gptc-attention-bench" $ajson

echo "== A/B (GPT-2 124M bf16, 6 steps each, alternating, best of 2): GEMM epilogues on and off, rows held in registers or looped over"
ab() { # ARTIFACT...: each in turn, two rounds
  local round variant
  for round in 1 2; do
    for variant in "$@"; do
      "$rt" "$work/art/$variant.gptc" --device cuda --stop-at-step 6 --eval-interval 0 \
        --log-interval 0 --data "$work/data.txt" --checkpoint "$work/ab.ckpt" 2>&1 |
        grep -o '[0-9]* tok/s after the first step' | sed "s/^/$variant round $round: /" || return 1
      rm -rf "$work/ab.ckpt"
    done
  done
}
export -f ab
# CUDA graphs (the step one launch from its second on) against every call
# made each step (GPTC_CUDA_GRAPHS=0): tiny, whose step is launch-bound,
# and GPT-2 124M.
ab_graphs() { # ARTIFACT: each way in turn, two rounds
  local round graphs
  for round in 1 2; do
    for graphs in 1 0; do
      GPTC_CUDA_GRAPHS=$graphs "$rt" "$work/art/$1.gptc" --device cuda --stop-at-step 6 \
        --eval-interval 0 --log-interval 0 --data "$work/data.txt" --checkpoint "$work/ab.ckpt" 2>&1 |
        grep -o 'instead of [0-9]*\|[0-9]* tok/s after the first step' | tr '\n' ' ' |
        sed "s/^/$1 graphs=$graphs round $round: /; s/$/\n/" || return 1
      rm -rf "$work/ab.ckpt"
    done
  done
}
export -f ab_graphs
limit 60 "CUDA graphs A/B, tiny" ab_graphs tiny
limit 120 "CUDA graphs A/B, GPT-2" ab_graphs gpt2-bench
limit 120 "GEMM epilogues A/B" ab gpt2-bench gpt2-bench-noepi
limit 120 "row registers A/B" ab gpt2-bench gpt2-bench-loops

echo "== pipeline stages on the GPU (one process each, under the bundled mpiexec)"
pipeline() { # NAME PROCESSES
  local name=$1 np=$2
  if PATH="$work/mpi:$PATH" "$work/mpi/mpiexec.hydra" -np "$np" "$rt" "$work/art/$name.gptc" \
      --device cuda --stop-at-step 10 --eval-interval 0 --log-interval 0 \
      --data "$work/data.txt" --checkpoint "$work/$name.ckpt" --dump-dir "$work/gpu-$name" \
      >"$work/$name.log" 2>&1; then
    python3 test/Parallel/Inputs/compare_runs.py "$work/ref/tiny8" "$work/gpu-$name" "$np"
  else
    local rc=$?
    echo "FAIL $name:"; tail -20 "$work/$name.log"
    return $rc
  fi
}
export -f pipeline
limit 60 "pipeline pp=2" pipeline tiny8-pp2 2
limit 60 "pipeline dp=2 x pp=2 ZeRO-2" pipeline tiny8-dp2pp2 4

echo "== summary ($((SECONDS - start)) s)"
printf '| %-32s | %-18s | %-6s |\n' step result time
printf '| %-32s | %-18s | %-6s |\n' --- --- ---
for r in "${results[@]}"; do
  IFS='|' read -r name what secs <<<"$r"
  printf '| %-32s | %-18s | %-6s |\n' "$name" "$what" "$secs"
done
if [ -n "${OUT:-}" ] && [ -f "$OUT/gpu-bench.json" ]; then
  python3 - "$OUT/gpu-bench.json" "$OUT/gpu-kernels.json" <<'EOF' || true
import json, os, sys
b = json.load(open(sys.argv[1]))
print("GPT-2 124M bf16: %.0f tok/s, %.2fx torch.compile, MFU %.1f%% (compile %.1f%%)" % (
    b["gptc_tok_s"], b["ratio"], 100 * b["gptc_mfu"], 100 * b["compile_mfu"]))
if os.path.exists(sys.argv[2]):
    k = json.load(open(sys.argv[2]))
    print("GEMMs %.2f of PyTorch alone, attention %.2f of SDPA, memory-bound %.0f%% of the copy" % (
        k["gemm_ratio"], k["attention_ratio"], 100 * k["memory_of_copy"]))
EOF
fi
exit $status
