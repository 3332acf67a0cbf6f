//===- HardwareDescription.cpp - Hardware descriptions ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/HardwareDescription.h"

#include "gptc/Frontend/TextProto.h"
#include "gptc/Frontend/hardware.pb.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::gptc;
namespace hwpb = ::gptc::hardware;

/// 1.5 -> "1.5", 3.35e12 -> "3.35e+12".
static std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", x);
  return buffer;
}

const std::vector<std::pair<std::string, std::string>> &
mlir::gptc::hardwarePresets() {
  static const std::vector<std::pair<std::string, std::string>> presets = {
#include "HardwarePresets.inc"
  };
  return presets;
}

FailureOr<HardwareSpec> mlir::gptc::parseHardware(llvm::SourceMgr &sourceMgr,
                                                  MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  TextProtoSource source(buffer->getBuffer(), buffer->getBufferIdentifier(),
                         context);
  hwpb::Hardware msg;
  if (failed(source.parse(msg, "the hardware description")))
    return failure();
  bool failedAny = false;
  auto error = [&](ArrayRef<FieldRef> path) {
    failedAny = true;
    return emitError(source.locate(hwpb::Hardware::descriptor(), path));
  };
  HardwareSpec hw;
  hw.name = msg.has_name() && !msg.name().empty()
                ? msg.name()
                : llvm::sys::path::stem(source.getFileName()).str();
  if (!msg.has_devices_per_node())
    error({}) << "missing required field 'devices_per_node'";
  else if (msg.devices_per_node() < 1)
    error({{"devices_per_node"}})
        << "'devices_per_node' must be >= 1, got " << msg.devices_per_node();
  hw.devicesPerNode = msg.devices_per_node();
  if (msg.has_nodes() && msg.nodes() < 1)
    error({{"nodes"}}) << "'nodes' must be >= 1, got " << msg.nodes();
  hw.nodes = msg.nodes();
  // A finite number in (low, high] (or [low, high] with `closed`).
  auto inRange = [&](double x, double low, double high, bool closed) {
    return std::isfinite(x) && (closed ? x >= low : x > low) && x <= high;
  };
  if (!msg.has_device()) {
    error({}) << "missing required field 'device'";
  } else {
    const hwpb::Device &dev = msg.device();
    hw.deviceName = dev.name().empty() ? "device" : dev.name();
    if (!dev.has_memory_bytes())
      error({{"device"}}) << "missing required field 'device.memory_bytes'";
    else if (dev.memory_bytes() < 1)
      error({{"device"}, {"memory_bytes"}})
          << "'memory_bytes' must be positive, got " << dev.memory_bytes();
    hw.memoryBytes = dev.memory_bytes();
    const char *names[] = {"peak_flops_fp32", "peak_flops_bf16",
                           "peak_flops_fp16"};
    double peaks[] = {dev.peak_flops_fp32(), dev.peak_flops_bf16(),
                      dev.peak_flops_fp16()};
    for (int i = 0; i < 3; ++i) {
      if (!inRange(peaks[i], 0, 1e30, /*closed=*/true))
        error({{"device"}, {names[i]}})
            << "'" << names[i] << "' must be a FLOP/s figure >= 0, got "
            << num(peaks[i]);
      hw.peakFlops[i] = peaks[i];
    }
    if (peaks[0] <= 0 && peaks[1] <= 0 && peaks[2] <= 0)
      error({{"device"}}) << "the device needs a peak FLOP/s figure "
                             "(peak_flops_fp32, _bf16 or _fp16)";
    // An optional figure: kept when given and in range, an error at it
    // otherwise.
    auto optional = [&](bool given, double value, StringRef field, double low,
                        bool closed, double high, StringRef range,
                        double &out) {
      if (!given)
        return;
      out = value;
      if (!inRange(value, low, high, closed))
        error({{"device"}, {field}})
            << "'" << field << "' must be " << range << ", got " << num(value);
    };
    optional(dev.has_gemm_efficiency(), dev.gemm_efficiency(),
             "gemm_efficiency", 0, false, 1, "in (0, 1]", hw.gemmEfficiency);
    optional(dev.has_usable_memory(), dev.usable_memory(), "usable_memory", 0,
             false, 1, "in (0, 1]", hw.usableMemory);
    optional(dev.has_gemm_half_flops(), dev.gemm_half_flops(),
             "gemm_half_flops", 0, true, 1e30, ">= 0", hw.gemmHalfFlops);
    if (!dev.has_memory_bandwidth())
      error({{"device"}}) << "missing required field 'device.memory_bandwidth'";
    else if (!inRange(dev.memory_bandwidth(), 0, 1e30, false))
      error({{"device"}, {"memory_bandwidth"}})
          << "'memory_bandwidth' must be positive, got "
          << num(dev.memory_bandwidth());
    hw.memoryBandwidth = dev.memory_bandwidth();
  }
  auto link = [&](const hwpb::Link &l, StringRef field, LinkSpec &out) {
    if (!l.has_bandwidth())
      error({{field}}) << "missing required field '" << field << ".bandwidth'";
    else if (!inRange(l.bandwidth(), 0, 1e30, false))
      error({{field}, {"bandwidth"}})
          << "'bandwidth' must be positive (bytes/s), got "
          << num(l.bandwidth());
    if (!inRange(l.latency(), 0, 1e6, /*closed=*/true))
      error({{field}, {"latency"}})
          << "'latency' must be >= 0 seconds, got " << num(l.latency());
    out = {l.bandwidth(), l.latency()};
  };
  if (!msg.has_intra_node())
    error({}) << "missing required field 'intra_node'";
  else
    link(msg.intra_node(), "intra_node", hw.intraNode);
  if (msg.has_inter_node()) {
    link(msg.inter_node(), "inter_node", hw.interNode);
    hw.hasInterNode = true;
  }
  if (failedAny)
    return failure();
  return hw;
}
