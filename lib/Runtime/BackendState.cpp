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

#include <algorithm>
#include <cstring>

using namespace gptc;
using namespace gptc::runtime;

float *Backend::stateFloats(const Tensor &t, bool write, std::string &error) {
  if (t.dtype != program::F32) {
    error = "state operations take f32 tensors";
    return nullptr;
  }
  auto *p = reinterpret_cast<float *>(stateMemory(t, write));
  if (!p)
    error = "a state operation names a tensor that is not resident";
  return p;
}

bool Backend::stateZero(const Tensor &t, std::string &error) {
  float *p = stateFloats(t, true, error);
  if (!p)
    return false;
  std::fill_n(p, t.numElements(), 0.f);
  return true;
}

bool Backend::stateAdd(const Tensor &dst, const Tensor &src,
                       std::string &error) {
  if (dst.numElements() != src.numElements()) {
    error = "stateAdd: the tensors differ in size";
    return false;
  }
  const float *x = stateFloats(src, false, error);
  float *y = x ? stateFloats(dst, true, error) : nullptr;
  if (!y)
    return false;
  for (int64_t e = 0, n = dst.numElements(); e < n; ++e)
    y[e] += x[e];
  return true;
}

bool Backend::stateScale(const StateSpan &span, float factor,
                         std::string &error) {
  float *x = stateFloats(*span.tensor, true, error);
  if (!x)
    return false;
  x += span.begin;
  for (int64_t e = 0; e < span.count; ++e)
    x[e] *= factor;
  return true;
}

bool Backend::stateCopy(const StateSpan &dst, const StateSpan &src,
                        std::string &error) {
  if (dst.count != src.count) {
    error = "stateCopy: the spans differ in length";
    return false;
  }
  const float *x = stateFloats(*src.tensor, false, error);
  float *y = x ? stateFloats(*dst.tensor, true, error) : nullptr;
  if (!y)
    return false;
  std::copy_n(x + src.begin, src.count, y + dst.begin);
  return true;
}

bool Backend::stateSumOfSquares(const std::vector<StateSpan> &spans,
                                double &sum, std::string &error) {
  sum = 0;
  for (const StateSpan &s : spans) {
    const float *x = stateFloats(*s.tensor, false, error);
    if (!x)
      return false;
    x += s.begin;
    for (int64_t e = 0; e < s.count; ++e)
      sum += static_cast<double>(x[e]) * x[e];
  }
  return true;
}

bool Backend::stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                         int64_t step, double scale, double beta1, double beta2,
                         double eps, std::string &error) {
  std::vector<cpu::AdamWTensor> update;
  for (const StateAdamW &t : tensors) {
    float *p = stateFloats(*t.param, true, error);
    const float *g = p ? stateFloats(*t.grad, false, error) : nullptr;
    float *m = g ? stateFloats(*t.m, true, error) : nullptr;
    float *v = m ? stateFloats(*t.v, true, error) : nullptr;
    if (!v)
      return false;
    update.push_back({p + t.paramOffset(), g + t.begin, m, v,
                      p + t.paramOffset(), m, v, t.count, t.weightDecay});
  }
  cpu::multiAdamW(update, lr, step, scale, beta1, beta2, eps);
  return true;
}

bool Backend::stateAllReduceSum(const Tensor &t, Communicator &comm,
                                const std::vector<int64_t> &grid,
                                const std::vector<int64_t> &axes,
                                std::string &error) {
  float *p = stateFloats(t, true, error);
  return p && comm.allReduceSum(p, t.numElements(), t.dtype, grid, axes, error);
}

bool Backend::stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                                    Communicator &comm,
                                    const std::vector<int64_t> &grid,
                                    const std::vector<int64_t> &axes,
                                    std::string &error) {
  float *p = stateFloats(t, true, error);
  if (!p)
    return false;
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
  float *p = stateFloats(*mine.tensor, true, error);
  if (!p)
    return false;
  Tensor block(program::F32, {mine.count});
  std::memcpy(block.raw(), p + mine.begin, block.byteSize());
  return comm.allGather(block.raw(), p, mine.count, program::F32, grid, axes,
                        error);
}
