//===- DeviceCollectives.h - Collectives on device buffers ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the GPU backend calls for a function's collectives: the runtime's
// Communicator semantics (groups over grid axes, rank = row-major point of
// the grid, blocks in group order) on device pointers, enqueued on a CUDA
// stream the caller names, with no host staging. NCCL implements it
// (NcclCommunicator.cpp): one NCCL communicator per group, its unique id
// made by the group's first rank and broadcast over the bootstrap
// Communicator (MPI).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_DEVICECOLLECTIVES_H
#define GPTC_RUNTIME_CUDA_DEVICECOLLECTIVES_H

#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator;

class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Makes the group over `axes` now (collective over the group: every
  /// rank of it calls this in the same order); the calls below make it
  /// on first use otherwise.
  virtual bool prepareGroup(const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &axes,
                            std::string &error) = 0;
  /// Each enqueues on `stream` (a cudaStream_t) and returns at once.
  /// `out` = the sum (or the maximum) of `in` over the group; `in` may be
  /// `out`.
  virtual bool allReduce(const void *in, void *out, int64_t count,
                         program::DType dtype, bool maximum,
                         const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes, void *stream,
                         std::string &error) = 0;
  /// Calls between these two are issued as one operation (NCCL's
  /// ncclGroupStart/ncclGroupEnd: one launch for a bucket's tensors).
  virtual bool beginGroup(std::string &error) = 0;
  virtual bool endGroup(std::string &error) = 0;
  /// `out` = the group's `count`-element blocks of `in`, in group order.
  virtual bool allGather(const void *in, void *out, int64_t count,
                         program::DType dtype, const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes, void *stream,
                         std::string &error) = 0;
  /// `out` = this rank's `count`-element block of the sum of `in` (group
  /// size x `count` elements) over the group.
  virtual bool reduceScatter(const void *in, void *out, int64_t count,
                             program::DType dtype,
                             const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes, void *stream,
                             std::string &error) = 0;
  /// Whether a communicator reports an asynchronous error (NCCL's
  /// ncclCommGetAsyncError: a peer that died, a network failure); `error`
  /// then names it and its group.
  virtual bool asyncError(std::string &error) = 0;
  /// Aborts every communicator (ncclCommAbort): their collectives in
  /// flight end, and none may be used again. Safe from another thread.
  virtual void abortAll() = 0;
};

/// NCCL collectives on GPU `device` (the one the GPU backend runs on),
/// bootstrapped by `bootstrap`, which must outlive them. Null with `error`
/// set when NCCL is not built in or does not start.
std::unique_ptr<DeviceCollectives>
createNcclDeviceCollectives(Communicator &bootstrap, int device,
                            std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CUDA_DEVICECOLLECTIVES_H
