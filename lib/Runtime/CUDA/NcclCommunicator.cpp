//===- NcclCommunicator.cpp - Collectives over NCCL ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Two faces of one set of NCCL communicators: the runtime's Communicator
// on host tensors (staged through device memory, for the CPU executor and
// the tests of the collectives themselves) and DeviceCollectives on device
// pointers (the GPU backend's, no staging). Both make one NCCL
// communicator per group of grid axes on first use; a failing NCCL or CUDA
// call is reported with the call and its file:line.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/NcclCommunicator.h"
#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/CUDA/DeviceCollectives.h"

#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Tensor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

using ::gptc::cuda::api;

using namespace gptc;
using namespace gptc::runtime;

namespace {

#define GPTC_WHERE(call) call, #call, __FILE__, __LINE__

bool cudaOk(cudaError_t rc, const char *call, const char *file, int line,
            std::string &error) {
  if (rc == cudaSuccess)
    return true;
  error = std::string(file) + ":" + std::to_string(line) + ": " + call +
          " failed: " + api().cudaGetErrorString(rc);
  return false;
}
bool ncclOk(ncclResult_t rc, const char *call, const char *file, int line,
            std::string &error) {
  if (rc == ncclSuccess)
    return true;
  error = std::string(file) + ":" + std::to_string(line) + ": " + call +
          " failed: " + api().ncclGetErrorString(rc);
  if (const char *last = api().ncclGetLastError(nullptr))
    if (*last)
      error += " (" + std::string(last) + ")";
  return false;
}

bool ncclType(program::DType dtype, ncclDataType_t &type, std::string &error) {
  switch (dtype) {
  case program::F32:
    type = ncclFloat32;
    return true;
  case program::F64:
    type = ncclFloat64;
    return true;
  case program::BF16:
    type = ncclBfloat16;
    return true;
  case program::F16:
    type = ncclFloat16;
    return true;
  case program::I32:
    type = ncclInt32;
    return true;
  case program::I64:
    type = ncclInt64;
    return true;
  default:
    error = "NCCL collectives of element type " + program::DType_Name(dtype) +
            " are not supported";
    return false;
  }
}

/// The NCCL communicators of one process, by group (grid, axes), on the
/// GPU `device`.
class NcclGroups {
public:
  NcclGroups(Communicator &bootstrap, int device)
      : boot(bootstrap), device(device) {}
  ~NcclGroups() {
    if (!aborted)
      for (auto &entry : groups)
        api().ncclCommDestroy(entry.second);
  }

  /// The first communicator with an asynchronous error, described.
  bool asyncError(std::string &error) {
    // Aborted communicators (by the watchdog's thread) are not asked.
    if (aborted)
      return false;
    for (auto &[key, comm] : groups) {
      ncclResult_t state = ncclSuccess;
      if (api().ncclCommGetAsyncError(comm, &state) != ncclSuccess ||
          state == ncclSuccess || state == ncclInProgress)
        continue;
      error = std::string("NCCL reports an asynchronous error on the "
                          "communicator of ") +
              names[key] + ": " + api().ncclGetErrorString(state);
      if (const char *last = api().ncclGetLastError(comm); last && *last)
        error += std::string(" (") + last + ")";
      return true;
    }
    return false;
  }

  void abortAll() {
    std::lock_guard<std::mutex> lock(abortMutex);
    if (aborted)
      return;
    aborted = true;
    for (auto &entry : groups)
      api().ncclCommAbort(entry.second);
  }

  /// The group's communicator, made now if it is new (collective over the
  /// group: index 0 makes the unique id, the bootstrap broadcasts it).
  bool get(const std::vector<int64_t> &grid, const std::vector<int64_t> &axes,
           ncclComm_t &comm, std::string &error) {
    std::vector<int64_t> key = groupKey(grid, axes);
    auto it = groups.find(key);
    if (it == groups.end()) {
      int64_t points = 1;
      for (int64_t d : grid)
        points *= d;
      if (points != boot.size()) {
        error = "the program's device grid has " + std::to_string(points) +
                " devices but " + std::to_string(boot.size()) +
                " processes run it";
        return false;
      }
      ncclUniqueId id;
      int64_t me = groupIndex(grid, axes, boot.rank());
      if (me == 0 && !ncclOk(GPTC_WHERE(api().ncclGetUniqueId(&id)), error))
        return false;
      if (!boot.broadcast(&id, sizeof(id), grid, axes, error))
        return false;
      ncclComm_t made;
      if (!cudaOk(GPTC_WHERE(api().cudaSetDevice(device)), error) ||
          !ncclOk(GPTC_WHERE(api().ncclCommInitRank(
                      &made, static_cast<int>(groupSize(grid, axes)), id,
                      static_cast<int>(me))),
                  error))
        return false;
      it = groups.emplace(key, made).first;
      std::string ranks;
      for (int r : reductionGroup(grid, axes, boot.rank()))
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      names[key] = "ranks " + ranks;
    }
    comm = it->second;
    return true;
  }

  Communicator &boot;
  int device;

private:
  std::map<std::vector<int64_t>, ncclComm_t> groups;
  /// Each group's ranks, for messages.
  std::map<std::vector<int64_t>, std::string> names;
  std::mutex abortMutex;
  std::atomic<bool> aborted{false};
};

/// The GPU to use (localDeviceIndex).
bool pickDevice(const Communicator &boot, int &device, std::string &error) {
  int devices = 0;
  if (!cudaOk(GPTC_WHERE(api().cudaGetDeviceCount(&devices)), error))
    return false;
  if (devices == 0) {
    error = "no CUDA device for the NCCL communicator";
    return false;
  }
  device = localDeviceIndex(boot.rank(), devices);
  return true;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &bootstrap, int device)
      : groups(bootstrap, device) {}

  ~NcclCommunicator() override {
    if (scratch)
      api().cudaFree(scratch);
    if (stream)
      api().cudaStreamDestroy(stream);
  }

  bool start(std::string &error) {
    return cudaOk(GPTC_WHERE(api().cudaSetDevice(groups.device)), error) &&
           cudaOk(GPTC_WHERE(api().cudaStreamCreate(&stream)), error);
  }

  int rank() const override { return groups.boot.rank(); }
  int size() const override { return groups.boot.size(); }
  [[noreturn]] void abort(int code) override {
    groups.boot.abort(code);
    std::abort(); // not reached: MPI_Abort ends the process
  }

  bool allReduceSum(void *data, int64_t count, program::DType dtype,
                    const std::vector<int64_t> &grid,
                    const std::vector<int64_t> &axes,
                    std::string &error) override {
    return allReduce(data, count, dtype, grid, axes, ncclSum, error);
  }
  bool allReduceMax(void *data, int64_t count, program::DType dtype,
                    const std::vector<int64_t> &grid,
                    const std::vector<int64_t> &axes,
                    std::string &error) override {
    return allReduce(data, count, dtype, grid, axes, ncclMax, error);
  }

  bool broadcast(void *data, int64_t bytes, const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    return groups.boot.broadcast(data, bytes, grid, axes, error);
  }

  bool allGather(const void *in, void *out, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t n = groupSize(grid, axes), bytes = count * elementSize(dtype);
    if (!prepare(dtype, grid, axes, (n + 1) * bytes, comm, type, error))
      return false;
    char *send = static_cast<char *>(scratch), *recv = send + bytes;
    return cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      send, in, bytes, cudaMemcpyHostToDevice, stream)),
                  error) &&
           ncclOk(GPTC_WHERE(api().ncclAllGather(send, recv, count, type, comm,
                                                 stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      out, recv, n * bytes, cudaMemcpyDeviceToHost, stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaStreamSynchronize(stream)), error);
  }

  bool reduceScatterSum(const void *in, void *out, int64_t count,
                        program::DType dtype, const std::vector<int64_t> &grid,
                        const std::vector<int64_t> &axes,
                        std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t n = groupSize(grid, axes), bytes = count * elementSize(dtype);
    if (!prepare(dtype, grid, axes, (n + 1) * bytes, comm, type, error))
      return false;
    char *send = static_cast<char *>(scratch), *recv = send + n * bytes;
    return cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      send, in, n * bytes, cudaMemcpyHostToDevice, stream)),
                  error) &&
           ncclOk(GPTC_WHERE(api().ncclReduceScatter(send, recv, count, type,
                                                     ncclSum, comm, stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      out, recv, bytes, cudaMemcpyDeviceToHost, stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaStreamSynchronize(stream)), error);
  }

private:
  bool allReduce(void *data, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, ncclRedOp_t op,
                 std::string &error) {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t bytes = count * elementSize(dtype);
    if (!prepare(dtype, grid, axes, bytes, comm, type, error))
      return false;
    return cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      scratch, data, bytes, cudaMemcpyHostToDevice, stream)),
                  error) &&
           ncclOk(GPTC_WHERE(api().ncclAllReduce(scratch, scratch, count, type,
                                                 op, comm, stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaMemcpyAsync(
                      data, scratch, bytes, cudaMemcpyDeviceToHost, stream)),
                  error) &&
           cudaOk(GPTC_WHERE(api().cudaStreamSynchronize(stream)), error);
  }

  /// The group's communicator, the NCCL type and `bytes` of device
  /// scratch.
  bool prepare(program::DType dtype, const std::vector<int64_t> &grid,
               const std::vector<int64_t> &axes, int64_t bytes,
               ncclComm_t &comm, ncclDataType_t &type, std::string &error) {
    if (!ncclType(dtype, type, error) || !groups.get(grid, axes, comm, error))
      return false;
    if (static_cast<size_t>(bytes) > scratchBytes) {
      if (scratch)
        api().cudaFree(scratch);
      scratch = nullptr;
      scratchBytes = 0;
      if (!cudaOk(GPTC_WHERE(api().cudaMalloc(&scratch, bytes)), error))
        return false;
      scratchBytes = bytes;
    }
    return true;
  }

  NcclGroups groups;
  cudaStream_t stream = nullptr;
  void *scratch = nullptr;
  size_t scratchBytes = 0;
};

class NcclDeviceCollectives final : public DeviceCollectives {
public:
  NcclDeviceCollectives(Communicator &bootstrap, int device)
      : groups(bootstrap, device) {}

  int rank() const override { return groups.boot.rank(); }
  int size() const override { return groups.boot.size(); }

  bool prepareGroup(const std::vector<int64_t> &grid,
                    const std::vector<int64_t> &axes,
                    std::string &error) override {
    ncclComm_t comm;
    return groups.get(grid, axes, comm, error);
  }

  bool allReduce(const void *in, void *out, int64_t count, program::DType dtype,
                 bool maximum, const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, void *stream,
                 std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    return resolve(dtype, grid, axes, comm, type, error) &&
           ncclOk(GPTC_WHERE(api().ncclAllReduce(
                      in, out, static_cast<size_t>(count), type,
                      maximum ? ncclMax : ncclSum, comm,
                      static_cast<cudaStream_t>(stream))),
                  error);
  }

  bool beginGroup(std::string &error) override {
    return ncclOk(GPTC_WHERE(api().ncclGroupStart()), error);
  }
  bool endGroup(std::string &error) override {
    return ncclOk(GPTC_WHERE(api().ncclGroupEnd()), error);
  }

  bool allGather(const void *in, void *out, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, void *stream,
                 std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    return resolve(dtype, grid, axes, comm, type, error) &&
           ncclOk(GPTC_WHERE(api().ncclAllGather(
                      in, out, static_cast<size_t>(count), type, comm,
                      static_cast<cudaStream_t>(stream))),
                  error);
  }

  bool reduceScatter(const void *in, void *out, int64_t count,
                     program::DType dtype, const std::vector<int64_t> &grid,
                     const std::vector<int64_t> &axes, void *stream,
                     std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    return resolve(dtype, grid, axes, comm, type, error) &&
           ncclOk(GPTC_WHERE(api().ncclReduceScatter(
                      in, out, static_cast<size_t>(count), type, ncclSum, comm,
                      static_cast<cudaStream_t>(stream))),
                  error);
  }

  bool asyncError(std::string &error) override {
    return groups.asyncError(error);
  }
  void abortAll() override { groups.abortAll(); }

private:
  /// The NCCL type of `dtype` and the group's communicator.
  bool resolve(program::DType dtype, const std::vector<int64_t> &grid,
               const std::vector<int64_t> &axes, ncclComm_t &comm,
               ncclDataType_t &type, std::string &error) {
    return ncclType(dtype, type, error) && groups.get(grid, axes, comm, error);
  }

  NcclGroups groups;
};

} // namespace

std::unique_ptr<Communicator>
runtime::createNcclCommunicator(Communicator &bootstrap, std::string &error) {
  int device;
  if (!pickDevice(bootstrap, device, error))
    return nullptr;
  auto comm = std::make_unique<NcclCommunicator>(bootstrap, device);
  if (!comm->start(error))
    return nullptr;
  return comm;
}

std::unique_ptr<DeviceCollectives>
runtime::createNcclDeviceCollectives(Communicator &bootstrap, int device,
                                     std::string &error) {
  return std::make_unique<NcclDeviceCollectives>(bootstrap, device);
}
