//===- CudaState.cpp - The CUDA backend's state operations -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The state operations on device memory: sums, scaling, the norm, AdamW
// and the collectives of the pipeline's update (CudaRunner.h says how the
// backend's files divide).
//
//===----------------------------------------------------------------------===//

#include "CudaRunner.h"

using namespace gptc;
using namespace gptc::runtime;
using namespace gptc::runtime::cudart;

//===----------------------------------------------------------------------===//
// State operations (the pipeline's update on the device)
//===----------------------------------------------------------------------===//

float *CudaBackend::deviceState(const Tensor &t, bool write,
                                std::string &error) {
  Mirror *m = findMirror(t.raw());
  if (!m || m->memory.bytes != static_cast<size_t>(t.byteSize()) ||
      t.dtype != program::F32) {
    error = "a state operation on the GPU names an f32 tensor that is not "
            "resident";
    return nullptr;
  }
  if (!m->deviceValid) {
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(m->memory.ptr, t.raw(), t.byteSize(),
                                          cudaMemcpyHostToDevice, stream));
    m->deviceValid = true;
  }
  if (write)
    m->hostValid = false;
  return static_cast<float *>(m->memory.ptr);
}

float *CudaBackend::stateBlock(int64_t count, std::string &error) {
  size_t bytes = static_cast<size_t>(count) * sizeof(float);
  if (blockScratch.bytes < bytes) {
    synchronize(stream);
    blockScratch.reset();
    if (!blockScratch.allocate(bytes)) {
      error = "cannot allocate " + std::to_string(bytes) +
              " bytes of device memory for a collective's block";
      return nullptr;
    }
  }
  return static_cast<float *>(blockScratch.ptr);
}

bool CudaBackend::stateZero(const Tensor &t, std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  GPTC_CUDA_CHECK(api().cudaMemsetAsync(p, 0, t.byteSize(), stream));
  return true;
}

bool CudaBackend::stateAdd(const Tensor &dst, const Tensor &src,
                           std::string &error) {
  if (dst.numElements() != src.numElements()) {
    error = "stateAdd: the tensors differ in size";
    return false;
  }
  const float *x = deviceState(src, false, error);
  float *y = x ? deviceState(dst, true, error) : nullptr;
  if (!y)
    return false;
  GPTC_CUDA_CHECK(cuda::addInPlace(1, y, x, dst.numElements(), stream));
  return true;
}

bool CudaBackend::stateScale(const StateSpan &span, float factor,
                             std::string &error) {
  float *x = deviceState(*span.tensor, true, error);
  if (!x)
    return false;
  GPTC_CUDA_CHECK(
      cuda::scaleInPlace(x + span.begin, span.count, factor, stream));
  return true;
}

bool CudaBackend::stateCopy(const StateSpan &dst, const StateSpan &src,
                            std::string &error) {
  if (dst.count != src.count) {
    error = "stateCopy: the spans differ in length";
    return false;
  }
  const float *x = deviceState(*src.tensor, false, error);
  float *y = x ? deviceState(*dst.tensor, true, error) : nullptr;
  if (!y)
    return false;
  GPTC_CUDA_CHECK(
      api().cudaMemcpyAsync(y + dst.begin, x + src.begin,
                            static_cast<size_t>(src.count) * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream));
  return true;
}

bool CudaBackend::stateSumOfSquares(const std::vector<StateSpan> &spans,
                                    double &sum, std::string &error) {
  // [0, scratch): the partial sums; the next double: the total.
  int64_t scratch = cuda::sumOfSquaresScratch();
  if (!sumScratch.ptr &&
      !sumScratch.allocate(static_cast<size_t>(scratch + 1) * sizeof(double))) {
    error = "cannot allocate the gradient norm's device scratch";
    return false;
  }
  double *partials = static_cast<double *>(sumScratch.ptr),
         *total = partials + scratch;
  GPTC_CUDA_CHECK(api().cudaMemsetAsync(total, 0, sizeof(double), stream));
  for (const StateSpan &s : spans) {
    const float *x = deviceState(*s.tensor, false, error);
    if (!x)
      return false;
    GPTC_CUDA_CHECK(
        cuda::sumOfSquares(x + s.begin, s.count, partials, total, stream));
  }
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(&sum, total, sizeof(double),
                                        cudaMemcpyDeviceToHost, stream));
  synchronize(stream);
  return true;
}

bool CudaBackend::stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                             int64_t step, double scale, double beta1,
                             double beta2, double eps, std::string &error) {
  for (const StateAdamW &t : tensors) {
    float *p = deviceState(*t.param, true, error);
    const float *g = p ? deviceState(*t.grad, false, error) : nullptr;
    float *m = g ? deviceState(*t.m, true, error) : nullptr;
    float *v = m ? deviceState(*t.v, true, error) : nullptr;
    if (!v)
      return false;
    GPTC_CUDA_CHECK(cuda::adamW(p + t.paramOffset(), g + t.begin, m, v, t.count,
                                lr, step, scale, beta1, beta2, eps,
                                t.weightDecay, stream));
  }
  return true;
}

// Without NCCL (one GPU, or gptc built without it) a collective on device
// state goes through the host: `inCount` elements at `src` copied out,
// `collective` run on the host copies, `outCount` elements copied back to
// `dst`.
bool CudaBackend::throughHost(
    const float *src, int64_t inCount, float *dst, int64_t outCount,
    const std::function<bool(std::byte *in, std::byte *out)> &collective,
    std::string &error) {
  Tensor in(program::F32, {inCount}), out(program::F32, {outCount});
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(in.raw(), src, in.byteSize(),
                                        cudaMemcpyDeviceToHost, stream));
  synchronize(stream);
  if (!collective(in.raw(), out.raw()))
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(dst, out.raw(), out.byteSize(),
                                        cudaMemcpyHostToDevice, stream));
  synchronize(stream);
  return true;
}

bool CudaBackend::stateAllReduceSum(const Tensor &t, Communicator &comm,
                                    const std::vector<int64_t> &grid,
                                    const std::vector<int64_t> &axes,
                                    std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  int64_t n = t.numElements();
  if (collectives)
    return collectives->allReduce(p, p, n, program::F32, false, grid, axes,
                                  stream, error);
  return throughHost(
      p, n, p, n,
      [&](std::byte *in, std::byte *out) {
        if (!comm.allReduceSum(in, n, program::F32, grid, axes, error))
          return false;
        std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
        return true;
      },
      error);
}

bool CudaBackend::stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                                        Communicator &comm,
                                        const std::vector<int64_t> &grid,
                                        const std::vector<int64_t> &axes,
                                        std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  if (!collectives)
    return throughHost(
        p, t.numElements(), p + mine.begin, mine.count,
        [&](std::byte *in, std::byte *out) {
          return comm.reduceScatterSum(in, out, mine.count, program::F32, grid,
                                       axes, error);
        },
        error);
  float *block = stateBlock(mine.count, error);
  if (!block || !collectives->reduceScatter(p, block, mine.count, program::F32,
                                            grid, axes, stream, error))
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
      p + mine.begin, block, static_cast<size_t>(mine.count) * sizeof(float),
      cudaMemcpyDeviceToDevice, stream));
  return true;
}

bool CudaBackend::stateAllGather(const StateSpan &mine, Communicator &comm,
                                 const std::vector<int64_t> &grid,
                                 const std::vector<int64_t> &axes,
                                 std::string &error) {
  const Tensor &t = *mine.tensor;
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  if (!collectives)
    return throughHost(
        p + mine.begin, mine.count, p, t.numElements(),
        [&](std::byte *in, std::byte *out) {
          return comm.allGather(in, out, mine.count, program::F32, grid, axes,
                                error);
        },
        error);
  float *block = stateBlock(mine.count, error);
  if (!block)
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
      block, p + mine.begin, static_cast<size_t>(mine.count) * sizeof(float),
      cudaMemcpyDeviceToDevice, stream));
  return collectives->allGather(block, p, mine.count, program::F32, grid, axes,
                                stream, error);
}
