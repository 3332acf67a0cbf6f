//===- HoistInvariants.cpp - Microbatch-invariant ops out of the loop -----===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Loop-invariant code motion for gptc.accumulate: what a microbatch
// computes from values defined before the loop only (the parameters' 16-bit
// copies) is computed once, before it.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCHOISTINVARIANTSPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {

/// Elements of a statically shaped tensor (-1 for anything else).
int64_t elementsOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : -1;
}

/// Whether `op`, in `loop`'s body, computes the same value in every
/// microbatch and is worth computing once: a gptc op without memory
/// effects or regions, all of whose operands come from outside the loop,
/// with no result larger than its largest operand.
bool isHoistable(Operation *op, AccumulateOp loop) {
  if (!isa<GptcDialect>(op->getDialect()) || op->getNumRegions() != 0 ||
      op->hasTrait<OpTrait::IsTerminator>() || op->getNumOperands() == 0 ||
      !isMemoryEffectFree(op))
    return false;
  int64_t largest = -1;
  for (Value operand : op->getOperands()) {
    if (loop->isAncestor(operand.getParentRegion()->getParentOp()))
      return false;
    largest = std::max(largest, elementsOf(operand.getType()));
  }
  return llvm::all_of(op->getResultTypes(), [&](Type t) {
    int64_t n = elementsOf(t);
    return n >= 0 && n <= largest;
  });
}

struct GptcHoistInvariantsPass final
    : mlir::gptc::impl::GptcHoistInvariantsPassBase<GptcHoistInvariantsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AccumulateOp> loops;
    getOperation()->walk([&](AccumulateOp loop) { loops.push_back(loop); });
    // Innermost first: what leaves an inner loop may leave the outer too.
    for (AccumulateOp loop : loops) {
      Block &body = loop.getBody().front();
      // In order, so that a chain (a cast, then a reshape) leaves whole.
      for (Operation &op : llvm::make_early_inc_range(body))
        if (isHoistable(&op, loop))
          op.moveBefore(loop);
    }
  }
};

} // namespace
