//===- Device.h - What runs a step ------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The device kinds, one type from the compiler's options (the driver's
// CompileOptions) to the runtime's backends and gptc-runtime's --device;
// no compiler headers, so that the runtime alone uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DEVICE_H
#define GPTC_RUNTIME_DEVICE_H

#include <optional>
#include <string>

namespace gptc::runtime {

/// What runs the step.
enum class DeviceKind {
  /// The CPU: kernels through linalg and LLVM, GEMMs by oneDNN.
  CPU,
  /// An NVIDIA GPU per process: an sm_XY cubin, cuBLASLt, NCCL.
  CUDA,
  /// The GPU runtime on the virtual CUDA device (CPU stand-ins of CUDA,
  /// cuBLASLt and NCCL that check every access; the kernels as host code).
  VirtualCUDA,
};

/// "cpu", "cuda", "virtual-cuda"; nullopt for anything else.
inline std::optional<DeviceKind> parseDeviceKind(const std::string &name) {
  if (name == "cpu")
    return DeviceKind::CPU;
  if (name == "cuda")
    return DeviceKind::CUDA;
  if (name == "virtual-cuda")
    return DeviceKind::VirtualCUDA;
  return std::nullopt;
}

inline const char *deviceKindName(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::CPU:
    return "cpu";
  case DeviceKind::CUDA:
    return "cuda";
  case DeviceKind::VirtualCUDA:
    return "virtual-cuda";
  }
  return "cpu";
}

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_DEVICE_H
