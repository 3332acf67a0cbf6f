//===- Passes.h - gptc dialect passes -------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H
#define GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gptc {

#define GEN_PASS_DECL
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"

/// The kernel functions of `module`'s gptc.kernel ops in a module of their
/// own (gptc-outline-kernels on a copy; `module` is not changed): what a
/// target's kernel lowering pipeline runs on. Empty when there is none.
FailureOr<OwningOpRef<ModuleOp>> outlineKernelModule(ModuleOp module);

} // namespace mlir::gptc

#endif // GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H
