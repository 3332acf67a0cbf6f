//===- gptc-fuzz-onnx.cpp - Fuzzing the ONNX importer ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// An ONNX model from untrusted bytes: parsed, imported, the result
// verified and rewritten as gptc train takes it (prepareOnnxForTraining:
// the layers raised, the loss found); also read as a TensorProto (the test
// data's .pb files). Errors
// are diagnostics; nothing may crash, overflow, read out of bounds or
// allocate what a malformed shape asks for.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>

using namespace mlir;
using namespace mlir::gptc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registerAllDialects(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  OnnxImportOptions options;
  options.dims["batch"] = 2;
  // The bytes come from no file: nothing beside them to read.
  options.readExternalData = false;
  // The importer verifies what it builds.
  // Imported, then as gptc train takes it (the layers raised, tokens,
  // labels and the loss found).
  FailureOr<OnnxImport> imported =
      importOnnxModel(bytes, "fuzz.onnx", context, options);
  if (succeeded(imported))
    (void)prepareOnnxForTraining(*imported);
  OnnxTensorData tensor;
  std::string error;
  (void)parseOnnxTensor(bytes, tensor, error);
  return 0;
}
