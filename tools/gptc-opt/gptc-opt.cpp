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

#include <vector>

int main(int argc, char **argv) {
  // Before MlirOptMain registers its own options, which stay visible.
  mlir::gptc::hideUnrelatedCommandLineOptions();
  mlir::gptc::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::gptc::registerAllDialects(registry);
  // A diagnostic names its op by location, not by printing the function
  // around it: --mlir-print-op-on-diagnostic is off unless given (a later
  // occurrence on the command line wins).
  std::vector<char *> args(argv, argv + argc);
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  args.insert(args.begin() + (argc > 0 ? 1 : 0), quiet);
  args.push_back(nullptr);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(static_cast<int>(args.size()) - 1, args.data(),
                        "gptc optimizer driver\n", registry));
}
