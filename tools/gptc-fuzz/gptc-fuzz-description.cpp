//===- gptc-fuzz-description.cpp - Fuzzing model descriptions ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A model description (.pbtxt) from untrusted bytes: parsed and validated,
// and when valid, imported to IR and verified. Errors are diagnostics;
// nothing may crash, overflow or read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdint>
#include <cstring>

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
  // Diagnostics are the expected outcome of most inputs: swallowed.
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(text, "fuzz.pbtxt", context);
  if (failed(desc))
    return 0;
  // Importing builds IR whose size grows with the layers; big valid
  // models take long without testing anything new.
  const ModelConfig &m = desc->getConfig();
  if (m.numLayers > 8)
    return 0;
  OwningOpRef<ModuleOp> module = importModel(*desc, context);
  if (module)
    (void)verify(*module);
  return 0;
}
