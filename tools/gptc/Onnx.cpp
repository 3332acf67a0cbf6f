//===- Onnx.cpp - gptc MODEL.onnx ------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc MODEL.onnx --emit=mlir [--onnx-dim NAME=N]...`: the imported graph
// (docs/Onnx.md). Training and the other --emit kinds read descriptions
// only, so far.
//
//===----------------------------------------------------------------------===//

#include "Onnx.h"

#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::OptionCategory onnxCategory("gptc ONNX options");
static cl::opt<bool> onnxTraining(
    "onnx-training",
    cl::desc("With --emit=mlir: the graph as gptc train compiles it (the "
             "exported layers raised to gptc's ops, tokens, labels, the "
             "loss as the result)"),
    cl::init(false), cl::cat(onnxCategory));
static cl::list<std::string>
    onnxDims("onnx-dim",
             cl::desc("NAME=N: the size of an ONNX model's symbolic dimension "
                      "(dim_param), e.g. --onnx-dim batch=8"),
             cl::cat(onnxCategory));

static cl::opt<bool> onnxRaise(
    "onnx-raise",
    cl::desc("Training an ONNX model: raise its exported layers to gptc's "
             "fused ops (linear, attention, GELU, layer norm; default). "
             "--onnx-raise=0 trains ONNX's primitives as they are: unfused, "
             "and unsharded by tensor parallelism"),
    cl::init(true), cl::cat(onnxCategory));

bool mlir::gptc::getOnnxImportOptions(OnnxImportOptions &options) {
  options.raiseLayers = onnxRaise;
  std::string error;
  for (const std::string &dim : onnxDims)
    if (!parseOnnxDim(dim, options, error)) {
      llvm::errs() << "gptc: " << error << "\n";
      return false;
    }
  return true;
}

FailureOr<OnnxImport>
mlir::gptc::importOnnxForTraining(llvm::StringRef path, MLIRContext &context,
                                  OnnxTrainingShape &shape) {
  OnnxImportOptions options;
  if (!getOnnxImportOptions(options))
    return failure();
  return importOnnxFileForTraining(path, &context, options, shape);
}

int mlir::gptc::runOnnx(llvm::StringRef inputFilename,
                        llvm::StringRef outputFilename,
                        DialectRegistry &registry) {
  OnnxImportOptions options;
  if (!getOnnxImportOptions(options))
    return 1;
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openBoundedInput(inputFilename, kMaxOnnxBytes, "ONNX model", error);
  if (!input) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  FailureOr<OnnxImport> imported =
      importOnnxModel(input->getBuffer(), inputFilename, &context, options);
  if (failed(imported))
    return 1;
  if (onnxTraining && failed(prepareOnnxForTraining(*imported)))
    return 1;
  auto output = OutputFile::open(outputFilename, error);
  if (!output) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  imported->module->print(output->os());
  if (!output->finish(error)) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  return 0;
}
