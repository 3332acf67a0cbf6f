//===- Passes.h - gptc conversion passes -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_CONVERSION_PASSES_H
#define GPTC_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace gptc {

#define GEN_PASS_DECL
#include "gptc/Conversion/Passes.h.inc"

/// Elementwise ops (add, gelu, gelu_grad, cast) to linalg.generic.
void populateGptcElementwiseToLinalgPatterns(RewritePatternSet &patterns);

/// Whether `op` is a gptc op with a lowering to linalg (the ops
/// gptc-form-kernels may put into a kernel).
bool hasLinalgLowering(Operation *op);

#define GEN_PASS_REGISTRATION
#include "gptc/Conversion/Passes.h.inc"

} // namespace gptc
} // namespace mlir

#endif // GPTC_CONVERSION_PASSES_H
