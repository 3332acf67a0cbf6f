//===- Passes.h - gptc dialect passes -------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H
#define GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H

#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Dialect/Gptc/IR/GptcDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gptc {

/// gptc-recompute's `mode`: a Recompute, or the module's own.
enum class RecomputeMode { FromModule, None, Selective, Full };

#define GEN_PASS_DECL
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"

/// The kernel functions of `module`'s gptc.kernel ops in a module of their
/// own (gptc-outline-kernels on a copy; `module` is not changed): what a
/// target's kernel lowering pipeline runs on. Empty when there is none.
/// Kernels with the same body share one function (gptc-outline-kernels
/// with `share`; gptc/Analysis/KernelSharing.h).
FailureOr<OwningOpRef<ModuleOp>> outlineKernelModule(ModuleOp module);

/// The transformer layer an op's name location names ("h.3.attn.q_proj"
/// -> 3, through fused and nested locations), or -1: how the pipeline
/// split and recomputation find layers.
int64_t layerOf(Location loc);

/// gptc-recompute's rewrite of `func` (a function gptc-autodiff wrote: its
/// forward up to the loss, then its backward) for `mode`.
LogicalResult recomputeActivations(func::FuncOp func, Recompute mode);

/// The bytes of the forward values `func`'s backward reads: what one
/// microbatch holds from its forward to its backward (0 when `func` has no
/// loss to find its forward by).
int64_t savedActivationBytes(func::FuncOp func);

/// The programs of `module`'s pipeline stage functions (`@stage<s>`, as
/// gptc-pipeline-schedule writes them), one per stage: each call of a chunk
/// a Forward or Backward (the last chunk's backward call, which computes
/// its forward too, a Forward then a Backward), each shard.recv and
/// shard.send a Recv or Send (consecutive ones of one message: one). With
/// `where`, the op of each (nullptr for the implied forwards). Fails with a
/// located error on a function that is not of that form.
FailureOr<std::vector<std::vector<PipelineOp>>>
readPipelinePrograms(ModuleOp module,
                     std::vector<std::vector<Operation *>> *where = nullptr);

/// gptc-pipeline-verify: the stage functions' programs simulated; a
/// deadlock is reported at the receive that waits.
LogicalResult verifyPipelinePrograms(ModuleOp module);

} // namespace mlir::gptc

#endif // GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_H
