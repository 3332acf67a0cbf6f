//===- DeviceKernels.h - Hand-written CUDA kernels --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the CUDA runtime runs besides the generated kernels and cuBLASLt:
// causal attention (forward and backward, a tiled online softmax that never
// forms the T x T scores: fp32 on the CUDA cores, bf16 and fp16 on the
// tensor cores), the embedding's scatter-add gradient, the sum
// ACCUMULATE takes over microbatches, and GEMM epilogues cuBLASLt cannot
// fuse. DeviceKernels.cuh holds the kernels, DeviceLaunchers.h their
// launchers. Each call goes through the CUDA table (CudaApi.h: the GPU's
// kernels or the virtual device's emulation of them), enqueues on
// `stream` and returns the launch's error.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_H
#define GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_H

#include "gptc/Runtime/CUDA/CudaApi.h"

#include <cstdint>

namespace gptc::cuda {

/// Whether the attention kernels take heads of width `headDim` (8 to 128,
/// powers of two).
bool attentionSupportsHeadDim(int64_t headDim);
/// The floats of attentionBackward's `stats` scratch.
int64_t attentionScratchFloats(int64_t batch, int64_t T, int64_t heads);
/// The doubles of sumOfSquares's `partials` scratch.
int64_t sumOfSquaresScratch();

/// out = causal softmax(q k^T / sqrt(D)) v per head; q, k, v, out are
/// [batch, T, C] of `type` with head h in columns [h D, (h + 1) D).
inline cudaError_t attentionForward(AttentionType type, const void *q,
                                    const void *k, const void *v, void *out,
                                    int64_t batch, int64_t T, int64_t C,
                                    int64_t heads, cudaStream_t stream) {
  return api().kernels->attentionForward(type, q, k, v, out, batch, T, C, heads,
                                         stream);
}

/// The gradients of attentionForward. `stats` is fp32 scratch of
/// attentionScratchFloats(batch, T, heads) floats.
inline cudaError_t attentionBackward(AttentionType type, const void *q,
                                     const void *k, const void *v,
                                     const void *dout, void *dq, void *dk,
                                     void *dv, float *stats, int64_t batch,
                                     int64_t T, int64_t C, int64_t heads,
                                     cudaStream_t stream) {
  return api().kernels->attentionBackward(type, q, k, v, dout, dq, dk, dv,
                                          stats, batch, T, C, heads, stream);
}

/// dtable[id - offset] += dy[i] over the n positions (dtable zeroed first);
/// ids outside [offset, offset + vocab) add nothing.
inline cudaError_t embeddingGrad(const int32_t *ids, int64_t n, const float *dy,
                                 int64_t vocab, int64_t width,
                                 const int32_t *offset, float *dtable,
                                 cudaStream_t stream) {
  return api().kernels->embeddingGrad(ids, n, dy, vocab, width, offset, dtable,
                                      stream);
}

/// y += x elementwise, for dtype 1 (f32), 2 (f64), 5 (bf16) or 6 (f16), as
/// program.proto numbers them (bf16 and f16 sum in f32).
inline cudaError_t addInPlace(int dtype, void *y, const void *x, int64_t n,
                              cudaStream_t stream) {
  return api().kernels->addInPlace(dtype, y, x, n, stream);
}

/// A GEMM epilogue that cuBLASLt has no algorithm for, after the plain
/// product: act = gelu(pre); d = gelu_grad(pre, d) in place; db = x summed
/// over its rows. dtype 1 (f32), 5 (bf16) or 6 (f16), in f32 arithmetic.
inline cudaError_t geluEpilogue(int dtype, const void *pre, void *act,
                                int64_t n, cudaStream_t stream) {
  return api().kernels->geluEpilogue(dtype, pre, act, n, stream);
}
inline cudaError_t dgeluEpilogue(int dtype, const void *pre, void *d, int64_t n,
                                 cudaStream_t stream) {
  return api().kernels->dgeluEpilogue(dtype, pre, d, n, stream);
}
inline cudaError_t biasGradEpilogue(int dtype, const void *x, int64_t rows,
                                    int64_t cols, void *db,
                                    cudaStream_t stream) {
  return api().kernels->biasGradEpilogue(dtype, x, rows, cols, db, stream);
}

/// The pipeline's update on the device (f32 state): x *= f; *total += the
/// sum of x^2 in f64 (`partials`: scratch of sumOfSquaresScratch()
/// doubles); AdamW in place with cpu::adamw's arithmetic.
inline cudaError_t scaleInPlace(float *x, int64_t n, float f,
                                cudaStream_t stream) {
  return api().kernels->scaleInPlace(x, n, f, stream);
}
inline cudaError_t sumOfSquares(const float *x, int64_t n, double *partials,
                                double *total, cudaStream_t stream) {
  return api().kernels->sumOfSquares(x, n, partials, total, stream);
}
inline cudaError_t adamW(float *p, const float *g, float *m, float *v,
                         int64_t n, double lr, int64_t step, double scale,
                         double beta1, double beta2, double eps,
                         double weightDecay, cudaStream_t stream) {
  return api().kernels->adamW(p, g, m, v, n, lr, step, scale, beta1, beta2, eps,
                              weightDecay, stream);
}

} // namespace gptc::cuda

#endif // GPTC_LIB_RUNTIME_CUDA_DEVICEKERNELS_H
