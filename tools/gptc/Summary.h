//===- Summary.h - gptc --emit=summary -------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_SUMMARY_H
#define GPTC_TOOLS_GPTC_SUMMARY_H

#include "gptc/Driver/Driver.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir::gptc {
class ModelDescription;

/// Prints the size, cost and per-device memory of a model: the closed-form
/// figures and, as a cross-check, the ones counted from its IR `module`.
LogicalResult printSummary(const ModelDescription &description, ModuleOp module,
                           const CompileOptions &options, raw_ostream &os);
} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_SUMMARY_H
