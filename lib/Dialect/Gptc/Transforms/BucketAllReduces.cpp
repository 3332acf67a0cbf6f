//===- BucketAllReduces.cpp - Gradient buckets at compile time -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One pass over each block in program order. A bucket is a run of
// collectives of one kind (sum all-reduces, all-gathers along dimension
// 0, sum reduce-scatters along dimension 0) with one key (grid, axes,
// element type), several open at once (one per key); each is cut before
// the first op that reads one of its results (that op needs the reduced
// value, so the collective must come before it), when the next member
// would pass the size limit. The combined op goes
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

/// What kind of bucket `op` may join: a sum all-reduce whose result is its
/// operand's type, or an all-gather or sum reduce-scatter along dimension
/// 0; each of a floating-point tensor of static shape. None otherwise.
enum class Kind { None, AllReduce, AllGather, ReduceScatter };

static bool floatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType()) && tensorBytes(t) >= 0;
}

static Kind kindOf(Operation *op) {
  if (auto r = dyn_cast<shard::AllReduceOp>(op))
    return r.getReduction() == shard::ReductionKind::Sum &&
                   r.getInput().getType() == r.getResult().getType() &&
                   floatTensor(r.getInput())
               ? Kind::AllReduce
               : Kind::None;
  if (auto g = dyn_cast<shard::AllGatherOp>(op))
    return g.getGatherAxis().getSExtValue() == 0 &&
                   floatTensor(g.getInput()) && floatTensor(g.getResult())
               ? Kind::AllGather
               : Kind::None;
  if (auto r = dyn_cast<shard::ReduceScatterOp>(op))
    return r.getReduction() == shard::ReductionKind::Sum &&
                   r.getScatterAxis().getSExtValue() == 0 &&
                   floatTensor(r.getInput()) && floatTensor(r.getResult())
               ? Kind::ReduceScatter
               : Kind::None;
  return Kind::None;
}

/// The grid and axes of a candidate (all three kinds have them).
static FlatSymbolRefAttr gridOf(Operation *op) {
  return op->getAttrOfType<FlatSymbolRefAttr>("grid");
}
static DenseI16ArrayAttr axesOf(Operation *op) {
  return op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
}

namespace {
struct Bucket {
  Kind kind = Kind::None;
  SmallVector<Operation *> members;
  llvm::DenseSet<Value> results;
  int64_t bytes = 0;

  bool sameKey(Operation *op, Kind k) const {
    Operation *first = members.front();
    return kind == k && gridOf(first) == gridOf(op) &&
           axesOf(first) == axesOf(op) &&
           getElementTypeOrSelf(first->getOperand(0).getType()) ==
               getElementTypeOrSelf(op->getOperand(0).getType());
  }
};

struct GptcBucketAllReducesPass final
    : mlir::gptc::impl::GptcBucketAllReducesPassBase<
          GptcBucketAllReducesPass> {
  using Base::Base;

  /// Replaces a bucket of two or more by one gptc.bucket_all_reduce,
  /// bucket_all_gather or bucket_reduce_scatter where its last member is.
  void flush(Bucket &bucket) {
    if (bucket.members.size() >= 2) {
      Operation *last = bucket.members.back();
      OpBuilder b(last);
      SmallVector<Value> inputs;
      SmallVector<Type> types;
      SmallVector<Location> locs;
      for (Operation *m : bucket.members) {
        inputs.push_back(m->getOperand(0));
        types.push_back(m->getResult(0).getType());
        locs.push_back(m->getLoc());
      }
      Location loc = b.getFusedLoc(locs);
      Operation *combined =
          bucket.kind == Kind::AllReduce
              ? BucketAllReduceOp::create(b, loc, inputs, gridOf(last),
                                          axesOf(last))
                    .getOperation()
          : bucket.kind == Kind::AllGather
              ? BucketAllGatherOp::create(b, loc, types, inputs, gridOf(last),
                                          axesOf(last))
                    .getOperation()
              : BucketReduceScatterOp::create(b, loc, types, inputs,
                                              gridOf(last), axesOf(last))
                    .getOperation();
      for (auto [m, r] : llvm::zip(bucket.members, combined->getResults())) {
        m->getResult(0).replaceAllUsesWith(r);
        m->erase();
      }
    }
    bucket = Bucket();
  }

  void runOnBlock(Block &block) {
    // One open bucket per key: ZeRO-3's backward interleaves each layer's
    // gathers with the reduce-scatters of the layer after it, and each
    // kind still fills its own bucket.
    std::vector<Bucket> open;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      // Any use, also inside op's regions, needs that bucket done first.
      for (Bucket &bucket : open) {
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
      llvm::erase_if(open, [](const Bucket &b) { return b.members.empty(); });
      Kind kind = kindOf(&op);
      if (kind == Kind::None)
        continue;
      // The whole tensor's bytes (a gather's result, a scatter's operand).
      int64_t bytes = std::max(tensorBytes(op.getOperand(0).getType()),
                               tensorBytes(op.getResult(0).getType()));
      auto it = llvm::find_if(
          open, [&](const Bucket &b) { return b.sameKey(&op, kind); });
      if (it != open.end() && it->bytes + bytes > bucketBytes) {
        flush(*it);
        open.erase(it);
        it = open.end();
      }
      if (it == open.end()) {
        open.emplace_back();
        it = std::prev(open.end());
      }
      it->kind = kind;
      it->members.push_back(&op);
      it->results.insert(op.getResult(0));
      it->bytes += bytes;
    }
    for (Bucket &bucket : open)
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
