//===- Onnx.h - gptc MODEL.onnx --------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_ONNX_H
#define GPTC_TOOLS_GPTC_ONNX_H

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::gptc {

/// `gptc MODEL.onnx`: imports the model and prints it (--emit=mlir).
int runOnnx(llvm::StringRef inputFilename, bool emitMlir,
            llvm::StringRef outputFilename, DialectRegistry &registry);

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_ONNX_H
