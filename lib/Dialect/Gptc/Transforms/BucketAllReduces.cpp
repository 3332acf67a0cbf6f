//===- BucketAllReduces.cpp - Gradient buckets at compile time -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One pass over each block in program order. A bucket is a run of sum
// all-reduces with one key (grid, axes, element type); it is cut before
// the first op that reads one of its results (that op needs the reduced
// value, so the collective must come before it), when the next member
// would pass the size limit, or when the key changes. The combined op goes
// where the last member was: its operands are all defined by then (each
// member's operand dominates the member), and no use of a member's result
// lies between the first member and the last (the cut guarantees it).
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCBUCKETALLREDUCESPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

/// Bytes of a static tensor type, or -1.
static int64_t tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return -1;
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

/// Whether `op` may join a bucket: a sum whose result is its operand's
/// type, a floating-point tensor of static shape.
static bool isCandidate(shard::AllReduceOp op) {
  if (op.getReduction() != shard::ReductionKind::Sum ||
      op.getInput().getType() != op.getResult().getType())
    return false;
  auto t = dyn_cast<RankedTensorType>(op.getInput().getType());
  return t && isa<FloatType>(t.getElementType()) && tensorBytes(t) >= 0;
}

namespace {
struct Bucket {
  SmallVector<shard::AllReduceOp> members;
  llvm::DenseSet<Value> results;
  int64_t bytes = 0;

  bool sameKey(shard::AllReduceOp op) const {
    shard::AllReduceOp first = members.front();
    return first.getGridAttr() == op.getGridAttr() &&
           first.getGridAxes() == op.getGridAxes() &&
           getElementTypeOrSelf(first.getInput().getType()) ==
               getElementTypeOrSelf(op.getInput().getType());
  }
};

struct GptcBucketAllReducesPass final
    : mlir::gptc::impl::GptcBucketAllReducesPassBase<
          GptcBucketAllReducesPass> {
  using Base::Base;

  /// Replaces a bucket of two or more by one gptc.bucket_all_reduce where
  /// its last member is.
  void flush(Bucket &bucket) {
    if (bucket.members.size() >= 2) {
      shard::AllReduceOp last = bucket.members.back();
      OpBuilder b(last);
      SmallVector<Value> inputs;
      SmallVector<Location> locs;
      for (shard::AllReduceOp m : bucket.members) {
        inputs.push_back(m.getInput());
        locs.push_back(m.getLoc());
      }
      auto combined = BucketAllReduceOp::create(
          b, b.getFusedLoc(locs), inputs, last.getGridAttr(),
          last.getGridAxesAttr());
      for (auto [m, r] : llvm::zip(bucket.members, combined.getResults())) {
        m.getResult().replaceAllUsesWith(r);
        m.erase();
      }
    }
    bucket = Bucket();
  }

  void runOnBlock(Block &block) {
    Bucket bucket;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      // Any use, also inside op's regions, needs the bucket done first.
      if (!bucket.members.empty()) {
        bool uses = false;
        op.walk([&](Operation *inner) {
          for (Value v : inner->getOperands())
            if (bucket.results.contains(v)) {
              uses = true;
              return WalkResult::interrupt();
            }
          return WalkResult::advance();
        });
        if (uses)
          flush(bucket);
      }
      auto reduce = dyn_cast<shard::AllReduceOp>(op);
      if (!reduce || !isCandidate(reduce))
        continue;
      int64_t bytes = tensorBytes(reduce.getInput().getType());
      if (!bucket.members.empty() &&
          (!bucket.sameKey(reduce) || bucket.bytes + bytes > bucketBytes))
        flush(bucket);
      bucket.members.push_back(reduce);
      bucket.results.insert(reduce.getResult());
      bucket.bytes += bytes;
    }
    flush(bucket);
  }

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitOpError(
          "gptc-bucket-all-reduces: bucket-bytes must not be negative");
      return signalPassFailure();
    }
    if (bucketBytes == 0)
      return;
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      // A kernel's ops stay inside the generated code; none communicates.
      if (!isa<KernelOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      runOnBlock(*block);
  }
};
} // namespace
