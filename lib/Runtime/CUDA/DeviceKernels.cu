//===- DeviceKernels.cu - The CUDA runtime's hand-written kernels -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Attention is a tiled online softmax (the flash-attention recurrence) with
// one thread per query row (forward) or key row (backward): keys, values
// (or queries and output gradients) pass through shared memory a tile at
// a time, read by every thread of the block at the same address
// (broadcast), and the T x T scores never exist. The backward recomputes
// the softmax: a first kernel per query row finds each row's log-sum-exp
// and delta = dout . out and accumulates dq; a second per key row
// accumulates dk and dv. Plain fp32 FMAs; no tensor cores (a cuDNN or
// tensor-core flash kernel is the faster successor, see
// docs/Limitations.md).
//
//===----------------------------------------------------------------------===//

#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace gptc::cuda {
namespace {

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
__device__ void attendCausal(const float *k, const float *v, size_t base,
                             int T, int C, int r0, int row, const float *qr,
                             float *acc, float &mx, float &l,
                             float (*ks)[D], float (*vs)[D]) {
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
__global__ void attentionForwardKernel(const float *__restrict__ q,
                                       const float *__restrict__ k,
                                       const float *__restrict__ v,
                                       float *__restrict__ out, int T, int C,
                                       int H, float scale) {
  constexpr int B = tileRows<D>();
  __shared__ float ks[B][D], vs[B][D];
  int b = blockIdx.y / H, h = blockIdx.y % H;
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
__global__ void attentionBackwardQueryKernel(
    const float *__restrict__ q, const float *__restrict__ k,
    const float *__restrict__ v, const float *__restrict__ dout,
    float *__restrict__ dq, float *__restrict__ stats, int T, int C, int H,
    float scale) {
  constexpr int B = tileRows<D>();
  __shared__ float ks[B][D], vs[B][D];
  int b = blockIdx.y / H, h = blockIdx.y % H;
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
    size_t s = (static_cast<size_t>(blockIdx.y) * T + row) * 2;
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
  int b = blockIdx.y / H, h = blockIdx.y % H;
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
      size_t s = (static_cast<size_t>(blockIdx.y) * T + row) * 2;
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

__global__ void embeddingGradKernel(const int32_t *__restrict__ ids,
                                    int64_t n, const float *__restrict__ dy,
                                    int64_t vocab, int64_t width,
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

template <typename T>
__global__ void addKernel(T *__restrict__ y, const T *__restrict__ x,
                          int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = static_cast<T>(static_cast<float>(y[i]) + static_cast<float>(x[i]));
}

template <>
__global__ void addKernel<double>(double *__restrict__ y,
                                  const double *__restrict__ x, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] += x[i];
}

unsigned blocksFor(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

} // namespace

bool attentionSupportsHeadDim(int64_t headDim) {
  return withHeadDim(headDim, [](auto) {});
}

int64_t attentionScratchFloats(int64_t batch, int64_t T, int64_t heads) {
  return batch * heads * T * 2;
}

cudaError_t attentionForward(const float *q, const float *k, const float *v,
                             float *out, int64_t batch, int64_t T, int64_t C,
                             int64_t heads, cudaStream_t stream) {
  int64_t d = C / heads;
  float scale = 1.f / std::sqrt(static_cast<float>(d));
  bool ok = withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    constexpr int B = tileRows<D>();
    dim3 grid(static_cast<unsigned>((T + B - 1) / B),
              static_cast<unsigned>(batch * heads));
    attentionForwardKernel<D><<<grid, B, 0, stream>>>(
        q, k, v, out, static_cast<int>(T), static_cast<int>(C),
        static_cast<int>(heads), scale);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t attentionBackward(const float *q, const float *k, const float *v,
                              const float *dout, float *dq, float *dk,
                              float *dv, float *stats, int64_t batch,
                              int64_t T, int64_t C, int64_t heads,
                              cudaStream_t stream) {
  int64_t d = C / heads;
  float scale = 1.f / std::sqrt(static_cast<float>(d));
  cudaError_t status = cudaSuccess;
  bool ok = withHeadDim(d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    constexpr int B = tileRows<D>();
    dim3 grid(static_cast<unsigned>((T + B - 1) / B),
              static_cast<unsigned>(batch * heads));
    int t = static_cast<int>(T), c = static_cast<int>(C),
        h = static_cast<int>(heads);
    attentionBackwardQueryKernel<D>
        <<<grid, B, 0, stream>>>(q, k, v, dout, dq, stats, t, c, h, scale);
    status = cudaGetLastError();
    if (status != cudaSuccess)
      return;
    attentionBackwardKeyKernel<D>
        <<<grid, B, 0, stream>>>(q, k, v, dout, stats, dk, dv, t, c, h, scale);
    status = cudaGetLastError();
  });
  return ok ? status : cudaErrorInvalidValue;
}

cudaError_t embeddingGrad(const int32_t *ids, int64_t n, const float *dy,
                          int64_t vocab, int64_t width, const int32_t *offset,
                          float *dtable, cudaStream_t stream) {
  cudaError_t status = cudaMemsetAsync(
      dtable, 0, static_cast<size_t>(vocab * width) * sizeof(float), stream);
  if (status != cudaSuccess || n * width == 0)
    return status;
  embeddingGradKernel<<<blocksFor(n * width, 256), 256, 0, stream>>>(
      ids, n, dy, vocab, width, offset, dtable);
  return cudaGetLastError();
}

cudaError_t addInPlace(int dtype, void *y, const void *x, int64_t n,
                       cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  unsigned blocks = blocksFor(n, 256);
  switch (dtype) {
  case 1:
    addKernel<float><<<blocks, 256, 0, stream>>>(
        static_cast<float *>(y), static_cast<const float *>(x), n);
    break;
  case 2:
    addKernel<double><<<blocks, 256, 0, stream>>>(
        static_cast<double *>(y), static_cast<const double *>(x), n);
    break;
  case 5:
    addKernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(
        static_cast<__nv_bfloat16 *>(y),
        static_cast<const __nv_bfloat16 *>(x), n);
    break;
  case 6:
    addKernel<__half><<<blocks, 256, 0, stream>>>(
        static_cast<__half *>(y), static_cast<const __half *>(x), n);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

} // namespace gptc::cuda
