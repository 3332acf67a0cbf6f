//===- ModelStats.h - Parameter and FLOP counts from the IR ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Counts what a model function holds and computes, read from the IR alone:
// the parameters (arguments marked `gptc.param`), the forward FLOPs (through
// `CostModelOpInterface`) and the tokens of one batch.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_MODELSTATS_H
#define GPTC_ANALYSIS_MODELSTATS_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cstdint>

namespace mlir::gptc {

/// The input of fp16's @forward_backward that seeds the backward (the
/// loss scale), and the training step's state of dynamic loss scaling:
/// the scale, the good steps since it last changed and the optimizer
/// updates applied (gptc.state names; gptc.loss_scale_update).
inline constexpr llvm::StringLiteral kLossScaleName = "loss_scale";
inline constexpr llvm::StringLiteral kGoodStepsName = "loss_scale_good_steps";
inline constexpr llvm::StringLiteral kUpdatesName = "optimizer_updates";
/// The label of padding positions (rows added so that a batch splits evenly
/// over data-parallel ranks and microbatches): the importer's
/// cross-entropy ignores it, the runtime pads with it.
inline constexpr int64_t kPaddingLabel = -1;

/// Figures of one model function.
struct ModelStats {
  /// Number of parameter tensors and their total element count.
  int64_t numParamTensors = 0;
  int64_t numParams = 0;
  /// Sum of the op FLOP counts of one forward execution.
  int64_t forwardFlops = 0;
  /// Elements of the `tokens` input (batch x sequence), 0 when absent.
  int64_t tokens = 0;
  /// Ops that do not implement CostModelOpInterface (counted as 0 FLOPs).
  int64_t uncountedOps = 0;
};

/// Computes the figures of `func`.
ModelStats computeModelStats(FunctionOpInterface func);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_MODELSTATS_H
