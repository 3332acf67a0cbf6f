//===- gptc-device-info.cpp - The GPUs gptc's runtime sees -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Prints the CUDA runtime/driver and NCCL versions and every visible device,
// then runs a probe kernel on each. Exit code 0 when at least one device ran
// the probe, 1 otherwise (no driver, no device, or a failed launch).
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/DeviceInfo.h"

#include <nccl.h>

#include <cstdio>

int main() {
  using namespace gptc::cuda;
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::printf("CUDA runtime %s, driver %s, NCCL %d.%d.%d\n",
              runtimeVersion().c_str(), driverVersion().c_str(), nccl / 10000,
              (nccl % 10000) / 100, nccl % 100);
  std::string error;
  std::vector<DeviceInfo> devices = queryDevices(error);
  if (devices.empty()) {
    std::printf("no CUDA device: %s\n",
                error.empty() ? "none visible" : error.c_str());
    return 1;
  }
  int probed = 0;
  for (const DeviceInfo &d : devices) {
    std::printf("device %d: %s, compute capability %d.%d, %d SMs, "
                "%.1f GiB, %.0f KiB shared/block, %.0f MiB L2\n",
                d.index, d.name.c_str(), d.computeMajor, d.computeMinor,
                d.multiprocessors, d.globalMemoryBytes / 1073741824.0,
                d.sharedMemoryPerBlockOptin / 1024.0,
                d.l2CacheBytes / 1048576.0);
    bool ok = probeDevice(d.index, error);
    std::printf("device %d: probe kernel %s%s\n", d.index,
                ok ? "ran" : "FAILED: ", ok ? "" : error.c_str());
    probed += ok;
  }
  return probed > 0 ? 0 : 1;
}
