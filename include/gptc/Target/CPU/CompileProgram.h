//===- CompileProgram.h - A module to a runnable CPU artifact --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CPU_COMPILEPROGRAM_H
#define GPTC_TARGET_CPU_COMPILEPROGRAM_H

#include "gptc/Runtime/program.pb.h"
#include "gptc/Target/CPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::gptc {

/// The module's kernels (gptc.kernel ops) compiled into one shared object:
/// gptc-outline-kernels, gptc-kernel-lowering-pipeline, LLVM. Empty when
/// the module has no kernel.
FailureOr<std::string>
compileModuleKernels(ModuleOp module, const CpuCodegenOptions &options = {});

/// exportProgram, plus the kernel library of the module's kernels.
LogicalResult compileProgram(ModuleOp module, ArrayRef<StringRef> functions,
                             ::gptc::program::Program &program,
                             const CpuCodegenOptions &options = {});

} // namespace mlir::gptc

#endif // GPTC_TARGET_CPU_COMPILEPROGRAM_H
