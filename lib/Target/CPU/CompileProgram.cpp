//===- CompileProgram.cpp - A module to a runnable CPU artifact -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The last step of every driver: the program's kernels are outlined from a
// copy of the module (the program itself is not changed), lowered and
// compiled, and the shared object travels in the artifact.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CPU/CompileProgram.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Target/ExportProgram.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::gptc;

FailureOr<std::string>
mlir::gptc::compileModuleKernels(ModuleOp module,
                                 const CpuCodegenOptions &options) {
  bool any = false;
  module.walk([&](KernelOp) {
    any = true;
    return WalkResult::interrupt();
  });
  if (!any)
    return std::string();
  // 1. The kernel functions, in a module of their own.
  FailureOr<OwningOpRef<ModuleOp>> kernels = outlineKernelModule(module);
  if (failed(kernels))
    return failure();
  // 2. LLVM dialect, then machine code.
  PassManager lower(module.getContext());
  buildKernelLoweringPipeline(lower);
  if (failed(lower.run(**kernels)))
    return failure();
  return compileKernelsToSharedObject(**kernels, options);
}

LogicalResult mlir::gptc::compileProgram(ModuleOp module,
                                         ArrayRef<StringRef> functions,
                                         ::gptc::program::Program &program,
                                         const CpuCodegenOptions &options) {
  if (failed(exportProgram(module, functions, program)))
    return failure();
  // Only the exported functions' kernels go into the library, one function
  // per distinct body (the symbols exportProgram wrote).
  OwningOpRef<ModuleOp> exported = cloneExported(module, functions);
  FailureOr<std::string> library = compileModuleKernels(*exported, options);
  if (failed(library))
    return failure();
  program.set_kernel_library(std::move(*library));
  return success();
}
