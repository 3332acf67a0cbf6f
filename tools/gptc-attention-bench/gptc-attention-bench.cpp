//===- gptc-attention-bench.cpp - The GPU attention kernels, checked and timed
//-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs the runtime's attention kernels (DeviceKernels.h) on one GPU at one
// shape: first checks them (the 16-bit tensor-core kernels against the
// fp32 kernels on the same rounded operands, every output poisoned with
// NaN first, and a second run bit for bit equal to the first: the
// backward uses no atomics), then times the forward and the backward
// with CUDA events (median of the timed runs after warm-up) and prints
// TFLOP/s counting flash attention's way: a causal forward is
// 2 B H T^2 D FLOPs (two products over half of T x T), the backward 2.5
// times that. bench/gpu_attention.py runs PyTorch's scaled_dot_product_
// attention beside it. Exit code 1 when a check fails.
//
//   gptc-attention-bench [--batch B] [--seq T] [--heads H] [--head-dim D]
//                        [--type bf16|f16|f32] [--iterations N] [--check-only]
//
//===----------------------------------------------------------------------===//

#include "DeviceKernels.h"
#include "gptc/Runtime/CUDA/Check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace gptc;

namespace {

struct Options {
  int64_t batch = 8, seq = 1024, heads = 12, headDim = 64;
  std::string type = "bf16";
  int iterations = 20;
  bool checkOnly = false;
};

bool parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char *v = nullptr;
    if (a == "--check-only") {
      o.checkOnly = true;
      continue;
    }
    if (a != "--batch" && a != "--seq" && a != "--heads" && a != "--head-dim" &&
        a != "--type" && a != "--iterations") {
      std::fprintf(stderr, "gptc-attention-bench: unknown flag '%s'\n",
                   a.c_str());
      return false;
    }
    if (!(v = value())) {
      std::fprintf(stderr, "gptc-attention-bench: %s needs a value\n",
                   a.c_str());
      return false;
    }
    if (a == "--type") {
      o.type = v;
      continue;
    }
    char *end = nullptr;
    long long n = std::strtoll(v, &end, 10);
    if (*end || n <= 0 || n > (1 << 30)) {
      std::fprintf(stderr,
                   "gptc-attention-bench: %s takes a positive "
                   "integer, not '%s'\n",
                   a.c_str(), v);
      return false;
    }
    if (a == "--batch")
      o.batch = n;
    else if (a == "--seq")
      o.seq = n;
    else if (a == "--heads")
      o.heads = n;
    else if (a == "--head-dim")
      o.headDim = n;
    else
      o.iterations = static_cast<int>(n);
  }
  if (o.type != "bf16" && o.type != "f16" && o.type != "f32") {
    std::fprintf(stderr,
                 "gptc-attention-bench: --type is bf16, f16 or "
                 "f32, not '%s'\n",
                 o.type.c_str());
    return false;
  }
  if (!cuda::attentionSupportsHeadDim(o.headDim)) {
    std::fprintf(stderr,
                 "gptc-attention-bench: heads are 8, 16, 32, 64 or "
                 "128 wide, not %lld\n",
                 static_cast<long long>(o.headDim));
    return false;
  }
  return true;
}

struct Device {
  void *p = nullptr;
  explicit Device(size_t bytes) { GPTC_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Device() { cudaFree(p); }
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
};

/// Host floats in the element type's bits (rounded to nearest even).
std::vector<uint16_t> toBits(const std::vector<float> &x, bool bf16) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (bf16) {
      __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
      std::memcpy(&bits[i], &h, 2);
    } else {
      __half h = __float2half_rn(x[i]);
      std::memcpy(&bits[i], &h, 2);
    }
  }
  return bits;
}

std::vector<float> fromBits(const std::vector<uint16_t> &bits, bool bf16) {
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bf16) {
      __nv_bfloat16 h;
      std::memcpy(&h, &bits[i], 2);
      x[i] = __bfloat162float(h);
    } else {
      __half h;
      std::memcpy(&h, &bits[i], 2);
      x[i] = __half2float(h);
    }
  }
  return x;
}

double relativeError(const std::vector<float> &x, const std::vector<float> &r) {
  double num = 0, den = 1e-6 * static_cast<double>(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]))
      return INFINITY;
    double d = static_cast<double>(x[i]) - r[i];
    num += d * d;
    den += static_cast<double>(r[i]) * r[i];
  }
  return std::sqrt(num / den);
}

template <typename T>
std::vector<T> download(const Device &d, size_t n) {
  std::vector<T> h(n);
  GPTC_CUDA_CHECK(
      cudaMemcpy(h.data(), d.p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// Median milliseconds of `iterations` runs of `run` after 3 warm-ups.
template <typename F>
float timeMs(F &&run, int iterations) {
  cudaEvent_t start, stop;
  GPTC_CUDA_CHECK(cudaEventCreate(&start));
  GPTC_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i)
    run();
  std::vector<float> times;
  for (int i = 0; i < iterations; ++i) {
    GPTC_CUDA_CHECK(cudaEventRecord(start));
    run();
    GPTC_CUDA_CHECK(cudaEventRecord(stop));
    GPTC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    GPTC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, o))
    return 2;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gptc-attention-bench: no CUDA device\n");
    return 1;
  }
  int64_t B = o.batch, T = o.seq, H = o.heads, C = H * o.headDim;
  size_t n = static_cast<size_t>(B * T * C);
  bool f32 = o.type == "f32", bf16 = o.type == "bf16";
  cuda::AttentionType type = f32    ? cuda::AttentionType::F32
                             : bf16 ? cuda::AttentionType::BF16
                                    : cuda::AttentionType::F16;
  size_t elem = f32 ? 4 : 2;

  // Operands: random normal (scores of a few units), rounded to the type.
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> wide(4, std::vector<float>(n));
  for (auto &x : wide)
    for (float &e : x)
      e = normal(rng) * 1.5f;
  std::vector<std::unique_ptr<Device>> in, out;
  for (auto &x : wide) {
    in.push_back(std::make_unique<Device>(n * elem));
    if (!f32) {
      std::vector<uint16_t> bits = toBits(x, bf16);
      x = fromBits(bits, bf16);
      GPTC_CUDA_CHECK(
          cudaMemcpy(in.back()->p, bits.data(), n * 2, cudaMemcpyHostToDevice));
    } else {
      GPTC_CUDA_CHECK(
          cudaMemcpy(in.back()->p, x.data(), n * 4, cudaMemcpyHostToDevice));
    }
  }
  for (int i = 0; i < 4; ++i)
    out.push_back(std::make_unique<Device>(n * elem));
  Device stats(static_cast<size_t>(cuda::attentionScratchFloats(B, T, H)) *
               sizeof(float));
  auto forward = [&](cuda::AttentionType t, void *const *ops, void *result) {
    GPTC_CUDA_CHECK(cuda::attentionForward(t, ops[0], ops[1], ops[2], result, B,
                                           T, C, H, nullptr));
  };
  auto backward = [&](cuda::AttentionType t, void *const *ops,
                      void *const *res) {
    GPTC_CUDA_CHECK(cuda::attentionBackward(
        t, ops[0], ops[1], ops[2], ops[3], res[0], res[1], res[2],
        static_cast<float *>(stats.p), B, T, C, H, nullptr));
  };
  void *ops[4] = {in[0]->p, in[1]->p, in[2]->p, in[3]->p};
  void *res[4] = {out[0]->p, out[1]->p, out[2]->p, out[3]->p};
  std::printf("attention %s: batch %lld, T %lld, %lld heads of %lld\n",
              o.type.c_str(), (long long)B, (long long)T, (long long)H,
              (long long)o.headDim);

  // Checks: poisoned outputs, then the kernels; the 16-bit ones against
  // the fp32 kernels on the same (rounded) operands.
  int failures = 0;
  for (void *r : res)
    GPTC_CUDA_CHECK(cudaMemset(r, 0xff, n * elem)); // NaN in every type
  forward(type, ops, res[0]);
  backward(type, ops, res + 1);
  GPTC_CUDA_CHECK(cudaDeviceSynchronize());
  auto widen = [&](const Device &d) {
    return f32 ? download<float>(d, n)
               : fromBits(download<uint16_t>(d, n), bf16);
  };
  std::vector<std::vector<float>> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(widen(*out[i]));
  if (!f32) {
    std::vector<std::unique_ptr<Device>> fin, fres;
    for (auto &x : wide) {
      fin.push_back(std::make_unique<Device>(n * 4));
      GPTC_CUDA_CHECK(
          cudaMemcpy(fin.back()->p, x.data(), n * 4, cudaMemcpyHostToDevice));
      fres.push_back(std::make_unique<Device>(n * 4));
    }
    void *fops[4] = {fin[0]->p, fin[1]->p, fin[2]->p, fin[3]->p};
    void *fr[4] = {fres[0]->p, fres[1]->p, fres[2]->p, fres[3]->p};
    forward(cuda::AttentionType::F32, fops, fr[0]);
    backward(cuda::AttentionType::F32, fops, fr + 1);
    GPTC_CUDA_CHECK(cudaDeviceSynchronize());
    // bf16 and fp16 round the probabilities and dS to 16 bits: measured
    // 2.6e-3 and 3.2e-4 under the CPU emulation (DeviceKernelsTest.cpp).
    double tolerance = bf16 ? 5e-3 : 6e-4;
    const char *names[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i) {
      double e = relativeError(got[i], download<float>(*fres[i], n));
      bool ok = e < tolerance;
      failures += !ok;
      std::printf("%s %s against the fp32 kernel: relative error %.2e "
                  "(tolerance %.0e)\n",
                  ok ? "PASS" : "FAIL", names[i], e, tolerance);
    }
  } else {
    for (int i = 0; i < 4; ++i)
      for (float x : got[i])
        if (!std::isfinite(x)) {
          ++failures;
          std::printf("FAIL an fp32 output is not finite\n");
          break;
        }
  }
  // Deterministic: a second run gives the same bits.
  for (void *r : res)
    GPTC_CUDA_CHECK(cudaMemset(r, 0xff, n * elem));
  forward(type, ops, res[0]);
  backward(type, ops, res + 1);
  GPTC_CUDA_CHECK(cudaDeviceSynchronize());
  bool same = true;
  for (int i = 0; i < 4; ++i)
    same &= widen(*out[i]) == got[i];
  failures += !same;
  std::printf("%s a second run gives the same bits\n", same ? "PASS" : "FAIL");
  if (o.checkOnly) {
    std::printf("attention check: %d failed\n", failures);
    return failures ? 1 : 0;
  }

  double fwdFlops = 2.0 * B * H * static_cast<double>(T) * T * o.headDim;
  float fwdMs = timeMs([&] { forward(type, ops, res[0]); }, o.iterations);
  float bwdMs = timeMs([&] { backward(type, ops, res + 1); }, o.iterations);
  std::printf("forward %.3f ms %.1f TFLOP/s\n", fwdMs,
              fwdFlops / (fwdMs * 1e-3) / 1e12);
  std::printf("backward %.3f ms %.1f TFLOP/s\n", bwdMs,
              2.5 * fwdFlops / (bwdMs * 1e-3) / 1e12);
  std::printf("attention check: %d failed\n", failures);
  return failures ? 1 : 0;
}
