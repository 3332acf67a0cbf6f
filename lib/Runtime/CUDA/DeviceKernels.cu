//===- DeviceKernels.cu - The CUDA runtime's hand-written kernels -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The launchers of DeviceKernels.h. The kernels and their launch geometry
// are in DeviceKernels.cuh, which the unit tests also run on the CPU
// (unittests/DeviceKernelsTest.cpp); here each launch is <<<>>> on the
// caller's stream.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernels.h"

#include "DeviceKernels.cuh"

namespace gptc::cuda {
namespace {

using namespace device;

/// Launches on `stream` and keeps the first launch error.
struct StreamLaunch {
  cudaStream_t stream;
  cudaError_t status = cudaSuccess;
  template <typename... Params, typename... Args>
  void operator()(dim3 grid, dim3 block, void (*kernel)(Params...),
                  Args... args) {
    if (status != cudaSuccess)
      return;
    kernel<<<grid, block, 0, stream>>>(args...);
    status = cudaGetLastError();
  }
};

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

cudaError_t attentionForward(AttentionType type, const void *q, const void *k,
                             const void *v, void *out, int64_t batch,
                             int64_t T, int64_t C, int64_t heads,
                             cudaStream_t stream) {
  StreamLaunch launch{stream};
  auto h = [](const void *p) { return static_cast<const uint16_t *>(p); };
  bool ok;
  switch (type) {
  case AttentionType::F32:
    ok = launchAttentionForward(
        launch, static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<float *>(out), batch, T, C,
        heads);
    break;
  case AttentionType::BF16:
    ok = launchAttentionForwardTc<Bf16>(launch, h(q), h(k), h(v),
                                        static_cast<uint16_t *>(out), batch,
                                        T, C, heads);
    break;
  case AttentionType::F16:
    ok = launchAttentionForwardTc<Half>(launch, h(q), h(k), h(v),
                                        static_cast<uint16_t *>(out), batch,
                                        T, C, heads);
    break;
  default:
    ok = false;
  }
  return ok ? launch.status : cudaErrorInvalidValue;
}

cudaError_t attentionBackward(AttentionType type, const void *q,
                              const void *k, const void *v, const void *dout,
                              void *dq, void *dk, void *dv, float *stats,
                              int64_t batch, int64_t T, int64_t C,
                              int64_t heads, cudaStream_t stream) {
  StreamLaunch launch{stream};
  auto h = [](const void *p) { return static_cast<const uint16_t *>(p); };
  auto m = [](void *p) { return static_cast<uint16_t *>(p); };
  bool ok;
  switch (type) {
  case AttentionType::F32:
    ok = launchAttentionBackward(
        launch, static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<const float *>(dout),
        static_cast<float *>(dq), static_cast<float *>(dk),
        static_cast<float *>(dv), stats, batch, T, C, heads);
    break;
  case AttentionType::BF16:
    ok = launchAttentionBackwardTc<Bf16>(launch, h(q), h(k), h(v), h(dout),
                                         m(dq), m(dk), m(dv), stats, batch, T,
                                         C, heads);
    break;
  case AttentionType::F16:
    ok = launchAttentionBackwardTc<Half>(launch, h(q), h(k), h(v), h(dout),
                                         m(dq), m(dk), m(dv), stats, batch, T,
                                         C, heads);
    break;
  default:
    ok = false;
  }
  return ok ? launch.status : cudaErrorInvalidValue;
}

cudaError_t embeddingGrad(const int32_t *ids, int64_t n, const float *dy,
                          int64_t vocab, int64_t width, const int32_t *offset,
                          float *dtable, cudaStream_t stream) {
  cudaError_t status = cudaMemsetAsync(
      dtable, 0, static_cast<size_t>(vocab * width) * sizeof(float), stream);
  if (status != cudaSuccess)
    return status;
  StreamLaunch launch{stream};
  launchEmbeddingGrad(launch, ids, n, dy, vocab, width, offset, dtable);
  return launch.status;
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

namespace {
/// Calls `f` with the element traits of `dtype` (F32, Bf16 or Half);
/// false for another type.
template <typename F> bool withElement(int dtype, F &&f) {
  switch (dtype) {
  case 1:
    f(F32());
    return true;
  case 5:
    f(Bf16());
    return true;
  case 6:
    f(Half());
    return true;
  default:
    return false;
  }
}
} // namespace

cudaError_t geluEpilogue(int dtype, const void *pre, void *act, int64_t n,
                         cudaStream_t stream) {
  StreamLaunch launch{stream};
  bool ok = withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchGeluEpilogue<E>(launch,
                          static_cast<const ElementStorage<E> *>(pre),
                          static_cast<ElementStorage<E> *>(act), n);
  });
  return ok ? launch.status : cudaErrorInvalidValue;
}

cudaError_t dgeluEpilogue(int dtype, const void *pre, void *d, int64_t n,
                          cudaStream_t stream) {
  StreamLaunch launch{stream};
  bool ok = withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchDgeluEpilogue<E>(launch,
                           static_cast<const ElementStorage<E> *>(pre),
                           static_cast<ElementStorage<E> *>(d), n);
  });
  return ok ? launch.status : cudaErrorInvalidValue;
}

cudaError_t biasGradEpilogue(int dtype, const void *x, int64_t rows,
                             int64_t cols, void *db, cudaStream_t stream) {
  StreamLaunch launch{stream};
  bool ok = withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchBiasGradEpilogue<E>(launch,
                              static_cast<const ElementStorage<E> *>(x), rows,
                              cols, static_cast<ElementStorage<E> *>(db));
  });
  return ok ? launch.status : cudaErrorInvalidValue;
}

cudaError_t scaleInPlace(float *x, int64_t n, float f, cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchScale(launch, x, n, f);
  return launch.status;
}

int64_t sumOfSquaresScratch() { return kSumBlocks; }

cudaError_t sumOfSquares(const float *x, int64_t n, double *partials,
                         double *total, cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchSumOfSquares(launch, x, n, partials, total);
  return launch.status;
}

cudaError_t adamW(float *p, const float *g, float *m, float *v, int64_t n,
                  double lr, int64_t step, double scale, double beta1,
                  double beta2, double eps, double weightDecay,
                  cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchAdamW(launch, p, g, m, v, n,
              adamWConstants(lr, step, scale, beta1, beta2, eps, weightDecay));
  return launch.status;
}

} // namespace gptc::cuda
