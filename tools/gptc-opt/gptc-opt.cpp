//===- gptc-opt.cpp - gptc's mlir-opt -------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with gptc's dialect, its passes and pipelines, and the curated
// upstream dialects and passes gptc uses. Everything MlirOptMain offers
// (--split-input-file, --verify-diagnostics, --mlir-print-ir-after-all,
// crash reproducers, ...) works as in mlir-opt.
//
//===----------------------------------------------------------------------===//

#include "gptc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  // Before MlirOptMain registers its own options, which stay visible.
  mlir::gptc::hideUnrelatedCommandLineOptions();
  mlir::gptc::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::gptc::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "gptc optimizer driver\n", registry));
}
