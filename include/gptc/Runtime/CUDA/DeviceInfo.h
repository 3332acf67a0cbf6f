//===- DeviceInfo.h - What gptc's runtime sees of the GPUs -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_DEVICEINFO_H
#define GPTC_RUNTIME_CUDA_DEVICEINFO_H

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::cuda {

/// The properties of one device that gptc's runtime and cost model use.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  int multiprocessors = 0;
  int64_t globalMemoryBytes = 0;
  int64_t sharedMemoryPerBlockOptin = 0;
  int l2CacheBytes = 0;
  int memoryBusWidthBits = 0;
};

/// Returns the visible devices (empty when there is no driver or no GPU;
/// `error` then says why).
std::vector<DeviceInfo> queryDevices(std::string &error);

/// Launches a kernel on `device` that writes each thread's global index and
/// checks the result on the host: true when the device runs gptc's code.
bool probeDevice(int device, std::string &error);

/// The CUDA runtime and driver versions as "major.minor".
std::string runtimeVersion();
std::string driverVersion();

} // namespace gptc::cuda

#endif // GPTC_RUNTIME_CUDA_DEVICEINFO_H
