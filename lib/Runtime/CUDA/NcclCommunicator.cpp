//===- NcclCommunicator.cpp - Collectives over NCCL ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/NcclCommunicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>

using namespace gptc;
using namespace gptc::runtime;

namespace {
class NcclCommunicator final : public Communicator {
public:
  explicit NcclCommunicator(Communicator &bootstrap) : boot(bootstrap) {}

  ~NcclCommunicator() override {
    for (auto &entry : groups)
      ncclCommDestroy(entry.second);
    if (scratch)
      cudaFree(scratch);
    if (stream)
      cudaStreamDestroy(stream);
  }

  /// Picks the GPU and makes the stream.
  bool start(std::string &error) {
    int devices = 0;
    if (!cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", error))
      return false;
    if (devices == 0) {
      error = "no CUDA device for the NCCL communicator";
      return false;
    }
    int local = boot.rank();
    if (const char *id = std::getenv("MPI_LOCALRANKID"))
      local = std::atoi(id);
    device = local % devices;
    return cuda(cudaSetDevice(device), "cudaSetDevice", error) &&
           cuda(cudaStreamCreate(&stream), "cudaStreamCreate", error);
  }

  int rank() const override { return boot.rank(); }
  int size() const override { return boot.size(); }
  [[noreturn]] void abort(int code) override {
    boot.abort(code);
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
    return boot.broadcast(data, bytes, grid, axes, error);
  }

  bool allGather(const void *in, void *out, int64_t count,
                 program::DType dtype, const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t n = groupSize(grid, axes), bytes = count * width(dtype);
    if (!prepare(dtype, grid, axes, (n + 1) * bytes, comm, type, error))
      return false;
    char *send = static_cast<char *>(scratch), *recv = send + bytes;
    return cuda(cudaMemcpyAsync(send, in, bytes, cudaMemcpyHostToDevice,
                                stream),
                "cudaMemcpyAsync", error) &&
           nccl(ncclAllGather(send, recv, count, type, comm, stream),
                "ncclAllGather", error) &&
           cuda(cudaMemcpyAsync(out, recv, n * bytes, cudaMemcpyDeviceToHost,
                                stream),
                "cudaMemcpyAsync", error) &&
           cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", error);
  }

  bool reduceScatterSum(const void *in, void *out, int64_t count,
                        program::DType dtype, const std::vector<int64_t> &grid,
                        const std::vector<int64_t> &axes,
                        std::string &error) override {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t n = groupSize(grid, axes), bytes = count * width(dtype);
    if (!prepare(dtype, grid, axes, (n + 1) * bytes, comm, type, error))
      return false;
    char *send = static_cast<char *>(scratch), *recv = send + n * bytes;
    return cuda(cudaMemcpyAsync(send, in, n * bytes, cudaMemcpyHostToDevice,
                                stream),
                "cudaMemcpyAsync", error) &&
           nccl(ncclReduceScatter(send, recv, count, type, ncclSum, comm,
                                  stream),
                "ncclReduceScatter", error) &&
           cuda(cudaMemcpyAsync(out, recv, bytes, cudaMemcpyDeviceToHost,
                                stream),
                "cudaMemcpyAsync", error) &&
           cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", error);
  }

private:
  static int64_t width(program::DType dtype) {
    return dtype == program::F64 || dtype == program::I64 ? 8 : 4;
  }

  bool allReduce(void *data, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, ncclRedOp_t op,
                 std::string &error) {
    ncclComm_t comm;
    ncclDataType_t type;
    int64_t bytes = count * width(dtype);
    if (!prepare(dtype, grid, axes, bytes, comm, type, error))
      return false;
    return cuda(cudaMemcpyAsync(scratch, data, bytes, cudaMemcpyHostToDevice,
                                stream),
                "cudaMemcpyAsync", error) &&
           nccl(ncclAllReduce(scratch, scratch, count, type, op, comm, stream),
                "ncclAllReduce", error) &&
           cuda(cudaMemcpyAsync(data, scratch, bytes, cudaMemcpyDeviceToHost,
                                stream),
                "cudaMemcpyAsync", error) &&
           cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", error);
  }

  /// The NCCL communicator of the group over `axes` (made once: group
  /// index 0 makes the unique id, the bootstrap broadcasts it), the NCCL
  /// type, and `bytes` of device scratch.
  bool prepare(program::DType dtype, const std::vector<int64_t> &grid,
               const std::vector<int64_t> &axes, int64_t bytes,
               ncclComm_t &comm, ncclDataType_t &type, std::string &error) {
    switch (dtype) {
    case program::F32: type = ncclFloat32; break;
    case program::F64: type = ncclFloat64; break;
    case program::I32: type = ncclInt32; break;
    case program::I64: type = ncclInt64; break;
    default:
      error = "NCCL collectives of this element type are not supported";
      return false;
    }
    std::vector<int64_t> key = groupKey(grid, axes);
    auto it = groups.find(key);
    if (it == groups.end()) {
      ncclUniqueId id;
      int64_t me = groupIndex(grid, axes, boot.rank());
      if (me == 0 && !nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", error))
        return false;
      if (!boot.broadcast(&id, sizeof(id), grid, axes, error))
        return false;
      ncclComm_t made;
      if (!nccl(ncclCommInitRank(&made,
                                 static_cast<int>(groupSize(grid, axes)), id,
                                 static_cast<int>(me)),
                "ncclCommInitRank", error))
        return false;
      it = groups.emplace(key, made).first;
    }
    comm = it->second;
    if (static_cast<size_t>(bytes) > scratchBytes) {
      if (scratch)
        cudaFree(scratch);
      scratch = nullptr;
      scratchBytes = 0;
      if (!cuda(cudaMalloc(&scratch, bytes), "cudaMalloc", error))
        return false;
      scratchBytes = bytes;
    }
    return true;
  }

  static bool cuda(cudaError_t rc, const char *what, std::string &error) {
    if (rc == cudaSuccess)
      return true;
    error = std::string(what) + " failed: " + cudaGetErrorString(rc);
    return false;
  }
  static bool nccl(ncclResult_t rc, const char *what, std::string &error) {
    if (rc == ncclSuccess)
      return true;
    error = std::string(what) + " failed: " + ncclGetErrorString(rc);
    return false;
  }

  Communicator &boot;
  int device = 0;
  cudaStream_t stream = nullptr;
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  std::map<std::vector<int64_t>, ncclComm_t> groups;
};
} // namespace

std::unique_ptr<Communicator>
runtime::createNcclCommunicator(Communicator &bootstrap, std::string &error) {
  auto comm = std::make_unique<NcclCommunicator>(bootstrap);
  if (!comm->start(error))
    return nullptr;
  return comm;
}
