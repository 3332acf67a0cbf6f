//===- EmulatedKernels.cpp - The hand-written kernels, emulated
//------------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The virtual device's DeviceKernelSet: DeviceKernels.cuh and
// DeviceLaunchers.h, the same source nvcc compiles for the GPU, compiled as
// host C++ under the emulation of CUDA's device language (CudaEmulation.h).
// Each launcher names the device memory its kernels read and write (the
// GPU's launch has no such list; the virtual device checks and orders
// these), and each of its launches goes through the device's stream model
// before its threads run as fibers.
//
//===----------------------------------------------------------------------===//

#define GPTC_CUDA_EMULATION 1
#include "CudaEmulation.h"

#include "DeviceKernels.cuh"
#include "DeviceLaunchers.h"
#include "VirtualDevice.h"

#include <array>
#include <memory>
#include <stdexcept>
#include <tuple>

using namespace gptc;
using namespace gptc::cuda::device;
using vcuda::Access;

void vcuda::runThreads(const unsigned grid[3], const unsigned block[3],
                       const std::function<void()> &body, bool independent) {
  emu::launch(dim3(grid[0], grid[1], grid[2]),
              dim3(block[0], block[1], block[2]), body, independent);
}

namespace {

/// The launch functor of DeviceLaunchers.h on the virtual device: every
/// launch of one launcher call touches `accesses`.
struct EmulatedLaunch {
  void *stream;
  const char *name;
  std::vector<Access> accesses;
  int status = 0;
  int launches = 0;

  template <typename... Params, typename... Args>
  void operator()(dim3 grid, dim3 block, void (*kernel)(Params...),
                  Args... args) {
    if (status != 0)
      return;
    // The arguments by value: the launch may run after this call returns.
    auto bound = std::make_shared<std::tuple<std::decay_t<Params>...>>(args...);
    std::array<unsigned, 3> g{grid.x, grid.y, grid.z},
        b{block.x, block.y, block.z};
    std::string label =
        std::string(name) + " (launch " + std::to_string(++launches) + ")";
    status = vcuda::launch(stream, label, g.data(), b.data(), 0, accesses, [=] {
      vcuda::runThreads(
          g.data(), b.data(), [&] { std::apply(kernel, *bound); }, false);
    });
  }
  int result(bool ok) const { return ok ? status : vcuda::kInvalidValue; }
};

int64_t attentionElement(int type) { return type == kAttentionF32 ? 4 : 2; }

} // namespace

namespace gptc::vcuda::emulated {

int attentionForward(int type, const void *q, const void *k, const void *v,
                     void *out, int64_t batch, int64_t T, int64_t C,
                     int64_t heads, void *stream) {
  int64_t bytes = batch * T * C * attentionElement(type);
  EmulatedLaunch launch{stream,
                        "attentionForward",
                        {{q, bytes, false},
                         {k, bytes, false},
                         {v, bytes, false},
                         {out, bytes, true}}};
  return launch.result(
      attentionForwardWith(launch, type, q, k, v, out, batch, T, C, heads));
}

int attentionBackward(int type, const void *q, const void *k, const void *v,
                      const void *dout, void *dq, void *dk, void *dv,
                      float *stats, int64_t batch, int64_t T, int64_t C,
                      int64_t heads, void *stream) {
  int64_t bytes = batch * T * C * attentionElement(type);
  EmulatedLaunch launch{
      stream,
      "attentionBackward",
      {{q, bytes, false},
       {k, bytes, false},
       {v, bytes, false},
       {dout, bytes, false},
       {dq, bytes, true},
       {dk, bytes, true},
       {dv, bytes, true},
       {stats, batch * heads * T * 2 * int64_t(sizeof(float)), true}}};
  return launch.result(attentionBackwardWith(
      launch, type, q, k, v, dout, dq, dk, dv, stats, batch, T, C, heads));
}

int embeddingGrad(const int32_t *ids, int64_t n, const float *dy, int64_t vocab,
                  int64_t width, const int32_t *offset, float *dtable,
                  void *stream) {
  int64_t tableBytes = vocab * width * int64_t(sizeof(float));
  if (int status =
          memsetAsync(dtable, 0, static_cast<size_t>(tableBytes), stream))
    return status;
  EmulatedLaunch launch{stream,
                        "embeddingGrad",
                        {{ids, n * int64_t(sizeof(int32_t)), false},
                         {dy, n * width * int64_t(sizeof(float)), false},
                         {dtable, tableBytes, true}}};
  if (offset)
    launch.accesses.push_back({offset, sizeof(int32_t), false});
  launchEmbeddingGrad(launch, ids, n, dy, vocab, width, offset, dtable);
  return launch.status;
}

int addInPlace(int dtype, void *y, const void *x, int64_t n, void *stream) {
  int64_t bytes = n * elementBytes(dtype);
  EmulatedLaunch launch{
      stream, "addInPlace", {{x, bytes, false}, {y, bytes, true}}};
  return launch.result(addInPlaceWith(launch, dtype, y, x, n));
}

int geluEpilogue(int dtype, const void *pre, void *act, int64_t n,
                 void *stream) {
  int64_t bytes = n * elementBytes(dtype);
  EmulatedLaunch launch{
      stream, "geluEpilogue", {{pre, bytes, false}, {act, bytes, true}}};
  return launch.result(geluEpilogueWith(launch, dtype, pre, act, n));
}

int dgeluEpilogue(int dtype, const void *pre, void *d, int64_t n,
                  void *stream) {
  int64_t bytes = n * elementBytes(dtype);
  EmulatedLaunch launch{
      stream, "dgeluEpilogue", {{pre, bytes, false}, {d, bytes, true}}};
  return launch.result(dgeluEpilogueWith(launch, dtype, pre, d, n));
}

int biasGradEpilogue(int dtype, const void *x, int64_t rows, int64_t cols,
                     void *db, void *stream) {
  int64_t e = elementBytes(dtype);
  EmulatedLaunch launch{stream,
                        "biasGradEpilogue",
                        {{x, rows * cols * e, false}, {db, cols * e, true}}};
  return launch.result(biasGradEpilogueWith(launch, dtype, x, rows, cols, db));
}

int scaleInPlace(float *x, int64_t n, float f, void *stream) {
  EmulatedLaunch launch{
      stream, "scaleInPlace", {{x, n * int64_t(sizeof(float)), true}}};
  launchScale(launch, x, n, f);
  return launch.status;
}

int sumOfSquares(const float *x, int64_t n, double *partials, double *total,
                 void *stream) {
  EmulatedLaunch launch{stream,
                        "sumOfSquares",
                        {{x, n * int64_t(sizeof(float)), false},
                         {partials, kSumBlocks * int64_t(sizeof(double)), true},
                         {total, sizeof(double), true}}};
  launchSumOfSquares(launch, x, n, partials, total);
  return launch.status;
}

int adamW(float *p, const float *g, float *m, float *v, int64_t n, double lr,
          int64_t step, double scale, double beta1, double beta2, double eps,
          double weightDecay, void *stream) {
  int64_t bytes = n * int64_t(sizeof(float));
  EmulatedLaunch launch{stream,
                        "adamW",
                        {{g, bytes, false},
                         {p, bytes, true},
                         {m, bytes, true},
                         {v, bytes, true}}};
  launchAdamW(launch, p, g, m, v, n,
              adamWConstants(lr, step, scale, beta1, beta2, eps, weightDecay));
  return launch.status;
}

} // namespace gptc::vcuda::emulated
