//===- Sharding.h - Shared helpers of gptc's sharding passes ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The `gptc.sharding = {shape, axes}` attribute (a value is this rank's
// block of a tensor of `shape`; dimension d is split over the grid axes
// `axes[d]`, major first) and the gradient norm over gradients split over
// different grid axes.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_TRANSFORMS_SHARDING_H
#define GPTC_DIALECT_GPTC_TRANSFORMS_SHARDING_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::gptc {

/// A block layout: the whole tensor's shape and the grid axes splitting
/// each dimension.
struct BlockSharding {
  SmallVector<int64_t> shape;
  SmallVector<SmallVector<int64_t>> axes;

  /// Not split: `type`'s shape, no axes.
  static BlockSharding whole(RankedTensorType type);
  /// Reads `gptc.sharding`; null attribute: whole(type).
  static BlockSharding get(DictionaryAttr attr, RankedTensorType type);
  DictionaryAttr toAttr(Builder &b) const;
  bool isSplit() const;
  /// Every grid axis that splits some dimension, sorted.
  SmallVector<int16_t> splitAxes() const;
};

/// The module's grid for its `gptc.parallel`: the first `shard.grid`,
/// with one dimension per axis kind; null after an error at the module.
shard::GridOp getParallelGrid(ModuleOp module, ParallelAttr parallel);

/// The loss op of a training step (gptc.cross_entropy or
/// gptc.vocab_parallel_loss) in `region`, or null.
Operation *findLoss(Region &region);
/// Its labels and ignored label.
Value lossLabels(Operation *loss);
/// The function input its labels come from: the labels themselves, or the
/// input that gptc-context-parallel cut into this rank's part of the
/// sequence (shard.all_slice of gptc.concat of gptc.split of it); null
/// when they are computed otherwise.
BlockArgument lossLabelsInput(Operation *loss);
IntegerAttr lossIgnoreIndex(Operation *loss);
/// Sets the normalizer of every loss op and loss-gradient op in `region`.
void setLossNormalizers(Region &region, Value normalizer);

/// The global norm of `grads`, each split over the grid axes given with it
/// (empty: replicated, counted once). Without split gradients, one
/// gptc.global_norm; otherwise per set of axes a gptc.sum_squares,
/// all-reduced over those axes, added, and gptc.sqrt.
Value buildGradNorm(OpBuilder &b, Location loc, StringRef grid,
                    ArrayRef<std::pair<Value, SmallVector<int16_t>>> grads);

} // namespace mlir::gptc

#endif // GPTC_DIALECT_GPTC_TRANSFORMS_SHARDING_H
