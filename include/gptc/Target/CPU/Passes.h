//===- Passes.h - gptc CPU code generation ---------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CPU target: the passes that turn kernel functions into LLVM dialect
// with the runtime's entry points, and the code generator that compiles
// that module ahead of time into a shared object the runtime loads.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CPU_PASSES_H
#define GPTC_TARGET_CPU_PASSES_H

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mlir {
class OpPassManager;
namespace gptc {

#define GEN_PASS_DECL
#include "gptc/Target/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gptc/Target/CPU/Passes.h.inc"

/// The tensor stage every target's kernel lowering starts with, on each
/// kernel function: gptc -> linalg (`full`), elementwise fusion,
/// canonicalization and the kernel ABI, with the begin, end row range the
/// CPU runtime splits over its threads or (`rowRange` false: the GPU)
/// without it.
void buildKernelTensorStage(OpPassManager &pm, bool rowRange);

/// The kernel lowering pipeline, on a module of kernel functions (what
/// gptc-outline-kernels builds): gptc -> linalg, elementwise fusion, the
/// kernel ABI, bufferization, loops, the parallel range, LLVM dialect and
/// the entry points. Registered as `gptc-kernel-lowering-pipeline`.
void buildKernelLoweringPipeline(OpPassManager &pm);

/// Code generation options.
struct CpuCodegenOptions {
  /// LLVM CPU name; empty: the host's (with its features).
  std::string cpu;
  /// LLVM optimization level, 0-3.
  int optLevel = 3;
};

/// Compiles `kernels` (a module in the LLVM dialect, as the lowering
/// pipeline leaves it) to a shared object: LLVM IR, optimized and
/// vectorized for the CPU, an object file, linked with the system's C
/// compiler driver (`cc -shared`). Returns the shared object's bytes, or
/// fails with a diagnostic at `kernels`.
FailureOr<std::string>
compileKernelsToSharedObject(ModuleOp kernels,
                             const CpuCodegenOptions &options = {});

/// The LLVM IR of `kernels` (for --emit=llvm and tests), optimized as
/// compileKernelsToSharedObject would.
FailureOr<std::string>
translateKernelsToLLVMIR(ModuleOp kernels,
                         const CpuCodegenOptions &options = {});

} // namespace gptc
} // namespace mlir

#endif // GPTC_TARGET_CPU_PASSES_H
