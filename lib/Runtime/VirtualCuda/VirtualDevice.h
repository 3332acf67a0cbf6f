//===- VirtualDevice.h - The virtual CUDA device's core ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the two halves of libGptcVirtualCuda.so say to each other: the
// stand-ins of CUDA's API (VirtualCuda.cpp, which sees CUDA's headers) and
// the hand-written kernels compiled under the emulation of CUDA's device
// language (EmulatedKernels.cpp, which must not: the emulation defines its
// own dim3). Plain C++ types only.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_VIRTUALCUDA_VIRTUALDEVICE_H
#define GPTC_LIB_RUNTIME_VIRTUALCUDA_VIRTUALDEVICE_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gptc::vcuda {

/// Bytes [ptr, ptr + bytes) of device memory an operation reads, or reads
/// and writes.
struct Access {
  const void *ptr;
  int64_t bytes;
  bool write;
};

/// A launch of a kernel on `stream` (a cudaStream_t; null: the legacy
/// default stream) that touches `accesses`: checked against the
/// allocations and the streams' order, recorded, then `run` (which runs
/// every thread). Returns 0 or a cudaError_t, the diagnostic printed.
int launch(void *stream, const std::string &name, const unsigned grid[3],
           const unsigned block[3], int64_t maxThreads,
           const std::vector<Access> &accesses,
           const std::function<void()> &run);

/// cudaMemsetAsync, for the emulated kernels' launchers.
int memsetAsync(void *ptr, int value, size_t bytes, void *stream);

/// Runs `body` as every thread of grid x block under the emulation
/// (EmulatedKernels.cpp); `independent`: no thread synchronizes. Throws
/// std::runtime_error for a launch the emulation cannot run.
void runThreads(const unsigned grid[3], const unsigned block[3],
                const std::function<void()> &body, bool independent);

/// The emulated launchers of DeviceKernelSet, with plain types: a status
/// (0 or a cudaError_t) each; `stream` is a cudaStream_t.
namespace emulated {
int attentionForward(int type, const void *q, const void *k, const void *v,
                     void *out, int64_t batch, int64_t T, int64_t C,
                     int64_t heads, void *stream);
int attentionBackward(int type, const void *q, const void *k, const void *v,
                      const void *dout, void *dq, void *dk, void *dv,
                      float *stats, int64_t batch, int64_t T, int64_t C,
                      int64_t heads, void *stream);
int embeddingGrad(const int32_t *ids, int64_t n, const float *dy, int64_t vocab,
                  int64_t width, const int32_t *offset, float *dtable,
                  void *stream);
int addInPlace(int dtype, void *y, const void *x, int64_t n, void *stream);
int geluEpilogue(int dtype, const void *pre, void *act, int64_t n,
                 void *stream);
int dgeluEpilogue(int dtype, const void *pre, void *d, int64_t n, void *stream);
int biasGradEpilogue(int dtype, const void *x, int64_t rows, int64_t cols,
                     void *db, void *stream);
int scaleInPlace(float *x, int64_t n, float f, void *stream);
int sumOfSquares(const float *x, int64_t n, double *partials, double *total,
                 void *stream);
int adamW(float *p, const float *g, float *m, float *v, int64_t n, double lr,
          int64_t step, double scale, double beta1, double beta2, double eps,
          double weightDecay, void *stream);
} // namespace emulated

/// cudaErrorInvalidValue's number, for the emulated half.
constexpr int kInvalidValue = 1;

} // namespace gptc::vcuda

#endif // GPTC_LIB_RUNTIME_VIRTUALCUDA_VIRTUALDEVICE_H
