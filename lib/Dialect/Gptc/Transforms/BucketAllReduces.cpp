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
// Before that, the gathers that may move anywhere before their first use
// (ZeRO-3's) are bucketed by first use and moved one bucket ahead
// (prefetchGathers).
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

/// What kind of bucket `op` may join: a sum all-reduce whose result is its
/// operand's type, or an all-gather or sum reduce-scatter along dimension
/// 0; each of a floating-point tensor of static shape. None otherwise.
enum class Kind { None, AllReduce, AllGather, ReduceScatter };

static bool floatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType()) && getTensorBytes(t) >= 0;
}

static Kind kindOf(Operation *op) {
  if (auto r = dyn_cast<shard::AllReduceOp>(op))
    return r.getReduction() == shard::ReductionKind::Sum &&
                   r.getInput().getType() == r.getResult().getType() &&
                   floatTensor(r.getInput())
               ? Kind::AllReduce
               : Kind::None;
  if (auto g = dyn_cast<shard::AllGatherOp>(op))
    return g.getGatherAxis().getSExtValue() == 0 && floatTensor(g.getInput()) &&
                   floatTensor(g.getResult())
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
    : mlir::gptc::impl::GptcBucketAllReducesPassBase<GptcBucketAllReducesPass> {
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

  /// ZeRO-3's parameter gathers: all-gathers whose operand is there from
  /// the block's start (defined outside it, or its argument), or is a
  /// cast of such a value that only the gather reads (mixed precision's
  /// 16-bit copy of the slice), which moves with it; so they may go
  /// anywhere before their first use. They are bucketed in
  /// the order of their first uses, and each bucket is issued where the
  /// bucket before it is first read (one bucket ahead, as FSDP prefetches
  /// the next unit), but not before the last read of an earlier gather of
  /// the same tensor (the backward's copy waits until the forward's is
  /// dead). So the gathered copies of about two buckets wait for their
  /// readers at a time, and on the GPU the next bucket's gather runs
  /// during the current one's computation. Returns the gathers left
  /// single, which the runs below must not take.
  llvm::DenseSet<Operation *> prefetchGathers(Block &block) {
    SmallVector<Operation *> ops;
    llvm::DenseMap<Operation *, int64_t> position;
    for (Operation &op : block) {
      position[&op] = static_cast<int64_t>(ops.size());
      ops.push_back(&op);
    }
    struct Gather {
      Operation *op;
      // The op that makes its operand (mixed precision's cast of the
      // slice), moved with it; the tensor it gathers.
      Operation *producer;
      Value source;
      int64_t firstUse, lastUse, notBefore = 0;
    };
    auto fromStart = [&](Value v) {
      return v.getParentBlock() != &block || isa<BlockArgument>(v);
    };
    SmallVector<Gather> gathers;
    llvm::DenseSet<Operation *> candidates;
    for (Operation *op : ops) {
      if (kindOf(op) != Kind::AllGather)
        continue;
      Value in = op->getOperand(0);
      Operation *producer = nullptr;
      if (!fromStart(in)) {
        // A 16-bit gather's operand: a cast of a value there from the
        // start, read only by this gather.
        producer = in.getDefiningOp();
        Value source = producer ? getCastSource(producer) : Value();
        if (!source || !in.hasOneUse() || !fromStart(source))
          continue;
      }
      int64_t first = -1, last = -1;
      for (Operation *user : op->getResult(0).getUsers()) {
        Operation *here = block.findAncestorOpInBlock(*user);
        if (!here)
          continue;
        int64_t p = position[here];
        first = first < 0 ? p : std::min(first, p);
        last = std::max(last, p);
      }
      if (first < 0)
        continue;
      gathers.push_back(
          {op, producer, producer ? producer->getOperand(0) : in, first, last});
      candidates.insert(op);
      if (producer)
        candidates.insert(producer);
    }
    // Not before the last read of an earlier-read gather of the same
    // tensor.
    for (Gather &g : gathers)
      for (const Gather &other : gathers)
        if (other.op != g.op && other.source == g.source &&
            other.firstUse < g.firstUse)
          g.notBefore = std::max(g.notBefore, other.lastUse + 1);
    llvm::stable_sort(gathers, [](const Gather &a, const Gather &b) {
      return a.firstUse < b.firstUse;
    });

    // Buckets of gathers with one key, each in first-use order (mixed
    // precision interleaves 16-bit weights with fp32 norms: each type
    // fills its own buckets), each member able to move to its bucket's
    // first use. `previous`: the bucket before it with its key, or -1.
    SmallVector<Bucket> buckets;
    SmallVector<int64_t> firstUse, notBefore, previous;
    llvm::DenseMap<Operation *, Operation *> producers;
    for (const Gather &g : gathers) {
      if (g.producer)
        producers[g.op] = g.producer;
      int64_t bytes = getTensorBytes(g.op->getResult(0).getType());
      int64_t last = static_cast<int64_t>(buckets.size()) - 1;
      while (last >= 0 && !buckets[last].sameKey(g.op, Kind::AllGather))
        --last;
      bool join = last >= 0 && buckets[last].bytes + bytes <= bucketBytes &&
                  g.notBefore <= firstUse[last];
      if (!join) {
        buckets.emplace_back();
        buckets.back().kind = Kind::AllGather;
        firstUse.push_back(g.firstUse);
        notBefore.push_back(0);
        previous.push_back(last);
        last = static_cast<int64_t>(buckets.size()) - 1;
      }
      buckets[last].members.push_back(g.op);
      buckets[last].bytes += bytes;
      notBefore[last] = std::max(notBefore[last], g.notBefore);
    }

    llvm::DenseSet<Operation *> single;
    for (size_t j = 0; j < buckets.size(); ++j) {
      // Before the first reader of the previous bucket of its key (the
      // first: its own), but not before notBefore; never after its own
      // first reader. The place only moves forward along a key's buckets,
      // so they keep their order. Gathers themselves move, so the place
      // is the next op that is not one.
      int64_t at =
          std::max(firstUse[previous[j] < 0 ? j : previous[j]], notBefore[j]);
      at = std::min(at, firstUse[j]);
      while (candidates.contains(ops[at]))
        ++at;
      for (Operation *m : buckets[j].members) {
        m->moveBefore(ops[at]);
        if (Operation *producer = producers.lookup(m))
          producer->moveBefore(m);
      }
      if (buckets[j].members.size() == 1)
        single.insert(buckets[j].members.front());
      flush(buckets[j]);
    }
    return single;
  }

  void runOnBlock(Block &block) {
    llvm::DenseSet<Operation *> scheduled;
    if (prefetch)
      scheduled = prefetchGathers(block);
    if (bucketBytes == 0)
      return;
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
      if (kind == Kind::None || scheduled.contains(&op))
        continue;
      // The whole tensor's bytes (a gather's result, a scatter's operand).
      int64_t bytes = std::max(getTensorBytes(op.getOperand(0).getType()),
                               getTensorBytes(op.getResult(0).getType()));
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
    if (bucketBytes == 0 && !prefetch)
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
