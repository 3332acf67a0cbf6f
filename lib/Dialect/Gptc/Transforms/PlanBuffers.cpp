//===- PlanBuffers.cpp - Arena offsets by liveness -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Straight-line functions only (one block): the position of an op in the
// block is its time. Greedy placement, largest value first, is the usual
// heuristic for this interval-packing problem (TFLite's and XLA's
// heap simulators use variants of it).
//
// A reshape is a view: its result shares its operand's bytes (row-major
// data does not move), so the two are planned as one value alive over
// both lifetimes, and the runtime's reshape finds nothing to copy.
//
// An all-reduce whose operand nothing else reads is planned in place, like
// a view: the result is stored over the operand. A gradient bucket
// (gptc.bucket_all_reduce) whose operands are read by nothing else is
// reduced in place over contiguous memory: its operands
// are placed one after another (each aligned) as one interval, alive from
// the first operand's definition to the last use of a result, and each
// result is stored over its operand, so the runtime makes one collective
// call over the whole span, with no copies. This is no more memory than
// planning them apart: a result needs its bytes from the collective on,
// and its operand up to it.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCPLANBUFFERSPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// One value to place: its size and the times it is alive, inclusive.
struct Interval {
  Value value;
  int64_t bytes, begin, end, offset = -1;
};
} // namespace

static int64_t alignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// Plans the values defined by the ops of `body` (not those of nested
/// regions) into one arena; returns its size. With `callerOwnsResults`
/// (a function's body), the values the terminator returns get no offset:
/// the runtime computes them in its caller's buffers (or, when the caller
/// gives none, in storage of their own), so arena space for them would
/// never be touched.
static FailureOr<int64_t> planBlock(Block &body, int64_t alignment,
                                    bool callerOwnsResults) {
  // 1. Lifetimes: from the defining op to the last user (the terminator
  //    keeps returned values alive to the end).
  DenseMap<Operation *, int64_t> time;
  int64_t t = 0;
  for (Operation &op : body)
    time[&op] = t++;
  // A reshape's result is stored where the value it views is (its root);
  // only roots get intervals, spanning every view's lifetime.
  DenseMap<Value, Value> rootOf;
  auto root = [&](Value v) {
    auto it = rootOf.find(v);
    return it == rootOf.end() ? v : it->second;
  };
  SmallVector<Interval> intervals;
  // A value's interval (for a bucket's operand, the bucket's) and, for a
  // bucket's operand, its offset inside the bucket.
  DenseMap<Value, size_t> intervalOf;
  DenseMap<Value, int64_t> offsetInGroup;
  llvm::SmallDenseSet<size_t> absorbed;
  Operation *terminator = body.getTerminator();
  auto lastUse = [&](Value v) {
    int64_t end = time[v.getDefiningOp()];
    for (Operation *user : v.getUsers())
      end = std::max(end, time[body.findAncestorOpInBlock(*user)]);
    return end;
  };
  // Whether a collective can reduce `inputs` in place into `results`: each
  // input is planned here, read by nothing else, and no result is one the
  // caller stores.
  auto inPlace = [&](ValueRange inputs, ValueRange results) {
    for (Value v : inputs)
      if (!v.getDefiningOp() || v.getParentBlock() != &body || !v.hasOneUse() ||
          rootOf.count(v) || !intervalOf.count(v) || offsetInGroup.count(v))
        return false;
    for (Value r : results)
      if (callerOwnsResults && llvm::is_contained(terminator->getOperands(), r))
        return false;
    return true;
  };
  for (Operation &op : body.without_terminator()) {
    // A single all-reduce in place: the result is stored over its operand,
    // so the operand's buffer is not reused while a device's communication
    // stream may still be reducing it.
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op);
        reduce && reduce.getInput().getType() == reduce.getResult().getType() &&
        inPlace(reduce.getInput(), reduce.getResult())) {
      Value v = reduce.getInput();
      Interval &whole = intervals[intervalOf.lookup(v)];
      whole.end = std::max(whole.end, lastUse(reduce.getResult()));
      rootOf[reduce.getResult()] = v;
      continue;
    }
    if (auto bucket = dyn_cast<BucketAllReduceOp>(op);
        bucket && inPlace(bucket.getInputs(), bucket.getResults())) {
      Interval group{Value(), 0, time[&op], time[&op]};
      size_t index = intervals.size();
      for (auto [v, r] : llvm::zip(bucket.getInputs(), bucket.getResults())) {
        size_t member = intervalOf.lookup(v);
        absorbed.insert(member);
        offsetInGroup[v] = group.bytes;
        group.bytes += alignUp(intervals[member].bytes, alignment);
        group.begin = std::min(group.begin, intervals[member].begin);
        group.end = std::max(group.end, lastUse(r));
        intervalOf[v] = index;
        rootOf[r] = v;
      }
      intervals.push_back(group);
      continue;
    }
    for (Value result : op.getResults()) {
      int64_t bytes = getTensorBytes(result.getType());
      if (bytes < 0) {
        op.emitOpError("has a result the buffer plan cannot size");
        return failure();
      }
      int64_t end = lastUse(result);
      auto reshape = dyn_cast<ReshapeOp>(op);
      if (callerOwnsResults && !reshape &&
          llvm::is_contained(body.getTerminator()->getOperands(), result))
        continue;
      if (reshape && reshape.getInput().getDefiningOp() &&
          reshape.getInput().getParentBlock() == &body) {
        Value source = root(reshape.getInput());
        rootOf[result] = source;
        Interval &whole = intervals[intervalOf.lookup(source)];
        whole.end = std::max(whole.end, end);
        continue;
      }
      intervalOf[result] = intervals.size();
      intervals.push_back({result, bytes, time[&op], end});
    }
  }

  // 2. Largest first, each at the lowest aligned offset that fits between
  //    the placed values alive at the same time.
  SmallVector<Interval *> order;
  for (auto [index, i] : llvm::enumerate(intervals))
    if (!absorbed.contains(index))
      order.push_back(&i);
  llvm::stable_sort(
      order, [](Interval *a, Interval *b) { return a->bytes > b->bytes; });
  SmallVector<Interval *> placed;
  int64_t arena = 0;
  for (Interval *cur : order) {
    SmallVector<std::pair<int64_t, int64_t>> busy;
    for (Interval *p : placed)
      if (p->begin <= cur->end && cur->begin <= p->end)
        busy.push_back({p->offset, p->offset + p->bytes});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + cur->bytes <= lo)
        break;
      offset = std::max(offset, alignUp(hi, alignment));
    }
    cur->offset = offset;
    arena = std::max(arena, offset + cur->bytes);
    placed.push_back(cur);
  }

  // 3. Record the plan in the IR.
  Builder b(body.getParentOp()->getContext());
  for (Operation &op : body.without_terminator()) {
    SmallVector<int64_t> o;
    for (Value result : op.getResults()) {
      Value r = root(result);
      auto it = intervalOf.find(r);
      o.push_back(it == intervalOf.end()
                      ? -1
                      : intervals[it->second].offset + offsetInGroup.lookup(r));
    }
    op.setAttr(kOffsetsAttrName, b.getDenseI64ArrayAttr(o));
  }
  return alignUp(arena, alignment);
}

namespace {
struct GptcPlanBuffersPass final
    : mlir::gptc::impl::GptcPlanBuffersPassBase<GptcPlanBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    if (func.isExternal())
      return;
    if (!llvm::hasSingleElement(func.getFunctionBody())) {
      func.emitOpError("gptc-plan-buffers expects a single block");
      return signalPassFailure();
    }
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      func.emitOpError("gptc-plan-buffers: alignment must be a power of two");
      return signalPassFailure();
    }
    Block &body = func.getFunctionBody().front();
    FailureOr<int64_t> arena =
        planBlock(body, alignment, /*callerOwnsResults=*/true);
    if (failed(arena))
      return signalPassFailure();
    Builder b(func.getContext());
    func->setAttr(kArenaBytesAttrName, b.getI64IntegerAttr(*arena));
    // A region that runs once per microbatch (gptc.accumulate) has its own
    // arena, recorded on its op.
    for (Operation &op : body) {
      // A kernel's values stay inside the generated code, a fused GEMM's
      // inside the library call.
      if (isa<KernelOp, FusedGemmOp>(op))
        continue;
      for (Region &region : op.getRegions()) {
        if (!llvm::hasSingleElement(region)) {
          op.emitOpError("gptc-plan-buffers expects single-block regions");
          return signalPassFailure();
        }
        FailureOr<int64_t> inner =
            planBlock(region.front(), alignment, /*callerOwnsResults=*/false);
        if (failed(inner))
          return signalPassFailure();
        op.setAttr(kArenaBytesAttrName, b.getI64IntegerAttr(*inner));
      }
    }
  }
};
} // namespace
