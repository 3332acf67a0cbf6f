//===- DeviceKernels.cu - The CUDA runtime's hand-written kernels -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The GPU's DeviceKernelSet (CudaApi.h). The kernels and their launch
// geometry are in DeviceKernels.cuh, the launchers in DeviceLaunchers.h,
// which the virtual device and the unit tests also run on the CPU
// (lib/Runtime/VirtualCuda/EmulatedKernels.cpp,
// unittests/DeviceKernelsTest.cpp); here each launch is <<<>>> on the
// caller's stream.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernels.h"

#include "DeviceKernels.cuh"
#include "DeviceLaunchers.h"

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
  cudaError_t result(bool ok) const {
    return ok ? status : cudaErrorInvalidValue;
  }
};

cudaError_t gpuAttentionForward(AttentionType type, const void *q,
                                const void *k, const void *v, void *out,
                                int64_t batch, int64_t T, int64_t C,
                                int64_t heads, cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(attentionForwardWith(launch, static_cast<int>(type), q,
                                            k, v, out, batch, T, C, heads));
}

cudaError_t gpuAttentionBackward(AttentionType type, const void *q,
                                 const void *k, const void *v, const void *dout,
                                 void *dq, void *dk, void *dv, float *stats,
                                 int64_t batch, int64_t T, int64_t C,
                                 int64_t heads, cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(attentionBackwardWith(launch, static_cast<int>(type), q,
                                             k, v, dout, dq, dk, dv, stats,
                                             batch, T, C, heads));
}

cudaError_t gpuEmbeddingGrad(const int32_t *ids, int64_t n, const float *dy,
                             int64_t vocab, int64_t width,
                             const int32_t *offset, float *dtable,
                             cudaStream_t stream) {
  cudaError_t status = cudaMemsetAsync(
      dtable, 0, static_cast<size_t>(vocab * width) * sizeof(float), stream);
  if (status != cudaSuccess)
    return status;
  StreamLaunch launch{stream};
  launchEmbeddingGrad(launch, ids, n, dy, vocab, width, offset, dtable);
  return launch.status;
}

cudaError_t gpuAddInPlace(int dtype, void *y, const void *x, int64_t n,
                          cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(addInPlaceWith(launch, dtype, y, x, n));
}

cudaError_t gpuGeluEpilogue(int dtype, const void *pre, void *act, int64_t n,
                            cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(geluEpilogueWith(launch, dtype, pre, act, n));
}

cudaError_t gpuDgeluEpilogue(int dtype, const void *pre, void *d, int64_t n,
                             cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(dgeluEpilogueWith(launch, dtype, pre, d, n));
}

cudaError_t gpuBiasGradEpilogue(int dtype, const void *x, int64_t rows,
                                int64_t cols, void *db, cudaStream_t stream) {
  StreamLaunch launch{stream};
  return launch.result(biasGradEpilogueWith(launch, dtype, x, rows, cols, db));
}

cudaError_t gpuScaleInPlace(float *x, int64_t n, float f, cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchScale(launch, x, n, f);
  return launch.status;
}

cudaError_t gpuSumOfSquares(const float *x, int64_t n, double *partials,
                            double *total, cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchSumOfSquares(launch, x, n, partials, total);
  return launch.status;
}

cudaError_t gpuAdamW(float *p, const float *g, float *m, float *v, int64_t n,
                     double lr, int64_t step, double scale, double beta1,
                     double beta2, double eps, double weightDecay,
                     cudaStream_t stream) {
  StreamLaunch launch{stream};
  launchAdamW(launch, p, g, m, v, n,
              adamWConstants(lr, step, scale, beta1, beta2, eps, weightDecay));
  return launch.status;
}

} // namespace

bool attentionSupportsHeadDim(int64_t headDim) {
  return withHeadDim(headDim, [](auto) {});
}

int64_t attentionScratchFloats(int64_t batch, int64_t T, int64_t heads) {
  return batch * heads * T * 2;
}

int64_t sumOfSquaresScratch() { return kSumBlocks; }

const DeviceKernelSet &gpuDeviceKernels() {
  static const DeviceKernelSet set = {gpuAttentionForward, gpuAttentionBackward,
                                      gpuEmbeddingGrad,    gpuAddInPlace,
                                      gpuGeluEpilogue,     gpuDgeluEpilogue,
                                      gpuBiasGradEpilogue, gpuScaleInPlace,
                                      gpuSumOfSquares,     gpuAdamW};
  return set;
}

} // namespace gptc::cuda
