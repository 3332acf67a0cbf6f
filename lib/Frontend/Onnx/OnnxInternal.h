//===- OnnxInternal.h - Helpers shared by the ONNX frontend ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_FRONTEND_ONNX_ONNXINTERNAL_H
#define GPTC_LIB_FRONTEND_ONNX_ONNXINTERNAL_H

#include "mlir/IR/Block.h"

namespace mlir::gptc::onnx_detail {

/// Erases the pure ops of `body` whose results nothing reads, until none is
/// left (what a rewrite of the imported function leaves behind).
void eraseDeadOps(Block &body);

} // namespace mlir::gptc::onnx_detail

#endif // GPTC_LIB_FRONTEND_ONNX_ONNXINTERNAL_H
