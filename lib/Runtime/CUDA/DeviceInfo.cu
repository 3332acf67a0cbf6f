//===- DeviceInfo.cu - What gptc's runtime sees of the GPUs ---*- CUDA -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Device queries and a launch probe. Compiled for sm_90 (Hopper) with nvcc;
// the probe kernel is the smallest proof that a device runs code built by
// gptc's toolchain, and test/Runtime/cuda-sm90.test checks its PTX target.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/DeviceInfo.h"

#include <cuda_runtime.h>

#include <vector>

namespace gptc::cuda {

/// Writes each thread's global index into `out[0..n)`.
__global__ void probeKernel(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = i;
}

/// Formats a CUDA version number (12040 -> "12.4").
static std::string formatVersion(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string runtimeVersion() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? formatVersion(v) : "?";
}

std::string driverVersion() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess && v ? formatVersion(v)
                                                      : "none";
}

std::vector<DeviceInfo> queryDevices(std::string &error) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    error = cudaGetErrorString(status);
    return devices;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    status = cudaGetDeviceProperties(&p, d);
    if (status != cudaSuccess) {
      error = cudaGetErrorString(status);
      return {};
    }
    DeviceInfo info;
    info.index = d;
    info.name = p.name;
    info.computeMajor = p.major;
    info.computeMinor = p.minor;
    info.multiprocessors = p.multiProcessorCount;
    info.globalMemoryBytes = static_cast<int64_t>(p.totalGlobalMem);
    info.sharedMemoryPerBlockOptin =
        static_cast<int64_t>(p.sharedMemPerBlockOptin);
    info.l2CacheBytes = p.l2CacheSize;
    info.memoryBusWidthBits = p.memoryBusWidth;
    devices.push_back(info);
  }
  return devices;
}

bool probeDevice(int device, std::string &error) {
  constexpr int n = 1 << 16;
  int *buffer = nullptr;
  std::vector<int> host(n, -1);
  auto failed = [&](cudaError_t status) {
    error = cudaGetErrorString(status);
    if (buffer)
      cudaFree(buffer);
    return false;
  };
  cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess)
    return failed(status);
  if ((status = cudaMalloc(&buffer, n * sizeof(int))) != cudaSuccess)
    return failed(status);
  probeKernel<<<(n + 255) / 256, 256>>>(buffer, n);
  if ((status = cudaGetLastError()) != cudaSuccess)
    return failed(status);
  if ((status = cudaMemcpy(host.data(), buffer, n * sizeof(int),
                           cudaMemcpyDeviceToHost)) != cudaSuccess)
    return failed(status);
  cudaFree(buffer);
  for (int i = 0; i < n; ++i)
    if (host[i] != i) {
      error = "probe kernel wrote " + std::to_string(host[i]) + " at " +
              std::to_string(i);
      return false;
    }
  return true;
}

} // namespace gptc::cuda
