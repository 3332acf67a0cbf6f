//===- DeviceKernels.cuh - Hand-written CUDA kernels -----------*- CUDA -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The device code of DeviceKernels.cu, and how each kernel is launched,
// in a header so that the suite also compiles it as host C++ and runs it
// on the CPU (GPTC_CUDA_EMULATION, unittests/CudaEmulation.h): nothing
// here may use CUDA's headers outside the #if blocks that choose between
// the device's instructions and the emulation's.
//
// Attention comes in two families.
//
// fp32 operands: a tiled online softmax (the flash-attention recurrence)
// with one thread per query row (forward) or key row (backward): keys,
// values (or queries and output gradients) pass through shared memory a
// tile at a time, read by every thread of the block at the same address
// (broadcast), and the T x T scores never exist. The backward recomputes
// the softmax: a first kernel per query row finds each row's log-sum-exp
// and delta = dout . out and accumulates dq; a second per key row
// accumulates dk and dv. Plain fp32 FMAs.
//
// bf16 and fp16 operands (mixed precision): the same recurrence on tensor
// cores, flash-attention-2's division of work: a block of 4 warps takes 64
// query rows (forward, dq) or 64 key rows (dk, dv), 16 per warp, and every
// product is mma.sync m16n8k16 with fp32 accumulators. A warp's scores
// stay in its registers; their accumulator layout is the A operand's
// layout of the next product, so the probabilities (rounded to 16 bits)
// feed P V without leaving the registers. The softmax runs in base 2 on
// scores scaled by log2(e) / sqrt(D). The backward is deterministic (no
// atomics): one kernel per query block recomputes the forward for each
// row's log-sum-exp and delta = dout . out, then accumulates dq; one per
// key block accumulates dk and dv over the queries at or after its keys.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_CUH
#define GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_CUH

#if !defined(GPTC_CUDA_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(GPTC_CUDA_EMULATION)
#define GPTC_ALIGN(n) alignas(n)
#else
#define GPTC_ALIGN(n) __align__(n)
#endif

namespace gptc::cuda::device {

//===----------------------------------------------------------------------===//
// fp32 attention
//===----------------------------------------------------------------------===//

/// Rows per tile: 64 for heads up to 64 wide, 32 above (shared memory).
template <int D>
__host__ __device__ constexpr int tileRows() {
  return D <= 64 ? 64 : 32;
}

/// Rows [first, first + B) of a head's columns of `x` (times `xScale`) and
/// `y` (zeros past T) into shared tiles, by the block's B threads.
template <int D, int B>
__device__ void loadTiles(float (*xs)[D], float (*ys)[D], const float *x,
                          const float *y, size_t base, int first, int T, int C,
                          float xScale = 1.f) {
  for (int i = threadIdx.x; i < B * D; i += B) {
    int r = i / D, c = i % D, row = first + r;
    size_t at = base + static_cast<size_t>(row) * C + c;
    xs[r][c] = row < T ? x[at] * xScale : 0.f;
    ys[r][c] = row < T ? y[at] : 0.f;
  }
}

/// The online softmax of query row `row` (scaled `qr`) over the keys
/// [0, row]: `acc` gets the unnormalized output, `mx` the row's maximum
/// score, `l` its sum of exponentials. Every thread of the block calls it
/// (it synchronizes); rows past T compute nothing.
template <int D>
__device__ void attendCausal(const float *k, const float *v, size_t base, int T,
                             int C, int r0, int row, const float *qr,
                             float *acc, float &mx, float &l, float (*ks)[D],
                             float (*vs)[D]) {
  constexpr int B = tileRows<D>();
  int keys = min(T, r0 + B);
  for (int k0 = 0; k0 < keys; k0 += B) {
    loadTiles<D, B>(ks, vs, k, v, base, k0, T, C);
    __syncthreads();
    if (row < T) {
      int end = min(B, row - k0 + 1);
      for (int j = 0; j < end; ++j) {
        float s = 0.f;
#pragma unroll
        for (int c = 0; c < D; ++c)
          s = fmaf(qr[c], ks[j][c], s);
        float m2 = fmaxf(mx, s);
        float corr = expf(mx - m2), p = expf(s - m2);
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < D; ++c)
          acc[c] = fmaf(p, vs[j][c], acc[c] * corr);
        mx = m2;
      }
    }
    __syncthreads();
  }
}

template <int D>
__global__ void
attentionForwardKernel(const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, float *__restrict__ out,
                       int T, int C, int H, float scale) {
  constexpr int B = tileRows<D>();
  __shared__ float ks[B][D], vs[B][D];
  int b = blockIdx.z, h = blockIdx.y;
  int r0 = blockIdx.x * B, row = r0 + threadIdx.x;
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  float qr[D], acc[D];
  float mx = -INFINITY, l = 0.f;
  if (row < T) {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      qr[c] = q[base + static_cast<size_t>(row) * C + c] * scale;
      acc[c] = 0.f;
    }
  }
  attendCausal<D>(k, v, base, T, C, r0, row, qr, acc, mx, l, ks, vs);
  if (row < T) {
    float inv = 1.f / l;
#pragma unroll
    for (int c = 0; c < D; ++c)
      out[base + static_cast<size_t>(row) * C + c] = acc[c] * inv;
  }
}

/// Per query row: the row's log-sum-exp and delta = dout . out into
/// `stats` (two floats per row), and dq.
template <int D>
__global__ void attentionBackwardQueryKernel(const float *__restrict__ q,
                                             const float *__restrict__ k,
                                             const float *__restrict__ v,
                                             const float *__restrict__ dout,
                                             float *__restrict__ dq,
                                             float *__restrict__ stats, int T,
                                             int C, int H, float scale) {
  constexpr int B = tileRows<D>();
  __shared__ float ks[B][D], vs[B][D];
  int b = blockIdx.z, h = blockIdx.y;
  int r0 = blockIdx.x * B, row = r0 + threadIdx.x;
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  float qr[D], go[D], acc[D];
  float mx = -INFINITY, l = 0.f, lse = 0.f, delta = 0.f;
  if (row < T) {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      size_t at = base + static_cast<size_t>(row) * C + c;
      qr[c] = q[at] * scale;
      go[c] = dout[at];
      acc[c] = 0.f;
    }
  }
  // Pass 1: the softmax's statistics and the output row.
  attendCausal<D>(k, v, base, T, C, r0, row, qr, acc, mx, l, ks, vs);
  int keys = min(T, r0 + B);
  if (row < T) {
    float inv = 1.f / l;
#pragma unroll
    for (int c = 0; c < D; ++c) {
      delta = fmaf(go[c], acc[c] * inv, delta);
      acc[c] = 0.f; // now dq's accumulator
    }
    lse = mx + logf(l);
    size_t s = ((static_cast<size_t>(b) * H + h) * T + row) * 2;
    stats[s] = lse;
    stats[s + 1] = delta;
  }
  // Pass 2: dS = P (dP - delta), dq = sum_j dS k_j / sqrt(D).
  for (int k0 = 0; k0 < keys; k0 += B) {
    loadTiles<D, B>(ks, vs, k, v, base, k0, T, C);
    __syncthreads();
    if (row < T) {
      int end = min(B, row - k0 + 1);
      for (int j = 0; j < end; ++j) {
        float s = 0.f, dp = 0.f;
#pragma unroll
        for (int c = 0; c < D; ++c) {
          s = fmaf(qr[c], ks[j][c], s);
          dp = fmaf(go[c], vs[j][c], dp);
        }
        float ds = expf(s - lse) * (dp - delta);
#pragma unroll
        for (int c = 0; c < D; ++c)
          acc[c] = fmaf(ds, ks[j][c], acc[c]);
      }
    }
    __syncthreads();
  }
  if (row < T) {
#pragma unroll
    for (int c = 0; c < D; ++c)
      dq[base + static_cast<size_t>(row) * C + c] = acc[c] * scale;
  }
}

/// Per key row: dv = sum_i P_ij dout_i and dk = sum_i dS_ij q_i / sqrt(D)
/// over the queries i >= j, with the statistics of the query kernel.
template <int D>
__global__ void attentionBackwardKeyKernel(
    const float *__restrict__ q, const float *__restrict__ k,
    const float *__restrict__ v, const float *__restrict__ dout,
    const float *__restrict__ stats, float *__restrict__ dk,
    float *__restrict__ dv, int T, int C, int H, float scale) {
  constexpr int B = tileRows<D>();
  __shared__ float qs[B][D], gs[B][D], st[B][2];
  int b = blockIdx.z, h = blockIdx.y;
  int k0 = blockIdx.x * B, key = k0 + threadIdx.x;
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  float kr[D], vr[D], dka[D], dva[D];
  if (key < T) {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      size_t at = base + static_cast<size_t>(key) * C + c;
      kr[c] = k[at];
      vr[c] = v[at];
      dka[c] = 0.f;
      dva[c] = 0.f;
    }
  }
  for (int q0 = k0; q0 < T; q0 += B) {
    loadTiles<D, B>(qs, gs, q, dout, base, q0, T, C, scale);
    {
      int row = q0 + threadIdx.x;
      size_t s = ((static_cast<size_t>(b) * H + h) * T + row) * 2;
      st[threadIdx.x][0] = row < T ? stats[s] : 0.f;
      st[threadIdx.x][1] = row < T ? stats[s + 1] : 0.f;
    }
    __syncthreads();
    if (key < T) {
      int begin = max(0, key - q0), end = min(B, T - q0);
      for (int i = begin; i < end; ++i) {
        float s = 0.f, dp = 0.f;
#pragma unroll
        for (int c = 0; c < D; ++c) {
          s = fmaf(qs[i][c], kr[c], s);
          dp = fmaf(gs[i][c], vr[c], dp);
        }
        float p = expf(s - st[i][0]);
        float ds = p * (dp - st[i][1]);
#pragma unroll
        for (int c = 0; c < D; ++c) {
          dva[c] = fmaf(p, gs[i][c], dva[c]);
          dka[c] = fmaf(ds, qs[i][c], dka[c]);
        }
      }
    }
    __syncthreads();
  }
  if (key < T) {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      size_t at = base + static_cast<size_t>(key) * C + c;
      dk[at] = dka[c];
      dv[at] = dva[c];
    }
  }
}

//===----------------------------------------------------------------------===//
// 16-bit elements and the tensor-core product
//===----------------------------------------------------------------------===//

/// One 32-bit word of shared or global memory holding two 16-bit elements
/// (the lower-indexed one in the low half), at a 4-byte aligned address.
__device__ __forceinline__ uint32_t load32(const uint16_t *p) {
#if defined(GPTC_CUDA_EMULATION)
  uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
#else
  return *reinterpret_cast<const uint32_t *>(p);
#endif
}
__device__ __forceinline__ void store32(uint16_t *p, uint32_t w) {
#if defined(GPTC_CUDA_EMULATION)
  std::memcpy(p, &w, sizeof(w));
#else
  *reinterpret_cast<uint32_t *>(p) = w;
#endif
}

/// 2^x. On the device the approximate instruction (2 ulp; -inf gives 0),
/// which flash attention uses for its probabilities.
__device__ __forceinline__ float exp2Approx(float x) {
#if defined(GPTC_CUDA_EMULATION)
  return exp2f(x);
#elif defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return x;
#endif
}

/// d += a b on the tensor cores, m16n8k16 with fp32 accumulators, for
/// 16-bit operands of PTX type TYPE ("bf16" or "f16").
#define GPTC_MMA_M16N8K16(TYPE, d, a, b)                                       \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE          \
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "           \
               "{%0, %1, %2, %3};"                                             \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),        \
                 "r"(b[1]))

/// A 16-bit element type of the tensor-core kernels (bf16 or IEEE half):
/// conversions, and d += a b with fragments as PTX lays them out.
template <bool IsBf16>
struct Sixteen {
  static __device__ __forceinline__ float toFloat(uint16_t h) {
#if defined(GPTC_CUDA_EMULATION)
    return IsBf16 ? emu::bf16ToFloat(h) : emu::halfToFloat(h);
#elif defined(__CUDA_ARCH__)
    if constexpr (IsBf16)
      return __bfloat162float(__ushort_as_bfloat16(h));
    else
      return __half2float(__ushort_as_half(h));
#else
    return static_cast<float>(h);
#endif
  }
  /// One float rounded to nearest even.
  static __device__ __forceinline__ uint16_t round(float f) {
#if defined(GPTC_CUDA_EMULATION)
    return IsBf16 ? emu::floatToBf16(f) : emu::floatToHalf(f);
#elif defined(__CUDA_ARCH__)
    if constexpr (IsBf16)
      return __bfloat16_as_ushort(__float2bfloat16_rn(f));
    else
      return __half_as_ushort(__float2half_rn(f));
#else
    return static_cast<uint16_t>(f);
#endif
  }
  /// Two floats rounded to nearest even into one word, `lo` in the low
  /// half.
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
#if defined(GPTC_CUDA_EMULATION)
    auto round = IsBf16 ? emu::floatToBf16 : emu::floatToHalf;
    return round(lo) | static_cast<uint32_t>(round(hi)) << 16;
#elif defined(__CUDA_ARCH__)
    uint32_t w;
    if constexpr (IsBf16) {
      __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      w = *reinterpret_cast<uint32_t *>(&v);
    } else {
      __half2 v = __floats2half2_rn(lo, hi);
      w = *reinterpret_cast<uint32_t *>(&v);
    }
    return w;
#else
    return static_cast<uint32_t>(lo + hi);
#endif
  }
  static __device__ __forceinline__ void
  mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(GPTC_CUDA_EMULATION)
    emu::mmaM16N8K16(d, a, b, IsBf16 ? emu::bf16ToFloat : emu::halfToFloat);
#elif defined(__CUDA_ARCH__)
    if constexpr (IsBf16)
      GPTC_MMA_M16N8K16("bf16", d, a, b);
    else
      GPTC_MMA_M16N8K16("f16", d, a, b);
#endif
  }
};
using Bf16 = Sixteen<true>;
using Half = Sixteen<false>;

//===----------------------------------------------------------------------===//
// GEMM epilogues when cuBLASLt has no algorithm for one
//===----------------------------------------------------------------------===//
//
// gptc.fused_gemm's epilogue after a plain cuBLASLt product: the GELU of
// the stored product, its gradient in place, and the bias gradient, in
// f32 on elements of type E (F32, or Bf16/Half on uint16_t storage), with
// the CPU runtime's arithmetic (the GELU of the rounded product).

/// fp32 elements, with the interface of Sixteen.
struct F32 {
  using Storage = float;
  static __device__ __forceinline__ float toFloat(float f) { return f; }
  static __device__ __forceinline__ float round(float f) { return f; }
};
template <typename E>
using ElementStorage =
    std::conditional_t<std::is_same_v<E, F32>, float, uint16_t>;

__device__ __forceinline__ float geluTanhArgument(float v) {
  return 0.7978845608028654f * (v + 0.044715f * v * v * v);
}

/// act = gelu(pre), elementwise.
template <typename E>
__global__ void geluEpilogueKernel(const ElementStorage<E> *__restrict__ pre,
                                   ElementStorage<E> *__restrict__ act,
                                   int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  float v = E::toFloat(pre[i]);
  act[i] = E::round(0.5f * v * (1.f + tanhf(geluTanhArgument(v))));
}

/// d = gelu_grad(pre, d): the product in `d` becomes the gradient.
template <typename E>
__global__ void dgeluEpilogueKernel(const ElementStorage<E> *__restrict__ pre,
                                    ElementStorage<E> *__restrict__ d,
                                    int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  float v = E::toFloat(pre[i]), g = E::toFloat(d[i]);
  float t = tanhf(geluTanhArgument(v));
  float du = 0.7978845608028654f * (1.f + 3.f * 0.044715f * v * v);
  d[i] = E::round(g * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du));
}

/// db[c] = sum over the rows of x[r, c]: a thread per column, the rows in
/// order (deterministic; neighbouring threads read neighbouring columns).
template <typename E>
__global__ void biasGradEpilogueKernel(const ElementStorage<E> *__restrict__ x,
                                       int64_t rows, int64_t cols,
                                       ElementStorage<E> *__restrict__ db) {
  int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols)
    return;
  float sum = 0.f;
  for (int64_t r = 0; r < rows; ++r)
    sum += E::toFloat(x[r * cols + c]);
  db[c] = E::round(sum);
}

//===----------------------------------------------------------------------===//
// Attention on tensor cores (bf16 and fp16 operands)
//===----------------------------------------------------------------------===//

/// Padding of a shared tile's rows (16 bytes): the fragment loads of a
/// warp's 8 row groups then fall in distinct banks.
constexpr int kTilePad = 8;
/// Threads of a tensor-core attention block: 4 warps of 16 rows each.
constexpr int kTcThreads = 128;
/// Rows a block owns: query rows (forward, dq) or key rows (dk, dv).
constexpr int kTcBlockRows = 64;
/// Rows of the tiles a block streams through shared memory (keys, or
/// queries): 64, or 32 for heads 128 wide (registers, shared memory).
template <int D>
__host__ __device__ constexpr int tcStreamRows() {
  return D <= 64 ? 64 : 32;
}

/// The width of the products' k-steps over a head: D, or 16 for heads 8
/// wide (their tiles carry 8 columns of zeros).
template <int D>
__host__ __device__ constexpr int tcWidth() {
  return D < 16 ? 16 : D;
}

template <int D>
using TcTile = uint16_t[tcWidth<D>() + kTilePad];

/// Rows [first, first + R) of a head's D columns of `x` into `tile`
/// (zeros past T and past D), by the block's threads, a 32-bit word at a
/// time.
template <int D, int R>
__device__ __forceinline__ void loadTcTile(TcTile<D> *tile, const uint16_t *x,
                                           size_t base, int first, int T,
                                           int C) {
  constexpr int words = tcWidth<D>() / 2;
  for (int i = threadIdx.x; i < R * words; i += kTcThreads) {
    int r = i / words, c = i % words * 2, row = first + r;
    uint32_t w = 0;
    if (row < T && c < D)
      w = load32(x + base + static_cast<size_t>(row) * C + c);
    store32(&tile[r][c], w);
  }
}

/// The A fragment of rows [m0, m0 + 16) and columns [k0, k0 + 16) of a
/// row-major tile.
template <int D>
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const TcTile<D> *x,
                                      int m0, int k0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  a[0] = load32(&x[m0 + g][k0 + 2 * t]);
  a[1] = load32(&x[m0 + g + 8][k0 + 2 * t]);
  a[2] = load32(&x[m0 + g][k0 + 2 * t + 8]);
  a[3] = load32(&x[m0 + g + 8][k0 + 2 * t + 8]);
}

/// The B fragment (16 x 8) with B[k][n] = y[n0 + n][k0 + k]: rows of `y`
/// are B's columns.
template <int D>
__device__ __forceinline__ void loadBRows(uint32_t (&b)[2], const TcTile<D> *y,
                                          int k0, int n0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  b[0] = load32(&y[n0 + g][k0 + 2 * t]);
  b[1] = load32(&y[n0 + g][k0 + 2 * t + 8]);
}

/// The B fragment with B[k][n] = y[k0 + k][n0 + n]: each register pairs
/// two rows of one column of `y`.
template <int D>
__device__ __forceinline__ void
loadBColumns(uint32_t (&b)[2], const TcTile<D> *y, int k0, int n0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  int r = k0 + 2 * t, c = n0 + g;
  b[0] = y[r][c] | static_cast<uint32_t>(y[r + 1][c]) << 16;
  b[1] = y[r + 8][c] | static_cast<uint32_t>(y[r + 9][c]) << 16;
}

/// s = a y^T for a warp's 16 rows: `a` the A fragments of 16 x D, `y` N
/// rows of D columns; s[nt] the accumulators of columns [8 nt, 8 nt + 8).
template <int D, int N, typename E>
__device__ __forceinline__ void
productRows(float (&s)[N / 8][4], const uint32_t (&a)[tcWidth<D>() / 16][4],
            const TcTile<D> *y) {
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < tcWidth<D>() / 16; ++kk) {
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt) {
      uint32_t b[2];
      loadBRows<D>(b, y, kk * 16, nt * 8);
      E::mma(s[nt], a[kk], b);
    }
  }
}

/// acc += p y for a warp's 16 rows: `p` the accumulators of 16 x N (here
/// rounded into A fragments, as their layouts coincide), `y` N rows of D.
template <int D, int N, typename E>
__device__ __forceinline__ void accumulateProduct(float (&acc)[D / 8][4],
                                                  const float (&p)[N / 8][4],
                                                  const TcTile<D> *y) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    uint32_t a[4] = {E::pack(p[2 * kk][0], p[2 * kk][1]),
                     E::pack(p[2 * kk][2], p[2 * kk][3]),
                     E::pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                     E::pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      uint32_t b[2];
      loadBColumns<D>(b, y, kk * 16, dn * 8);
      E::mma(acc[dn], a, b);
    }
  }
}

/// The sum (or maximum) of a row's value over the 4 lanes that hold it.
__device__ __forceinline__ float rowSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float rowMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// The forward recurrence for a warp's 16 query rows [row0, row0 + 16)
/// (the block's rows end at `rowsEnd`): over the key tiles up to the last
/// row's position, `o` gets the normalized output, `mx` each of the
/// thread's two rows' maximum scaled score and `l` its sum of
/// exponentials (base 2). Every thread of the block calls it.
template <int D, typename E>
__device__ __forceinline__ void
attendTc(const uint32_t (&qa)[tcWidth<D>() / 16][4], const uint16_t *k,
         const uint16_t *v, size_t base, int row0, int rowsEnd, int T, int C,
         float scaleLog2, TcTile<D> *ks, TcTile<D> *vs, float (&o)[D / 8][4],
         float (&mx)[2], float (&l)[2]) {
  constexpr int N = tcStreamRows<D>();
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  int rows[2] = {row0 + g, row0 + g + 8};
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
    o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.f;
  mx[0] = mx[1] = -INFINITY;
  l[0] = l[1] = 0.f;
  int keysEnd = min(T, rowsEnd);
  for (int k0 = 0; k0 < keysEnd; k0 += N) {
    __syncthreads(); // the previous tile's readers are done
    loadTcTile<D, N>(ks, k, base, k0, T, C);
    loadTcTile<D, N>(vs, v, base, k0, T, C);
    __syncthreads();
    float s[N / 8][4];
    productRows<D, N, E>(s, qa, ks);
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int key = k0 + nt * 8 + 2 * t + i % 2;
        float x =
            key <= rows[i / 2] && key < T ? s[nt][i] * scaleLog2 : -INFINITY;
        s[nt][i] = x;
        tileMax[i / 2] = fmaxf(tileMax[i / 2], x);
      }
    float ref[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = fmaxf(mx[r], rowMax(tileMax[r]));
      ref[r] = m == -INFINITY ? 0.f : m; // a row with no key yet
      corr[r] = exp2Approx(mx[r] - ref[r]);
      mx[r] = m;
      l[r] *= corr[r];
    }
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[nt][i] = exp2Approx(s[nt][i] - ref[i / 2]);
        l[i / 2] += s[nt][i];
      }
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        o[dn][i] *= corr[i / 2];
    accumulateProduct<D, N, E>(o, s, vs);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
    l[r] = rowSum(l[r]);
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      o[dn][i] /= l[i / 2];
}

/// A warp's 16 x D accumulators, times `scale`, as 16-bit rows of `y`
/// (rows at or past T are not written).
template <int D, typename E>
__device__ __forceinline__ void
storeRows(uint16_t *y, size_t base, int row0, int T, int C,
          const float (&acc)[D / 8][4], float scale) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int row = row0 + g + 8 * r;
    if (row >= T)
      continue;
    uint16_t *at = y + base + static_cast<size_t>(row) * C + 2 * t;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
      store32(at + dn * 8,
              E::pack(acc[dn][2 * r] * scale, acc[dn][2 * r + 1] * scale));
  }
}

/// A warp's A fragments of its 16 rows of a block's 64-row tile of `x`,
/// read through `staging`.
template <int D>
__device__ __forceinline__ void
loadRowsA(uint32_t (&a)[tcWidth<D>() / 16][4], const uint16_t *x, size_t base,
          int first, int T, int C, TcTile<D> *staging) {
  __syncthreads(); // the staging tile's readers are done
  loadTcTile<D, kTcBlockRows>(staging, x, base, first, T, C);
  __syncthreads();
  int m0 = threadIdx.x / 32 * 16;
#pragma unroll
  for (int kk = 0; kk < tcWidth<D>() / 16; ++kk)
    loadA<D>(a[kk], staging, m0, kk * 16);
}

template <int D, typename E>
__global__ void __launch_bounds__(kTcThreads)
    attentionForwardTcKernel(const uint16_t *__restrict__ q,
                             const uint16_t *__restrict__ k,
                             const uint16_t *__restrict__ v,
                             uint16_t *__restrict__ out, int T, int C, int H,
                             float scaleLog2) {
  constexpr int N = tcStreamRows<D>();
  GPTC_ALIGN(16) __shared__ TcTile<D> xs[kTcBlockRows];
  GPTC_ALIGN(16) __shared__ TcTile<D> ks[N];
  GPTC_ALIGN(16) __shared__ TcTile<D> vs[N];
  int b = blockIdx.z, h = blockIdx.y;
  int r0 = blockIdx.x * kTcBlockRows, row0 = r0 + threadIdx.x / 32 * 16;
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  uint32_t qa[tcWidth<D>() / 16][4];
  loadRowsA<D>(qa, q, base, r0, T, C, xs);
  float o[D / 8][4], mx[2], l[2];
  attendTc<D, E>(qa, k, v, base, row0, r0 + kTcBlockRows, T, C, scaleLog2, ks,
                 vs, o, mx, l);
  storeRows<D, E>(out, base, row0, T, C, o, 1.f);
}

/// Per query block: each row's log-sum-exp (base 2, of the scaled scores)
/// and delta = dout . out into `stats`, then dq.
template <int D, typename E>
__global__ void __launch_bounds__(kTcThreads)
    attentionBackwardQueryTcKernel(const uint16_t *__restrict__ q,
                                   const uint16_t *__restrict__ k,
                                   const uint16_t *__restrict__ v,
                                   const uint16_t *__restrict__ dout,
                                   uint16_t *__restrict__ dq,
                                   float *__restrict__ stats, int T, int C,
                                   int H, float scaleLog2, float scale) {
  constexpr int N = tcStreamRows<D>();
  GPTC_ALIGN(16) __shared__ TcTile<D> xs[kTcBlockRows];
  GPTC_ALIGN(16) __shared__ TcTile<D> ks[N];
  GPTC_ALIGN(16) __shared__ TcTile<D> vs[N];
  int b = blockIdx.z, h = blockIdx.y;
  int r0 = blockIdx.x * kTcBlockRows, row0 = r0 + threadIdx.x / 32 * 16;
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  int rows[2] = {row0 + g, row0 + g + 8};
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  uint32_t qa[tcWidth<D>() / 16][4], ga[tcWidth<D>() / 16][4];
  loadRowsA<D>(qa, q, base, r0, T, C, xs);
  loadRowsA<D>(ga, dout, base, r0, T, C, xs);

  // Pass 1: the forward's statistics and output; delta from the output.
  float acc[D / 8][4], mx[2], l[2];
  attendTc<D, E>(qa, k, v, base, row0, r0 + kTcBlockRows, T, C, scaleLog2, ks,
                 vs, acc, mx, l);
  float lse[2], delta[2] = {0.f, 0.f};
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
    // Columns [8 dn, 8 dn + 8) of dout are registers 2 (dn % 2) (row g)
    // and 2 (dn % 2) + 1 (row g + 8) of k-step dn / 2.
    const uint32_t *w = ga[dn / 2] + 2 * (dn % 2);
    delta[0] += acc[dn][0] * E::toFloat(static_cast<uint16_t>(w[0])) +
                acc[dn][1] * E::toFloat(static_cast<uint16_t>(w[0] >> 16));
    delta[1] += acc[dn][2] * E::toFloat(static_cast<uint16_t>(w[1])) +
                acc[dn][3] * E::toFloat(static_cast<uint16_t>(w[1] >> 16));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    delta[r] = rowSum(delta[r]);
    lse[r] = mx[r] + log2f(l[r]);
    if (t == 0 && rows[r] < T) {
      size_t s = ((static_cast<size_t>(b) * H + h) * T + rows[r]) * 2;
      stats[s] = lse[r];
      stats[s + 1] = delta[r];
    }
  }

  // Pass 2: dS = P (dP - delta) with dP = dout v^T; dq = dS k / sqrt(D).
  constexpr int N2 = N;
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
    acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.f;
  int keysEnd = min(T, r0 + kTcBlockRows);
  for (int k0 = 0; k0 < keysEnd; k0 += N2) {
    __syncthreads();
    loadTcTile<D, N2>(ks, k, base, k0, T, C);
    loadTcTile<D, N2>(vs, v, base, k0, T, C);
    __syncthreads();
    float s[N2 / 8][4], dp[N2 / 8][4];
    productRows<D, N2, E>(s, qa, ks);
    productRows<D, N2, E>(dp, ga, vs);
#pragma unroll
    for (int nt = 0; nt < N2 / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int key = k0 + nt * 8 + 2 * t + i % 2, r = i / 2;
        float p = key <= rows[r] && key < T
                      ? exp2Approx(s[nt][i] * scaleLog2 - lse[r])
                      : 0.f;
        s[nt][i] = p * (dp[nt][i] - delta[r]);
      }
    accumulateProduct<D, N2, E>(acc, s, ks);
  }
  storeRows<D, E>(dq, base, row0, T, C, acc, scale);
}

/// Per key block: dv = P^T dout and dk = dS^T q / sqrt(D) over the queries
/// at or after each key, with the query kernel's statistics.
template <int D, typename E>
__global__ void __launch_bounds__(kTcThreads)
    attentionBackwardKeyTcKernel(const uint16_t *__restrict__ q,
                                 const uint16_t *__restrict__ k,
                                 const uint16_t *__restrict__ v,
                                 const uint16_t *__restrict__ dout,
                                 const float *__restrict__ stats,
                                 uint16_t *__restrict__ dk,
                                 uint16_t *__restrict__ dv, int T, int C, int H,
                                 float scaleLog2, float scale) {
  constexpr int N = tcStreamRows<D>();
  GPTC_ALIGN(16) __shared__ TcTile<D> xs[kTcBlockRows];
  GPTC_ALIGN(16) __shared__ TcTile<D> qs[N];
  GPTC_ALIGN(16) __shared__ TcTile<D> gs[N];
  __shared__ float lse[N], delta[N];
  int b = blockIdx.z, h = blockIdx.y;
  int k0 = blockIdx.x * kTcBlockRows, key0 = k0 + threadIdx.x / 32 * 16;
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  int keys[2] = {key0 + g, key0 + g + 8};
  size_t base = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * D;
  uint32_t ka[tcWidth<D>() / 16][4], va[tcWidth<D>() / 16][4];
  loadRowsA<D>(ka, k, base, k0, T, C, xs);
  loadRowsA<D>(va, v, base, k0, T, C, xs);
  float dka[D / 8][4], dva[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      dka[dn][i] = dva[dn][i] = 0.f;
  for (int q0 = k0; q0 < T; q0 += N) {
    __syncthreads();
    loadTcTile<D, N>(qs, q, base, q0, T, C);
    loadTcTile<D, N>(gs, dout, base, q0, T, C);
    for (int i = threadIdx.x; i < N; i += kTcThreads) {
      int row = q0 + i;
      size_t s = ((static_cast<size_t>(b) * H + h) * T + row) * 2;
      lse[i] = row < T ? stats[s] : 0.f;
      delta[i] = row < T ? stats[s + 1] : 0.f;
    }
    __syncthreads();
    // Transposed scores: a warp's 16 keys against the tile's N queries.
    float p[N / 8][4], dp[N / 8][4];
    productRows<D, N, E>(p, ka, qs);
    productRows<D, N, E>(dp, va, gs);
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int j = nt * 8 + 2 * t + i % 2, query = q0 + j;
        p[nt][i] = query >= keys[i / 2] && query < T
                       ? exp2Approx(p[nt][i] * scaleLog2 - lse[j])
                       : 0.f;
        dp[nt][i] = p[nt][i] * (dp[nt][i] - delta[j]);
      }
    accumulateProduct<D, N, E>(dva, p, gs);
    accumulateProduct<D, N, E>(dka, dp, qs);
  }
  storeRows<D, E>(dk, base, key0, T, C, dka, scale);
  storeRows<D, E>(dv, base, key0, T, C, dva, 1.f);
}

//===----------------------------------------------------------------------===//
// The embedding's gradient
//===----------------------------------------------------------------------===//

__global__ void embeddingGradKernel(const int32_t *__restrict__ ids, int64_t n,
                                    const float *__restrict__ dy, int64_t vocab,
                                    int64_t width,
                                    const int32_t *__restrict__ offset,
                                    float *__restrict__ dtable) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * width)
    return;
  int64_t pos = i / width, c = i % width;
  int64_t id = ids[pos] - (offset ? *offset : 0);
  if (id < 0 || id >= vocab)
    return;
  atomicAdd(dtable + id * width + c, dy[i]);
}

//===----------------------------------------------------------------------===//
// Training state (the pipeline's update on the device)
//===----------------------------------------------------------------------===//

/// x *= f over n elements.
__global__ void scaleKernel(float *__restrict__ x, int64_t n, float f) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    x[i] *= f;
}

/// Threads per block, and at most this many blocks, of the sum of squares.
constexpr int kSumThreads = 256, kSumBlocks = 256;

/// The sum of `partial` (one per thread of the block) into partial[0].
__device__ inline void blockSum(double *partial) {
  __syncthreads();
  for (int stride = kSumThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
}

/// partials[b] = the sum of x[i]^2 (in f64) over block b's elements
/// (grid-stride): deterministic for a given grid.
__global__ void sumSquaresKernel(const float *__restrict__ x, int64_t n,
                                 double *__restrict__ partials) {
  __shared__ double partial[kSumThreads];
  double sum = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kSumThreads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * kSumThreads)
    sum += static_cast<double>(x[i]) * x[i];
  partial[threadIdx.x] = sum;
  blockSum(partial);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = partial[0];
}

/// *total += the sum of partials[0, count), by one block.
__global__ void addPartialsKernel(const double *__restrict__ partials,
                                  int count, double *__restrict__ total) {
  __shared__ double partial[kSumThreads];
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += kSumThreads)
    sum += partials[i];
  partial[threadIdx.x] = sum;
  blockSum(partial);
  if (threadIdx.x == 0)
    *total += partial[0];
}

/// AdamW's per-step constants, rounded to f32 as cpu::adamw<float>
/// rounds them.
struct AdamWConstants {
  float stepSize, bc2Sqrt, decay, beta1, beta2, scale, eps;
};
inline AdamWConstants adamWConstants(double lr, int64_t step, double scale,
                                     double beta1, double beta2, double eps,
                                     double weightDecay) {
  double t = static_cast<double>(step + 1);
  return {static_cast<float>(lr / (1.0 - std::pow(beta1, t))),
          static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t))),
          static_cast<float>(1.0 - lr * weightDecay),
          static_cast<float>(beta1),
          static_cast<float>(beta2),
          static_cast<float>(scale),
          static_cast<float>(eps)};
}

/// AdamW in place on n elements: cpu::adamw's arithmetic.
__global__ void adamWKernel(float *__restrict__ p, const float *__restrict__ g,
                            float *__restrict__ m, float *__restrict__ v,
                            int64_t n, AdamWConstants c) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  float grad = g[i] * c.scale;
  float mi = m[i] + (1.f - c.beta1) * (grad - m[i]);
  float vi = v[i] * c.beta2 + (1.f - c.beta2) * grad * grad;
  float denom = sqrtf(vi) / c.bc2Sqrt + c.eps;
  p[i] = p[i] * c.decay - c.stepSize * mi / denom;
  m[i] = mi;
  v[i] = vi;
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//
//
// Each takes `launch(grid, block, kernel, args...)`: <<<>>> on a stream in
// DeviceKernels.cu, the emulation in the unit tests. They return false for
// a head width the kernels do not take: 8 to 128, powers of two (the
// tensor-core kernels run heads 8 wide as k-steps of 16 with zeros).

template <typename F>
bool withHeadDim(int64_t d, F &&f) {
  switch (d) {
  case 8:
    f(std::integral_constant<int, 8>());
    return true;
  case 16:
    f(std::integral_constant<int, 16>());
    return true;
  case 32:
    f(std::integral_constant<int, 32>());
    return true;
  case 64:
    f(std::integral_constant<int, 64>());
    return true;
  case 128:
    f(std::integral_constant<int, 128>());
    return true;
  default:
    return false;
  }
}

inline float attentionScale(int64_t headDim) {
  return 1.f / std::sqrt(static_cast<float>(headDim));
}
constexpr float kLog2e = 1.4426950408889634f;

template <typename Launch>
bool launchAttentionForward(Launch &&launch, const float *q, const float *k,
                            const float *v, float *out, int64_t batch,
                            int64_t T, int64_t C, int64_t heads) {
  int64_t d = C / heads;
  float scale = attentionScale(d);
  return withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    constexpr int B = tileRows<D>();
    dim3 grid(static_cast<unsigned>((T + B - 1) / B),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
    launch(grid, dim3(B), attentionForwardKernel<D>, q, k, v, out,
           static_cast<int>(T), static_cast<int>(C), static_cast<int>(heads),
           scale);
  });
}

template <typename Launch>
bool launchAttentionBackward(Launch &&launch, const float *q, const float *k,
                             const float *v, const float *dout, float *dq,
                             float *dk, float *dv, float *stats, int64_t batch,
                             int64_t T, int64_t C, int64_t heads) {
  int64_t d = C / heads;
  float scale = attentionScale(d);
  return withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    constexpr int B = tileRows<D>();
    dim3 grid(static_cast<unsigned>((T + B - 1) / B),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
    int t = static_cast<int>(T), c = static_cast<int>(C),
        h = static_cast<int>(heads);
    launch(grid, dim3(B), attentionBackwardQueryKernel<D>, q, k, v, dout, dq,
           stats, t, c, h, scale);
    launch(grid, dim3(B), attentionBackwardKeyKernel<D>, q, k, v, dout,
           static_cast<const float *>(stats), dk, dv, t, c, h, scale);
  });
}

/// The tensor-core kernels for element type E (Bf16 or Half) on 16-bit
/// operands.
template <typename E, typename Launch>
bool launchAttentionForwardTc(Launch &&launch, const uint16_t *q,
                              const uint16_t *k, const uint16_t *v,
                              uint16_t *out, int64_t batch, int64_t T,
                              int64_t C, int64_t heads) {
  int64_t d = C / heads;
  float scaleLog2 = attentionScale(d) * kLog2e;
  return withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    dim3 grid(static_cast<unsigned>((T + kTcBlockRows - 1) / kTcBlockRows),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
    launch(grid, dim3(kTcThreads), attentionForwardTcKernel<D, E>, q, k, v, out,
           static_cast<int>(T), static_cast<int>(C), static_cast<int>(heads),
           scaleLog2);
  });
}

template <typename E, typename Launch>
bool launchAttentionBackwardTc(Launch &&launch, const uint16_t *q,
                               const uint16_t *k, const uint16_t *v,
                               const uint16_t *dout, uint16_t *dq, uint16_t *dk,
                               uint16_t *dv, float *stats, int64_t batch,
                               int64_t T, int64_t C, int64_t heads) {
  int64_t d = C / heads;
  float scale = attentionScale(d), scaleLog2 = scale * kLog2e;
  return withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    dim3 grid(static_cast<unsigned>((T + kTcBlockRows - 1) / kTcBlockRows),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
    int t = static_cast<int>(T), c = static_cast<int>(C),
        h = static_cast<int>(heads);
    launch(grid, dim3(kTcThreads), attentionBackwardQueryTcKernel<D, E>, q, k,
           v, dout, dq, stats, t, c, h, scaleLog2, scale);
    launch(grid, dim3(kTcThreads), attentionBackwardKeyTcKernel<D, E>, q, k, v,
           dout, static_cast<const float *>(stats), dk, dv, t, c, h, scaleLog2,
           scale);
  });
}

/// y += x elementwise over n elements of E (16-bit ones sum in f32).
template <typename E>
__global__ void addKernel(ElementStorage<E> *__restrict__ y,
                          const ElementStorage<E> *__restrict__ x, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = E::round(E::toFloat(y[i]) + E::toFloat(x[i]));
}
__global__ void addKernelF64(double *__restrict__ y,
                             const double *__restrict__ x, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] += x[i];
}

/// The epilogues above over `n` elements (`cols` columns for the bias
/// gradient).
template <typename E, typename Launch>
void launchGeluEpilogue(Launch &&launch, const ElementStorage<E> *pre,
                        ElementStorage<E> *act, int64_t n) {
  if (n > 0)
    launch(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256),
           geluEpilogueKernel<E>, pre, act, n);
}
template <typename E, typename Launch>
void launchDgeluEpilogue(Launch &&launch, const ElementStorage<E> *pre,
                         ElementStorage<E> *d, int64_t n) {
  if (n > 0)
    launch(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256),
           dgeluEpilogueKernel<E>, pre, d, n);
}
template <typename E, typename Launch>
void launchBiasGradEpilogue(Launch &&launch, const ElementStorage<E> *x,
                            int64_t rows, int64_t cols, ElementStorage<E> *db) {
  if (cols > 0)
    launch(dim3(static_cast<unsigned>((cols + 127) / 128)), dim3(128),
           biasGradEpilogueKernel<E>, x, rows, cols, db);
}

/// dtable[id - offset] += dy[i] over the n positions; dtable must be
/// zeroed first.
template <typename Launch>
void launchEmbeddingGrad(Launch &&launch, const int32_t *ids, int64_t n,
                         const float *dy, int64_t vocab, int64_t width,
                         const int32_t *offset, float *dtable) {
  int64_t total = n * width;
  if (total == 0)
    return;
  launch(dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256),
         embeddingGradKernel, ids, n, dy, vocab, width, offset, dtable);
}

/// x *= f over n elements.
template <typename Launch>
void launchScale(Launch &&launch, float *x, int64_t n, float f) {
  if (n > 0)
    launch(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), scaleKernel,
           x, n, f);
}

/// *total += the sum of x^2 over n elements, in f64; `partials` is scratch
/// of kSumBlocks doubles.
template <typename Launch>
void launchSumOfSquares(Launch &&launch, const float *x, int64_t n,
                        double *partials, double *total) {
  if (n == 0)
    return;
  int64_t blocks =
      std::min<int64_t>(kSumBlocks, (n + kSumThreads - 1) / kSumThreads);
  launch(dim3(static_cast<unsigned>(blocks)), dim3(kSumThreads),
         sumSquaresKernel, x, n, partials);
  launch(dim3(1), dim3(kSumThreads), addPartialsKernel,
         static_cast<const double *>(partials), static_cast<int>(blocks),
         total);
}

/// AdamW in place over n elements.
template <typename Launch>
void launchAdamW(Launch &&launch, float *p, const float *g, float *m, float *v,
                 int64_t n, const AdamWConstants &c) {
  if (n > 0)
    launch(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), adamWKernel,
           p, g, m, v, n, c);
}

} // namespace gptc::cuda::device

#endif // GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_CUH
