//===- FuseOptimizer.cpp - One kernel for the AdamW updates -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-fuse-optimizer: the gptc.adamw ops of a block that agree on every
// operand but the tensors (learning rate, step, scale, skip, betas, eps)
// become one gptc.multi_adamw at the position of the last of them.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCFUSEOPTIMIZERPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// What the updates of one multi_adamw must share.
using GroupKey =
    std::tuple<Value, Value, Value, Value, Attribute, Attribute, Attribute>;

GroupKey keyOf(AdamWOp op) {
  return {op.getLr(),        op.getStep(),      op.getScale(),  op.getSkip(),
          op.getBeta1Attr(), op.getBeta2Attr(), op.getEpsAttr()};
}

/// Whether every use of `op`'s results comes after `last` (in its block,
/// or nested in an op after it).
bool usedOnlyAfter(Operation *op, Operation *last) {
  for (Operation *user : op->getUsers()) {
    Operation *inBlock = last->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock || !last->isBeforeInBlock(inBlock))
      return false;
  }
  return true;
}

/// Replaces `updates` (two or more, in block order) by one multi_adamw.
void fuse(ArrayRef<AdamWOp> updates) {
  AdamWOp last = updates.back();
  OpBuilder b(last);
  SmallVector<Value> params, grads, m, v;
  SmallVector<double> decays;
  SmallVector<Location> locs;
  for (AdamWOp op : updates) {
    params.push_back(op.getParam());
    grads.push_back(op.getGrad());
    m.push_back(op.getM());
    v.push_back(op.getV());
    decays.push_back(op.getWeightDecay().convertToDouble());
    locs.push_back(op.getLoc());
  }
  auto fused = MultiAdamWOp::create(
      b, b.getFusedLoc(locs), params, grads, m, v, last.getLr(), last.getStep(),
      last.getScale(), last.getSkip(), last.getBeta1Attr(), last.getBeta2Attr(),
      last.getEpsAttr(), b.getDenseF64ArrayAttr(decays));
  for (unsigned k = 0; k < updates.size(); ++k) {
    AdamWOp op = updates[k];
    op.getNewParam().replaceAllUsesWith(fused.getNewParam(k));
    op.getNewM().replaceAllUsesWith(fused.getNewM(k));
    op.getNewV().replaceAllUsesWith(fused.getNewV(k));
    op.erase();
  }
}

struct GptcFuseOptimizerPass final
    : mlir::gptc::impl::GptcFuseOptimizerPassBase<GptcFuseOptimizerPass> {
  void runOnOperation() override {
    getOperation()->walk([](Block *block) {
      llvm::MapVector<GroupKey, SmallVector<AdamWOp>> groups;
      for (Operation &op : *block)
        if (auto update = dyn_cast<AdamWOp>(op))
          groups[keyOf(update)].push_back(update);
      for (auto &[key, members] : groups) {
        // Keep the updates whose results are not needed before the last
        // one: the fused op stands where that one is.
        SmallVector<AdamWOp> fusable;
        for (AdamWOp op : members)
          if (op == members.back() || usedOnlyAfter(op, members.back()))
            fusable.push_back(op);
        if (fusable.size() >= 2)
          fuse(fusable);
      }
    });
  }
};
} // namespace
