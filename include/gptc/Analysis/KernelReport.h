//===- KernelReport.h - The generated kernels of a step --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `gptc --emit=kernels` prints: each gptc.kernel of a function with
// the ops it fuses and their locations in the model description, its
// FLOPs, the bytes it reads and writes, and the bytes of the values that
// stay inside it (which an op-by-op runtime would write and read back).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_KERNELREPORT_H
#define GPTC_ANALYSIS_KERNELREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::gptc {

struct KernelInfo {
  std::string name;
  /// "gelu_grad @ model.pbtxt:12:3 (h.0.mlp)" per fused op.
  std::vector<std::string> ops;
  /// The transformer block the kernel belongs to (from the `h.<i>.`
  /// names of its ops' locations), or -1.
  int64_t layer = -1;
  int64_t flops = 0;
  /// Bytes of the operands and results (what the kernel moves).
  int64_t bytes = 0;
  /// Bytes of the values computed and consumed inside the kernel.
  int64_t internalBytes = 0;
};

/// The kernels of `func` in program order (those of gptc.accumulate
/// regions included).
std::vector<KernelInfo> collectKernels(func::FuncOp func);

/// Prints `func`'s kernels and totals: ops fused, kernels per block.
void printKernelReport(func::FuncOp func, raw_ostream &os);

/// "file:line:col (name)" of a location; fused locations give each part.
std::string describeLocation(Location loc);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_KERNELREPORT_H
