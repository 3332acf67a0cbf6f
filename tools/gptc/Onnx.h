//===- Onnx.h - gptc MODEL.onnx --------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_ONNX_H
#define GPTC_TOOLS_GPTC_ONNX_H

#include "gptc/Frontend/OnnxImporter.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::gptc {

/// `gptc MODEL.onnx --emit=mlir`: imports the model and prints it (with
/// --onnx-training, as gptc train compiles it). The other --emit kinds
/// compile it through a description naming it (gptc.cpp).
int runOnnx(llvm::StringRef inputFilename, llvm::StringRef outputFilename,
            DialectRegistry &registry);

/// The import options of the command line (--onnx-dim); false after
/// printing an error.
bool getOnnxImportOptions(OnnxImportOptions &options);

/// Reads and imports the ONNX model at `path` (with --onnx-dim) and
/// rewrites it for training (prepareOnnxForTraining); errors are reported
/// through `context`'s diagnostics.
FailureOr<OnnxImport> importOnnxForTraining(llvm::StringRef path,
                                            MLIRContext &context,
                                            OnnxTrainingShape &shape);

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_ONNX_H
