//===- CudaCollectives.cpp - Collectives of a CUDA function -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A function's collectives and gradient buckets: prepared (groups, NCCL
// or the host, buffers) and run on the communication stream (CudaRunner.h says
// how the backend's files divide).
//
//===----------------------------------------------------------------------===//

#include "CudaRunner.h"

using namespace gptc;
using namespace gptc::runtime;
using namespace gptc::runtime::cudart;

bool CudaRunner::prepareCollective(const Kernel &k, size_t index,
                                   std::string &error) {
  auto c = std::make_unique<Collective>();
  c->grid.assign(function.grid_shape().begin(), function.grid_shape().end());
  const auto &axes = k.op() == program::SHARD_OFFSET
                         ? k.shard_offset().grid_axes()
                         : k.collective().grid_axes();
  c->axes.assign(axes.begin(), axes.end());
  for (int64_t a : c->axes)
    if (a < 0 || a >= static_cast<int64_t>(c->grid.size())) {
      error = "grid axis out of range";
      return false;
    }
  c->ranks = groupSize(c->grid, c->axes);
  DeviceCollectives *dc = backend.collectives.get();
  if (c->ranks > 1 && !dc) {
    error = "runs over " + std::to_string(c->ranks) +
            " devices and needs NCCL: run under mpirun";
    return false;
  }
  c->me = c->ranks > 1 ? groupIndex(c->grid, c->axes, dc->rank()) : 0;
  if (k.op() == program::SHARD_OFFSET) {
    if (k.outputs_size() != 1 || !k.has_shard_offset() ||
        function.values(k.outputs(0)).type().dtype() != program::I32 ||
        numElements(function.values(k.outputs(0))) != 1) {
      error = "expects an i32 scalar result";
      return false;
    }
    c->offset = static_cast<int32_t>(c->me * k.shard_offset().block());
    if (!c->offsetOnDevice.allocate(sizeof(int32_t)) ||
        api().cudaMemcpy(c->offsetOnDevice.ptr, &c->offset, sizeof(int32_t),
                         cudaMemcpyHostToDevice) != cudaSuccess) {
      error = "cannot place its offset in device memory";
      return false;
    }
    comms[index] = std::move(c);
    return true;
  }
  if ((k.op() == program::ALL_REDUCE || k.op() == program::ALL_GATHER ||
       k.op() == program::REDUCE_SCATTER) &&
      k.inputs_size() > 1)
    return prepareBucket(k, index, std::move(c), error);
  if (k.inputs_size() != 1 || k.outputs_size() != 1 || !k.has_collective()) {
    error = "is malformed";
    return false;
  }
  const program::Value &x = function.values(k.inputs(0)),
                       &y = function.values(k.outputs(0));
  DType t = x.type().dtype();
  if (t != y.type().dtype()) {
    error = "operand types do not match";
    return false;
  }
  if (k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX) {
    if (numElements(x) != numElements(y)) {
      error = "operand shapes do not match";
      return false;
    }
  } else {
    bool gather = k.op() == program::ALL_GATHER;
    const auto &whole = (gather ? y : x).type().shape();
    const auto &block = (gather ? x : y).type().shape();
    int64_t axis = k.collective().axis();
    int rank = whole.size();
    if (axis < 0 || axis >= rank || block.size() != rank) {
      error = "tensor axis out of range";
      return false;
    }
    int64_t inner = 1;
    for (int d = 0; d < rank; ++d) {
      if (whole[d] != block[d] * (d == axis ? c->ranks : 1)) {
        error = "operand shapes do not match the group of " +
                std::to_string(c->ranks) + " devices";
        return false;
      }
      if (d < axis)
        c->outer *= block[d];
      else if (d > axis)
        inner *= block[d];
    }
    c->chunk = block[axis] * inner * elementSize(t);
    c->blockBytes = c->outer * c->chunk;
    // Blocks that are not contiguous are packed rank-major around NCCL.
    if (k.op() != program::ALL_SLICE && c->ranks > 1 && c->outer > 1 &&
        static_cast<size_t>(c->blockBytes * c->ranks) > backend.packing.bytes) {
      backend.packing.reset();
      if (!backend.packing.allocate(
              static_cast<size_t>(c->blockBytes * c->ranks))) {
        error = "cannot allocate the collectives' packing buffer";
        return false;
      }
    }
  }
  if (k.op() != program::ALL_SLICE) {
    if (api().cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) !=
        cudaSuccess) {
      error = "cudaEventCreate failed";
      return false;
    }
    // Every rank prepares the same functions in the same order: the
    // groups' NCCL communicators are made here, not inside a step.
    if (c->ranks > 1 && !dc->prepareGroup(c->grid, c->axes, error))
      return false;
  }
  comms[index] = std::move(c);
  return true;
}

bool CudaRunner::prepareBucket(const Kernel &k, size_t index,
                               std::unique_ptr<Collective> c,
                               std::string &error) {
  if (k.outputs_size() != k.inputs_size() || !k.has_collective()) {
    error = "is malformed: a bucket needs one output per input";
    return false;
  }
  DType t = function.values(k.outputs(0)).type().dtype();
  bool gather = k.op() == program::ALL_GATHER,
       reduce = k.op() == program::ALL_REDUCE;
  if (!reduce && k.collective().axis() != 0) {
    error = "is a bucket along axis " + std::to_string(k.collective().axis()) +
            " (buckets gather and scatter along axis 0)";
    return false;
  }
  for (int i = 0; i < k.inputs_size(); ++i) {
    const program::Value &x = function.values(k.inputs(i)),
                         &y = function.values(k.outputs(i));
    if (x.type().dtype() != t || y.type().dtype() != t) {
      error = "a bucket's tensors must share one element type";
      return false;
    }
    // A gather's and a scatter's blocks along dimension 0 are contiguous:
    // one NCCL call each, no packing.
    int64_t whole = numElements(gather ? y : x),
            part = numElements(gather ? x : y);
    const auto &ws = (gather ? y : x).type().shape(),
               &ps = (gather ? x : y).type().shape();
    if (reduce ? whole != part
               : whole != part * c->ranks || ws.empty() ||
                     ws.size() != ps.size() ||
                     !std::equal(ws.begin() + 1, ws.end(), ps.begin() + 1)) {
      error = reduce
                  ? "operand shapes do not match"
                  : "operand shapes do not match the group of " +
                        std::to_string(c->ranks) + " devices along dimension 0";
      return false;
    }
  }
  c->span = bucketSpanBytes(function, k) / elementSize(t);
  if (api().cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) !=
      cudaSuccess) {
    error = "cudaEventCreate failed";
    return false;
  }
  if (c->ranks > 1 &&
      !backend.collectives->prepareGroup(c->grid, c->axes, error))
    return false;
  comms[index] = std::move(c);
  return true;
}

/// On the communication stream, after everything the compute stream has
/// enqueued so far; `done` marks its end for the compute stream's waits.
void CudaRunner::runCollective(size_t index) {
  const Kernel &k = function.kernels(static_cast<int>(index));
  Collective &c = *comms[index];
  cudaStream_t comm = backend.commStream;
  GPTC_CUDA_CHECK(api().cudaEventRecord(backend.handOver, backend.stream));
  GPTC_CUDA_CHECK(api().cudaStreamWaitEvent(comm, backend.handOver, 0));
  if (k.inputs_size() > 1) {
    runBucket(index);
    GPTC_CUDA_CHECK(api().cudaEventRecord(c.done, comm));
    return;
  }
  const program::Value &xv = function.values(k.inputs(0)),
                       &yv = function.values(k.outputs(0));
  DType t = xv.type().dtype();
  void *x = ptr[k.inputs(0)], *y = ptr[k.outputs(0)];
  std::string error;
  auto check = [&](bool ok) {
    if (!ok)
      cuda::fail(error.c_str(),
                 (program::OpKind_Name(k.op()) + " at " + k.location()).c_str(),
                 __FILE__, __LINE__);
  };
  bool reduce =
      k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX;
  if (c.ranks == 1) {
    // A group of one: the result is the operand.
    if (x != y)
      GPTC_CUDA_CHECK(api().cudaMemcpyAsync(y, x,
                                            numElements(yv) * elementSize(t),
                                            cudaMemcpyDeviceToDevice, comm));
  } else if (reduce) {
    check(backend.collectives->allReduce(x, y, numElements(yv), t,
                                         k.op() == program::ALL_REDUCE_MAX,
                                         c.grid, c.axes, comm, error));
  } else if (k.op() == program::ALL_GATHER) {
    if (c.outer == 1) {
      check(backend.collectives->allGather(x, y, numElements(xv), t, c.grid,
                                           c.axes, comm, error));
    } else {
      // Gathered rank-major, then each rank's block to its columns.
      std::byte *packed = static_cast<std::byte *>(backend.packing.ptr);
      check(backend.collectives->allGather(x, packed, numElements(xv), t,
                                           c.grid, c.axes, comm, error));
      for (int64_t r = 0; r < c.ranks; ++r)
        GPTC_CUDA_CHECK(api().cudaMemcpy2DAsync(
            static_cast<std::byte *>(y) + r * c.chunk, c.ranks * c.chunk,
            packed + r * c.blockBytes, c.chunk, c.chunk, c.outer,
            cudaMemcpyDeviceToDevice, comm));
    }
  } else {
    if (c.outer == 1) {
      check(backend.collectives->reduceScatter(x, y, numElements(yv), t, c.grid,
                                               c.axes, comm, error));
    } else {
      std::byte *packed = static_cast<std::byte *>(backend.packing.ptr);
      for (int64_t r = 0; r < c.ranks; ++r)
        GPTC_CUDA_CHECK(api().cudaMemcpy2DAsync(
            packed + r * c.blockBytes, c.chunk,
            static_cast<const std::byte *>(x) + r * c.chunk, c.ranks * c.chunk,
            c.chunk, c.outer, cudaMemcpyDeviceToDevice, comm));
      check(backend.collectives->reduceScatter(packed, y, numElements(yv), t,
                                               c.grid, c.axes, comm, error));
    }
  }
  GPTC_CUDA_CHECK(api().cudaEventRecord(c.done, comm));
}

/// A gradient bucket on the communication stream: one NCCL call over its
/// span when the plan made one, else one call per tensor in an NCCL group
/// (which NCCL runs as one launch).
void CudaRunner::runBucket(size_t index) {
  const Kernel &k = function.kernels(static_cast<int>(index));
  Collective &c = *comms[index];
  cudaStream_t comm = backend.commStream;
  DType t = function.values(k.outputs(0)).type().dtype();
  std::string error;
  auto check = [&](bool ok) {
    if (!ok)
      cuda::fail(error.c_str(),
                 (program::OpKind_Name(k.op()) + " at " + k.location()).c_str(),
                 __FILE__, __LINE__);
  };
  if (c.ranks == 1) {
    for (int i = 0; i < k.inputs_size(); ++i)
      if (ptr[k.inputs(i)] != ptr[k.outputs(i)])
        GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
            ptr[k.outputs(i)], ptr[k.inputs(i)],
            numElements(function.values(k.outputs(i))) * elementSize(t),
            cudaMemcpyDeviceToDevice, comm));
    return;
  }
  DeviceCollectives &dc = *backend.collectives;
  if (c.span > 0) {
    void *data = ptr[k.outputs(0)];
    check(dc.allReduce(data, data, c.span, t, false, c.grid, c.axes, comm,
                       error));
    return;
  }
  // One NCCL call per tensor, issued as one operation.
  check(dc.beginGroup(error));
  for (int i = 0; i < k.inputs_size(); ++i) {
    void *x = ptr[k.inputs(i)], *y = ptr[k.outputs(i)];
    int64_t in = numElements(function.values(k.inputs(i))),
            out = numElements(function.values(k.outputs(i)));
    if (k.op() == program::ALL_GATHER)
      check(dc.allGather(x, y, in, t, c.grid, c.axes, comm, error));
    else if (k.op() == program::REDUCE_SCATTER)
      check(dc.reduceScatter(x, y, out, t, c.grid, c.axes, comm, error));
    else
      check(dc.allReduce(x, y, out, t, false, c.grid, c.axes, comm, error));
  }
  check(dc.endGroup(error));
}
