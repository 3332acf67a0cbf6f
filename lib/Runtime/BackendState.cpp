//===- BackendState.cpp - State operations on the host ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The default Backend state operations (Backend.h): the host's loops and
// the Communicator's collectives, on the memory stateMemory names (the
// tensor's own storage on the CPU, the emulated device copy under
// --check-residency). The GPU backend runs the same operations as kernels
// and NCCL calls on device memory (lib/Runtime/CUDA/CudaBackend.cpp).
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Backend.h"

#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Communicator.h"

#include <cstring>

using namespace gptc;
using namespace gptc::runtime;

namespace {
bool notResident(std::string &error) {
  error = "a state operation names a tensor that is not resident";
  return false;
}
bool checkF32(const Tensor &t, std::string &error) {
  if (t.dtype == program::F32)
    return true;
  error = "state operations take f32 tensors";
  return false;
}
} // namespace

bool Backend::stateZero(const Tensor &t, std::string &error) {
  std::byte *p = stateMemory(t, true);
  if (!p)
    return notResident(error);
  std::memset(p, 0, t.byteSize());
  return true;
}

bool Backend::stateAdd(const Tensor &dst, const Tensor &src,
                       std::string &error) {
  if (!checkF32(dst, error) || !checkF32(src, error))
    return false;
  if (dst.numElements() != src.numElements()) {
    error = "stateAdd: the tensors differ in size";
    return false;
  }
  const float *x = reinterpret_cast<const float *>(stateMemory(src, false));
  float *y = reinterpret_cast<float *>(stateMemory(dst, true));
  if (!x || !y)
    return notResident(error);
  for (int64_t e = 0, n = dst.numElements(); e < n; ++e)
    y[e] += x[e];
  return true;
}

bool Backend::stateScale(const StateSpan &span, float factor,
                         std::string &error) {
  if (!checkF32(*span.tensor, error))
    return false;
  float *x = reinterpret_cast<float *>(stateMemory(*span.tensor, true));
  if (!x)
    return notResident(error);
  x += span.begin;
  for (int64_t e = 0; e < span.count; ++e)
    x[e] *= factor;
  return true;
}

bool Backend::stateSumOfSquares(const std::vector<StateSpan> &spans,
                                double &sum, std::string &error) {
  sum = 0;
  for (const StateSpan &s : spans) {
    if (!checkF32(*s.tensor, error))
      return false;
    const float *x =
        reinterpret_cast<const float *>(stateMemory(*s.tensor, false));
    if (!x)
      return notResident(error);
    x += s.begin;
    for (int64_t e = 0; e < s.count; ++e)
      sum += static_cast<double>(x[e]) * x[e];
  }
  return true;
}

bool Backend::stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                         int64_t step, double scale, double beta1,
                         double beta2, double eps, std::string &error) {
  std::vector<cpu::AdamWTensor> update;
  for (const StateAdamW &t : tensors) {
    for (const Tensor *x : {t.param, t.grad, t.m, t.v})
      if (!checkF32(*x, error))
        return false;
    float *p = reinterpret_cast<float *>(stateMemory(*t.param, true));
    const float *g =
        reinterpret_cast<const float *>(stateMemory(*t.grad, false));
    float *m = reinterpret_cast<float *>(stateMemory(*t.m, true));
    float *v = reinterpret_cast<float *>(stateMemory(*t.v, true));
    if (!p || !g || !m || !v)
      return notResident(error);
    update.push_back({p + t.begin, g + t.begin, m, v, p + t.begin, m, v,
                      t.count, t.weightDecay});
  }
  cpu::multiAdamW(update, lr, step, scale, beta1, beta2, eps);
  return true;
}

bool Backend::stateAllReduceSum(const Tensor &t, Communicator &comm,
                                const std::vector<int64_t> &grid,
                                const std::vector<int64_t> &axes,
                                std::string &error) {
  std::byte *p = stateMemory(t, true);
  if (!p)
    return notResident(error);
  return comm.allReduceSum(p, t.numElements(), t.dtype, grid, axes, error);
}

bool Backend::stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                                    Communicator &comm,
                                    const std::vector<int64_t> &grid,
                                    const std::vector<int64_t> &axes,
                                    std::string &error) {
  if (!checkF32(t, error))
    return false;
  float *p = reinterpret_cast<float *>(stateMemory(t, true));
  if (!p)
    return notResident(error);
  Tensor block(program::F32, {mine.count});
  if (!comm.reduceScatterSum(p, block.raw(), mine.count, program::F32, grid,
                             axes, error))
    return false;
  std::memcpy(p + mine.begin, block.raw(), block.byteSize());
  return true;
}

bool Backend::stateAllGather(const StateSpan &mine, Communicator &comm,
                             const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes,
                             std::string &error) {
  const Tensor &t = *mine.tensor;
  if (!checkF32(t, error))
    return false;
  float *p = reinterpret_cast<float *>(stateMemory(t, true));
  if (!p)
    return notResident(error);
  Tensor block(program::F32, {mine.count});
  std::memcpy(block.raw(), p + mine.begin, block.byteSize());
  return comm.allGather(block.raw(), p, mine.count, program::F32, grid, axes,
                        error);
}
