//===- DeviceKernelsTest.cpp - The CUDA kernels, run on the CPU -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's hand-written CUDA kernels (lib/Runtime/CUDA/
// DeviceKernels.cuh) compiled as host C++ and run under the emulation of
// CudaEmulation.h, through the same launch functions the GPU runtime
// calls, against float64 references: attention in fp32 and on the tensor
// cores in bf16 and fp16 (forward and backward, several head widths and
// lengths that do not fill a tile), and the embedding's gradient. Every
// output starts as NaN, so an element a kernel does not write fails. The
// emulation itself is checked first: its barriers, shuffles, deadlock
// reports and tensor-core fragment layout.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include "DeviceKernels.cuh"

#include "gptc/Runtime/CPU/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <vector>

using namespace gptc;
using namespace gptc::cuda::device;

namespace {

/// The launch the kernels' launch functions take: the emulation.
struct EmulatedLaunch {
  template <typename... Params, typename... Args>
  void operator()(dim3 grid, dim3 block, void (*kernel)(Params...),
                  Args... args) {
    emu::launchKernel(grid, block, kernel, args...);
  }
};

/// ||x - ref|| / ||ref||, against at least 1e-3 per element in the
/// denominator: a gradient that is exactly zero (one position's dq) is
/// compared absolutely. NaN anywhere is an infinite error.
double relativeError(const std::vector<float> &x,
                     const std::vector<double> &ref) {
  double num = 0, den = 1e-6 * static_cast<double>(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double d = x[i] - ref[i];
    if (std::isnan(x[i]))
      return std::numeric_limits<double>::infinity();
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

//===----------------------------------------------------------------------===//
// The emulation
//===----------------------------------------------------------------------===//

__global__ void blockSumKernel(const float *x, float *out) {
  __shared__ float partial[64];
  partial[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  for (int stride = 32; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = partial[0];
}

TEST(CudaEmulation, SharedMemoryAndBarriers) {
  std::vector<float> x(3 * 64), out(3, NAN);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 7);
  emu::launchKernel(dim3(3), dim3(64), blockSumKernel, x.data(), out.data());
  for (int b = 0; b < 3; ++b) {
    float expected = 0;
    for (int i = 0; i < 64; ++i)
      expected += x[b * 64 + i];
    EXPECT_EQ(out[b], expected);
  }
}

/// Without a barrier between the write and the read, thread 0 reads its
/// neighbour's slot before the neighbour has written it: the emulation
/// runs each thread to its next barrier in turn, so the race shows.
__global__ void missingBarrierKernel(float base, float *out) {
  __shared__ float slot[32];
  slot[threadIdx.x] = base + static_cast<float>(threadIdx.x);
  out[threadIdx.x] = slot[(threadIdx.x + 1) % 32];
}

TEST(CudaEmulation, MissingBarrierShowsAsWrongResult) {
  std::vector<float> out(32, NAN);
  emu::launchKernel(dim3(1), dim3(32), missingBarrierKernel, 100.f, out.data());
  EXPECT_EQ(out[31], 100.f); // slot 0 was written before thread 31 ran
  emu::launchKernel(dim3(1), dim3(32), missingBarrierKernel, 200.f, out.data());
  EXPECT_EQ(out[0], 101.f); // the previous launch's slot 1, not 201
  EXPECT_EQ(out[31], 200.f);
}

__global__ void warpSumKernel(const float *x, float *out) {
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

TEST(CudaEmulation, ShufflesReduceAWarp) {
  std::vector<float> x(64), out(64, NAN);
  for (int i = 0; i < 64; ++i)
    x[i] = static_cast<float>(i);
  emu::launchKernel(dim3(1), dim3(64), warpSumKernel, x.data(), out.data());
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(out[i], 496.f);       // 0 + ... + 31
    EXPECT_EQ(out[32 + i], 1520.f); // 32 + ... + 63
  }
}

__global__ void divergentBarrierKernel(float *out) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    out[0] = __shfl_xor_sync(0xffffffffu, 1.f, 1);
}

TEST(CudaEmulation, DeadlocksAreReported) {
  float out = 0;
  try {
    emu::launchKernel(dim3(1), dim3(32), divergentBarrierKernel, &out);
    FAIL() << "a divergent barrier ran";
  } catch (const std::runtime_error &e) {
    std::string what = e.what();
    EXPECT_NE(what.find("deadlocked in block (0,0,0)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("thread (0,0,0): at __syncthreads"), std::string::npos)
        << what;
    EXPECT_NE(what.find("thread (16,0,0): at __shfl_xor_sync"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(
      emu::launchKernel(dim3(1), dim3(2048), divergentBarrierKernel, &out),
      std::runtime_error);
}

/// A product laid out by hand in PTX's m16n8k16 fragments gives A B.
__global__ void mmaKernel(const float *a, const float *b, float *d) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](float lo, float hi) { return Bf16::pack(lo, hi); };
  uint32_t af[4] = {
      pair(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]),
      pair(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]),
      pair(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]),
      pair(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9])};
  // B is 16 x 8, row-major in memory: element (k, n) at b[k * 8 + n].
  uint32_t bf[2] = {pair(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]),
                    pair(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g])};
  float acc[4] = {1.f, 1.f, 1.f, 1.f};
  Bf16::mma(acc, af, bf);
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

TEST(CudaEmulation, TensorCoreFragmentsFollowPtx) {
  std::vector<float> a(16 * 16), b(16 * 8), d(16 * 8, NAN);
  for (int i = 0; i < 16 * 16; ++i)
    a[i] = static_cast<float>((i * 7) % 11 - 5); // exact in bf16
  for (int i = 0; i < 16 * 8; ++i)
    b[i] = static_cast<float>((i * 5) % 9 - 4);
  emu::launchKernel(dim3(1), dim3(32), mmaKernel, a.data(), b.data(), d.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float expected = 1.f;
      for (int k = 0; k < 16; ++k)
        expected += a[m * 16 + k] * b[k * 8 + n];
      EXPECT_EQ(d[m * 8 + n], expected) << m << "," << n;
    }
}

TEST(CudaEmulation, SixteenBitRounding) {
  EXPECT_EQ(emu::floatToBf16(1.f), 0x3f80);
  EXPECT_EQ(emu::floatToBf16(1.00390625f), 0x3f80); // a tie: to even
  EXPECT_EQ(emu::floatToBf16(1.01171875f), 0x3f82); // a tie: to even
  EXPECT_TRUE(std::isnan(emu::bf16ToFloat(emu::floatToBf16(NAN))));
  EXPECT_EQ(emu::floatToHalf(1.f), 0x3c00);
  EXPECT_EQ(emu::floatToHalf(65504.f), 0x7bff);
  EXPECT_EQ(emu::floatToHalf(65520.f), 0x7c00); // rounds to infinity
  EXPECT_EQ(emu::floatToHalf(-0.f), 0x8000);
  EXPECT_EQ(emu::halfToFloat(0x0001), std::ldexp(1.f, -24));
  for (uint32_t h = 0; h < 0x7c00; ++h) // every finite positive half
    ASSERT_EQ(emu::floatToHalf(emu::halfToFloat(static_cast<uint16_t>(h))), h);
  // Halfway between two subnormals rounds to even.
  EXPECT_EQ(emu::floatToHalf(std::ldexp(3.f, -25)), 0x0002);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionReference {
  std::vector<double> out, dq, dk, dv;
};

/// Causal attention and its gradients in float64 ([B, T, C], heads of D).
AttentionReference referenceAttention(const std::vector<double> &q,
                                      const std::vector<double> &k,
                                      const std::vector<double> &v,
                                      const std::vector<double> &dout, int B,
                                      int T, int C, int H) {
  int D = C / H;
  double scale = 1 / std::sqrt(static_cast<double>(D));
  AttentionReference r;
  size_t n = q.size();
  r.out.assign(n, 0);
  r.dq.assign(n, 0);
  r.dk.assign(n, 0);
  r.dv.assign(n, 0);
  std::vector<double> p(T), dp(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        auto at = [&](int t, int c) {
          return (static_cast<size_t>(b) * T + t) * C + h * D + c;
        };
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int c = 0; c < D; ++c)
            s += q[at(i, c)] * k[at(j, c)];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j)
          sum += p[j] = std::exp(p[j] - mx);
        double delta = 0;
        for (int j = 0; j <= i; ++j) {
          p[j] /= sum;
          double d = 0;
          for (int c = 0; c < D; ++c) {
            r.out[at(i, c)] += p[j] * v[at(j, c)];
            d += dout[at(i, c)] * v[at(j, c)];
          }
          dp[j] = d;
          delta += p[j] * d;
        }
        for (int j = 0; j <= i; ++j) {
          double ds = p[j] * (dp[j] - delta);
          for (int c = 0; c < D; ++c) {
            r.dq[at(i, c)] += ds * k[at(j, c)] * scale;
            r.dk[at(j, c)] += ds * q[at(i, c)] * scale;
            r.dv[at(j, c)] += p[j] * dout[at(i, c)];
          }
        }
      }
  return r;
}

struct AttentionCase {
  int B, T, C, H;
};
void PrintTo(const AttentionCase &c, std::ostream *os) {
  *os << "B=" << c.B << " T=" << c.T << " C=" << c.C << " H=" << c.H;
}

std::vector<double> randomValues(size_t n, std::mt19937 &rng, double std) {
  std::normal_distribution<double> normal(0, std);
  std::vector<double> x(n);
  for (double &e : x)
    e = normal(rng);
  return x;
}

class Fp32Attention : public testing::TestWithParam<AttentionCase> {};

TEST_P(Fp32Attention, MatchesFloat64) {
  AttentionCase c = GetParam();
  size_t n = static_cast<size_t>(c.B) * c.T * c.C;
  std::mt19937 rng(static_cast<unsigned>(c.T * 131 + c.C));
  std::vector<std::vector<double>> wide;
  std::vector<std::vector<float>> in;
  for (double std : {1.5, 1.5, 1.0, 1.0}) {
    wide.push_back(randomValues(n, rng, std));
    in.emplace_back(wide.back().begin(), wide.back().end());
    for (size_t i = 0; i < n; ++i) // the float inputs, exactly
      wide.back()[i] = in.back()[i];
  }
  AttentionReference ref = referenceAttention(wide[0], wide[1], wide[2],
                                              wide[3], c.B, c.T, c.C, c.H);
  std::vector<float> out(n, NAN), dq(n, NAN), dk(n, NAN), dv(n, NAN),
      stats(static_cast<size_t>(c.B) * c.H * c.T * 2, NAN);
  EmulatedLaunch launch;
  ASSERT_TRUE(launchAttentionForward(launch, in[0].data(), in[1].data(),
                                     in[2].data(), out.data(), c.B, c.T, c.C,
                                     c.H));
  ASSERT_TRUE(launchAttentionBackward(
      launch, in[0].data(), in[1].data(), in[2].data(), in[3].data(), dq.data(),
      dk.data(), dv.data(), stats.data(), c.B, c.T, c.C, c.H));
  EXPECT_LT(relativeError(out, ref.out), 2e-6);
  EXPECT_LT(relativeError(dq, ref.dq), 2e-6);
  EXPECT_LT(relativeError(dk, ref.dk), 2e-6);
  EXPECT_LT(relativeError(dv, ref.dv), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Fp32Attention,
    testing::Values(AttentionCase{2, 70, 32, 2},  // D = 16, two tiles, a tail
                    AttentionCase{1, 1, 8, 1},    // one position
                    AttentionCase{1, 40, 128, 2}, // D = 64
                    AttentionCase{1, 33, 128, 1}  // D = 128: 32-row tiles
                    ));

/// Attention on bf16 or fp16 operands.
struct TcCase {
  AttentionCase shape;
  bool bf16;
};
void PrintTo(const TcCase &c, std::ostream *os) {
  PrintTo(c.shape, os);
  *os << (c.bf16 ? " bf16" : " fp16");
}

class TensorCoreAttention : public testing::TestWithParam<TcCase> {};

TEST_P(TensorCoreAttention, MatchesFloat64OfTheRoundedOperands) {
  TcCase tc = GetParam();
  AttentionCase c = tc.shape;
  size_t n = static_cast<size_t>(c.B) * c.T * c.C;
  auto toBits = tc.bf16 ? emu::floatToBf16 : emu::floatToHalf;
  auto fromBits = tc.bf16 ? emu::bf16ToFloat : emu::halfToFloat;
  std::mt19937 rng(static_cast<unsigned>(c.T * 977 + c.C + tc.bf16));
  std::vector<std::vector<double>> wide;
  std::vector<std::vector<uint16_t>> in;
  for (double std : {1.5, 1.5, 1.0, 1.0}) {
    wide.push_back(randomValues(n, rng, std));
    in.emplace_back(n);
    for (size_t i = 0; i < n; ++i) {
      in.back()[i] = toBits(static_cast<float>(wide.back()[i]));
      wide.back()[i] = fromBits(in.back()[i]);
    }
  }
  AttentionReference ref = referenceAttention(wide[0], wide[1], wide[2],
                                              wide[3], c.B, c.T, c.C, c.H);
  uint16_t nanBits = tc.bf16 ? 0x7fc0 : 0x7e00;
  std::vector<uint16_t> out(n, nanBits), dq(n, nanBits), dk(n, nanBits),
      dv(n, nanBits);
  std::vector<float> stats(static_cast<size_t>(c.B) * c.H * c.T * 2, NAN);
  EmulatedLaunch launch;
  auto forward = tc.bf16 ? launchAttentionForwardTc<Bf16, EmulatedLaunch &>
                         : launchAttentionForwardTc<Half, EmulatedLaunch &>;
  auto backward = tc.bf16 ? launchAttentionBackwardTc<Bf16, EmulatedLaunch &>
                          : launchAttentionBackwardTc<Half, EmulatedLaunch &>;
  ASSERT_TRUE(forward(launch, in[0].data(), in[1].data(), in[2].data(),
                      out.data(), c.B, c.T, c.C, c.H));
  ASSERT_TRUE(backward(launch, in[0].data(), in[1].data(), in[2].data(),
                       in[3].data(), dq.data(), dk.data(), dv.data(),
                       stats.data(), c.B, c.T, c.C, c.H));
  auto widen = [&](const std::vector<uint16_t> &x) {
    std::vector<float> f(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      f[i] = fromBits(x[i]);
    return f;
  };
  // The probabilities and dS are rounded to 16 bits before their
  // products: errors of a few units of the last place of the format
  // (bf16 2^-8, fp16 2^-11; measured 2.6e-3 and 3.2e-4), never NaN.
  double tolerance = tc.bf16 ? 5e-3 : 6e-4;
  EXPECT_LT(relativeError(widen(out), ref.out), tolerance);
  EXPECT_LT(relativeError(widen(dq), ref.dq), tolerance);
  EXPECT_LT(relativeError(widen(dk), ref.dk), tolerance);
  EXPECT_LT(relativeError(widen(dv), ref.dv), tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TensorCoreAttention,
    testing::Values(TcCase{{2, 50, 32, 4}, true},   // D = 8: zero columns
                    TcCase{{2, 100, 32, 2}, true},  // D = 16, 2 query blocks
                    TcCase{{1, 1, 64, 2}, true},    // D = 32, one position
                    TcCase{{1, 80, 128, 2}, true},  // D = 64
                    TcCase{{1, 70, 128, 1}, true},  // D = 128: 32-row tiles
                    TcCase{{1, 129, 64, 1}, true},  // a 3rd block of 1 row
                    TcCase{{2, 100, 32, 2}, false}, // fp16
                    TcCase{{1, 80, 128, 2}, false}));

/// Head widths the kernels do not take are refused, not run.
TEST(TensorCoreAttention, RefusesOtherHeadWidths) {
  EmulatedLaunch launch;
  std::vector<uint16_t> x(64);
  EXPECT_FALSE(launchAttentionForwardTc<Bf16>(launch, x.data(), x.data(),
                                              x.data(), x.data(), 1, 4, 16, 4));
  EXPECT_FALSE(launchAttentionForwardTc<Bf16>(launch, x.data(), x.data(),
                                              x.data(), x.data(), 1, 1, 48, 1));
  std::vector<float> f(64);
  EXPECT_FALSE(launchAttentionForward(launch, f.data(), f.data(), f.data(),
                                      f.data(), 1, 1, 48, 1));
}

//===----------------------------------------------------------------------===//
// The embedding's gradient
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, EmbeddingGradSumsRowsInRange) {
  // A vocabulary block [10, 20) of a table 6 wide: ids outside add nothing.
  std::vector<int32_t> ids = {12, 3, 12, 19, 20, 10, 15, 12};
  int64_t width = 6, vocab = 10;
  int32_t offset = 10;
  std::vector<float> dy(ids.size() * width), table(vocab * width, 0.f);
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = static_cast<float>(i) * 0.25f - 3.f;
  EmulatedLaunch launch;
  launchEmbeddingGrad(launch, ids.data(), static_cast<int64_t>(ids.size()),
                      dy.data(), vocab, width, &offset, table.data());
  std::vector<float> expected(vocab * width, 0.f);
  for (size_t p = 0; p < ids.size(); ++p) {
    int64_t row = ids[p] - offset;
    if (row < 0 || row >= vocab)
      continue;
    for (int64_t c = 0; c < width; ++c)
      expected[row * width + c] += dy[p * width + c];
  }
  EXPECT_EQ(table, expected);
}

//===----------------------------------------------------------------------===//
// GEMM epilogues the runtime runs when cuBLASLt has no fused algorithm
//===----------------------------------------------------------------------===//

double geluRef(double v) {
  return 0.5 * v *
         (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
double geluGradRef(double v, double g) {
  double t = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
  double du = 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
  return g * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du);
}

TEST(DeviceKernels, GemmEpiloguesInF32MatchFloat64) {
  // 3 rows x 200 columns: the GELU input, the product's gradient.
  int64_t rows = 3, cols = 200, n = rows * cols;
  std::vector<float> pre(n), g(n), act(n, NAN), d(n), db(cols, NAN);
  for (int64_t i = 0; i < n; ++i) {
    pre[i] = -4.f + 8.f * static_cast<float>(i) / static_cast<float>(n);
    g[i] = std::sin(0.37f * static_cast<float>(i));
  }
  d = g;
  EmulatedLaunch launch;
  launchGeluEpilogue<F32>(launch, pre.data(), act.data(), n);
  launchDgeluEpilogue<F32>(launch, pre.data(), d.data(), n);
  launchBiasGradEpilogue<F32>(launch, d.data(), rows, cols, db.data());
  std::vector<double> actRef(n), dRef(n), dbRef(cols, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    actRef[i] = geluRef(pre[i]);
    dRef[i] = geluGradRef(pre[i], g[i]);
    dbRef[i % cols] += d[i];
  }
  EXPECT_LT(relativeError(act, actRef), 1e-6);
  EXPECT_LT(relativeError(d, dRef), 1e-6);
  EXPECT_LT(relativeError(db, dbRef), 1e-6);
}

TEST(DeviceKernels, GemmEpiloguesInBf16RoundOnce) {
  // bf16 storage: each result is the float64 value of the widened inputs,
  // rounded once (so within half a bf16 ulp, 2^-9 relative).
  int64_t rows = 4, cols = 96, n = rows * cols;
  std::vector<uint16_t> pre(n), d(n), act(n), db(cols);
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) {
    pre[i] = emu::floatToBf16(-3.f + 6.f * static_cast<float>(i) /
                                         static_cast<float>(n));
    d[i] = emu::floatToBf16(std::cos(0.21f * static_cast<float>(i)));
    g[i] = emu::bf16ToFloat(d[i]);
  }
  EmulatedLaunch launch;
  launchGeluEpilogue<Bf16>(launch, pre.data(), act.data(), n);
  launchDgeluEpilogue<Bf16>(launch, pre.data(), d.data(), n);
  launchBiasGradEpilogue<Bf16>(launch, d.data(), rows, cols, db.data());
  std::vector<double> sums(cols, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double v = emu::bf16ToFloat(pre[i]);
    double a = geluRef(v), dg = geluGradRef(v, g[i]);
    EXPECT_NEAR(emu::bf16ToFloat(act[i]), a, std::abs(a) * 0x1p-8 + 1e-30) << i;
    EXPECT_NEAR(emu::bf16ToFloat(d[i]), dg, std::abs(dg) * 0x1p-8 + 1e-30) << i;
    sums[i % cols] += emu::bf16ToFloat(d[i]);
  }
  for (int64_t c = 0; c < cols; ++c)
    EXPECT_NEAR(emu::bf16ToFloat(db[c]), sums[c],
                std::abs(sums[c]) * 0x1p-8 + 1e-6)
        << c;
}

//===----------------------------------------------------------------------===//
// Training state: the pipeline's update on the device
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, SumOfSquaresAddsSpansInF64) {
  // Lengths that fill no block, one block, and more than kSumBlocks blocks
  // (the grid-stride loop), summed into one total.
  std::vector<int64_t> lengths = {1, 255, kSumThreads, 3 * kSumThreads + 7,
                                  int64_t(kSumBlocks) * kSumThreads * 2 + 5};
  std::vector<double> partials(kSumBlocks, NAN);
  double total = 0, expected = 0;
  EmulatedLaunch launch;
  for (int64_t n : lengths) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = std::sin(0.013f * static_cast<float>(i)) * 3.f;
    launchSumOfSquares(launch, x.data(), n, partials.data(), &total);
    for (float v : x)
      expected += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(total, expected, expected * 1e-12);
  launchSumOfSquares(launch, static_cast<const float *>(nullptr), 0,
                     partials.data(), &total);
  EXPECT_NEAR(total, expected, expected * 1e-12);
}

TEST(DeviceKernels, ScaleMultipliesInPlace) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i) - 500.f;
  std::vector<float> expected = x;
  for (float &v : expected)
    v *= 0.125f;
  EmulatedLaunch launch;
  launchScale(launch, x.data(), static_cast<int64_t>(x.size()), 0.125f);
  EXPECT_EQ(x, expected);
}

TEST(DeviceKernels, AdamWMatchesTheCpuUpdate) {
  // The GPU's AdamW on the pipeline's state against cpu::adamw<float>, the
  // CPU's, on the same inputs: a late step with weight decay and clipping.
  int64_t n = 777;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    float x = static_cast<float>(i);
    p[i] = std::sin(0.1f * x);
    g[i] = std::cos(0.07f * x) * 0.01f;
    m[i] = std::sin(0.03f * x) * 0.001f;
    v[i] = 1e-6f * (1.f + std::cos(0.05f * x));
  }
  double lr = 6e-4, scale = 0.5, beta1 = 0.9, beta2 = 0.95, eps = 1e-8,
         wd = 0.1;
  int64_t step = 41;
  std::vector<float> p2(n), m2(n), v2(n);
  cpu::adamw<float>(p.data(), g.data(), m.data(), v.data(), n, lr, step, scale,
                    beta1, beta2, eps, wd, p2.data(), m2.data(), v2.data());
  EmulatedLaunch launch;
  launchAdamW(launch, p.data(), g.data(), m.data(), v.data(), n,
              adamWConstants(lr, step, scale, beta1, beta2, eps, wd));
  for (int64_t i = 0; i < n; ++i) {
    // FMA contraction may differ between the two compilations.
    EXPECT_NEAR(p[i], p2[i], 1e-6f * (1.f + std::abs(p2[i]))) << i;
    EXPECT_NEAR(m[i], m2[i], 1e-6f * std::abs(m2[i]) + 1e-12f) << i;
    EXPECT_NEAR(v[i], v2[i], 1e-6f * std::abs(v2[i]) + 1e-15f) << i;
  }
  // The update moved every parameter.
  int moved = 0;
  for (int64_t i = 0; i < n; ++i)
    moved += p[i] != std::sin(0.1f * static_cast<float>(i));
  EXPECT_EQ(moved, n);
}

} // namespace
