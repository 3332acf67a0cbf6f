//===- Sharding.cpp - Shared helpers of gptc's sharding passes -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::gptc;

BlockSharding BlockSharding::whole(RankedTensorType type) {
  BlockSharding s;
  s.shape.assign(type.getShape().begin(), type.getShape().end());
  s.axes.resize(type.getRank());
  return s;
}

BlockSharding BlockSharding::get(DictionaryAttr attr, RankedTensorType type) {
  if (!attr)
    return whole(type);
  BlockSharding s;
  auto shape = attr.getAs<DenseI64ArrayAttr>("shape");
  auto axes = attr.getAs<ArrayAttr>("axes");
  if (!shape || !axes)
    return whole(type);
  s.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
  for (Attribute a : axes) {
    auto list = dyn_cast<DenseI64ArrayAttr>(a);
    s.axes.emplace_back();
    if (list)
      s.axes.back().assign(list.asArrayRef().begin(), list.asArrayRef().end());
  }
  s.axes.resize(s.shape.size());
  return s;
}

DictionaryAttr BlockSharding::toAttr(Builder &b) const {
  SmallVector<Attribute> list;
  for (const auto &a : axes)
    list.push_back(b.getDenseI64ArrayAttr(a));
  return b.getDictionaryAttr(
      {b.getNamedAttr("shape", b.getDenseI64ArrayAttr(shape)),
       b.getNamedAttr("axes", b.getArrayAttr(list))});
}

bool BlockSharding::isSplit() const {
  return llvm::any_of(axes, [](const auto &a) { return !a.empty(); });
}

SmallVector<int16_t> BlockSharding::splitAxes() const {
  SmallVector<int16_t> out;
  for (const auto &a : axes)
    for (int64_t x : a)
      out.push_back(static_cast<int16_t>(x));
  llvm::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

shard::GridOp mlir::gptc::getParallelGrid(ModuleOp module,
                                          ParallelAttr parallel) {
  shard::GridOp grid;
  module.walk([&](shard::GridOp g) {
    if (!grid)
      grid = g;
  });
  if (!grid ||
      grid.getRank() != static_cast<int64_t>(parallel.getKinds().size())) {
    module.emitError("gptc.parallel needs a shard.grid with one dimension "
                     "per axis kind");
    return nullptr;
  }
  return grid;
}

Operation *mlir::gptc::findLoss(Region &region) {
  Operation *found = nullptr;
  region.walk([&](Operation *op) {
    if (isa<CrossEntropyOp, VocabParallelLossOp>(op))
      found = op;
  });
  return found;
}

Value mlir::gptc::lossLabels(Operation *loss) {
  if (auto ce = dyn_cast<CrossEntropyOp>(loss))
    return ce.getLabels();
  return cast<VocabParallelLossOp>(loss).getLabels();
}

BlockArgument mlir::gptc::lossLabelsInput(Operation *loss) {
  Value labels = lossLabels(loss);
  if (auto part = labels.getDefiningOp<shard::AllSliceOp>())
    if (auto order = part.getInput().getDefiningOp<ConcatOp>())
      if (auto split = order.getInputs().front().getDefiningOp<SplitOp>())
        labels = split.getInput();
  return dyn_cast<BlockArgument>(labels);
}

IntegerAttr mlir::gptc::lossIgnoreIndex(Operation *loss) {
  if (auto ce = dyn_cast<CrossEntropyOp>(loss))
    return ce.getIgnoreIndexAttr();
  return cast<VocabParallelLossOp>(loss).getIgnoreIndexAttr();
}

void mlir::gptc::setLossNormalizers(Region &region, Value normalizer) {
  region.walk([&](Operation *op) {
    if (auto c = dyn_cast<CrossEntropyOp>(op))
      c.getNormalizerMutable().assign(normalizer);
    else if (auto g = dyn_cast<CrossEntropyGradOp>(op))
      g.getNormalizerMutable().assign(normalizer);
    else if (auto l = dyn_cast<VocabParallelLossOp>(op))
      l.getNormalizerMutable().assign(normalizer);
    else if (auto lg = dyn_cast<VocabParallelLossGradOp>(op))
      lg.getNormalizerMutable().assign(normalizer);
  });
}

Value mlir::gptc::buildGradNorm(
    OpBuilder &b, Location loc, StringRef grid,
    ArrayRef<std::pair<Value, SmallVector<int16_t>>> grads) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  llvm::MapVector<SmallVector<int16_t>, SmallVector<Value>> groups;
  for (const auto &[grad, axes] : grads)
    groups[axes].push_back(grad);
  if (groups.size() == 1 && groups.begin()->first.empty())
    return GlobalNormOp::create(b, loc, scalar, groups.begin()->second);
  Value total;
  for (auto &[axes, members] : groups) {
    Value squares = SumSquaresOp::create(b, loc, scalar, members);
    if (!axes.empty())
      squares = shard::AllReduceOp::create(b, loc, scalar, grid, axes, squares,
                                           shard::ReductionKind::Sum);
    total = total ? AddOp::create(b, loc, total, squares).getResult() : squares;
  }
  return SqrtOp::create(b, loc, scalar, total);
}
