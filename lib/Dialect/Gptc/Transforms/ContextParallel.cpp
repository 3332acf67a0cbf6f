//===- ContextParallel.cpp - Context parallelism ----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Rewrites @forward into one context-parallel rank's computation: the
// sequence is cut into 2P chunks and rank r keeps chunks r and 2P-1-r (the
// load-balanced causal split: every rank's queries see the same number of
// keys), so every op between the embeddings and the loss runs on 2T/2P
// positions. Attention is the one op that mixes positions. By default it
// is a ring (Megatron's and torchtitan's ring attention): each rank's
// keys and values are passed around the context axis (shard.shift), each
// block is attended by gptc.attention_block at its positions and the
// blocks' results are merged by online softmax (gptc.attention_merge).
// With all-gather attention (Llama 3's), each rank all-gathers the keys
// and values over the axis, puts them back in sequence order and attends
// from its own queries, whose positions in the whole sequence it passes
// to gptc.causal_attention. gptc-autodiff gives either backward: the
// passed blocks' gradients shifted back, or the gathered ones
// reduce-scattered back to their ranks. The loss, its token count and the
// parameters' gradients
// are summed over the axis by gptc-data-parallel, which treats the context
// axis as part of the data-parallel group.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCCONTEXTPARALLELPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
class ContextParallelRewriter {
public:
  ContextParallelRewriter(func::FuncOp func, StringRef grid, int16_t axis,
                          int64_t size, bool allGather)
      : func(func), grid(grid), axis(axis), size(size), allGather(allGather),
        b(func.getContext()) {}

  LogicalResult run();

private:
  /// The chunk of the sequence at position `k` of the ranks' order
  /// (rank r holds positions 2r and 2r + 1: chunks r and 2P-1-r).
  int64_t chunkAt(int64_t k) const {
    int64_t r = k / 2;
    return k % 2 == 0 ? r : 2 * size - 1 - r;
  }
  /// This rank's two chunks of `x` along `dim` (of length seq).
  Value slice(Location loc, Value x, int64_t dim);
  /// Replaces every use of `x` by this rank's part of it along `dim`.
  Value cut(Location loc, Value x, int64_t dim);
  /// The whole sequence along dimension 1, in order, from every rank's
  /// chunks of `x`.
  Value gather(Location loc, Value x);
  /// The positions of this rank's tokens in the sequence (made once).
  Value positions(Location loc);
  /// `type` with dimension 1 (the sequence) cut to this rank's tokens.
  Type local(Type type) const;
  LogicalResult rewrite(Operation &op);
  LogicalResult attention(CausalAttentionOp op);
  /// Ring attention: the output of `op` from P blocks of keys and values.
  Value ring(CausalAttentionOp op);
  /// `x` from the previous rank of the context axis (the ring's step).
  Value shift(Location loc, Value x);

  func::FuncOp func;
  StringRef grid;
  int16_t axis;
  int64_t size;
  bool allGather;
  int64_t seq = 0;
  OpBuilder b;
  /// Values that hold this rank's tokens (dimension 1 cut).
  DenseSet<Value> parts;
  Value pos;
};
} // namespace

Type ContextParallelRewriter::local(Type type) const {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || t.getRank() < 2 || t.getDimSize(1) != seq)
    return type;
  SmallVector<int64_t> shape(t.getShape());
  shape[1] /= size;
  return t.clone(shape);
}

Value ContextParallelRewriter::slice(Location loc, Value x, int64_t dim) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t chunk = seq / (2 * size);
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = chunk;
  SmallVector<Type> pieces(2 * size, type.clone(shape));
  auto split = SplitOp::create(b, loc, pieces, x, dim);
  // The chunks in the ranks' order, then this rank's pair.
  SmallVector<Value> ordered;
  for (int64_t k = 0; k < 2 * size; ++k)
    ordered.push_back(split.getResult(chunkAt(k)));
  Value zigzag = ConcatOp::create(b, loc, type, ordered, dim);
  shape[dim] = 2 * chunk;
  return shard::AllSliceOp::create(b, loc, type.clone(shape), grid,
                                   ArrayRef<int16_t>{axis}, zigzag,
                                   APInt(64, dim));
}

Value ContextParallelRewriter::gather(Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] = seq;
  auto whole = type.clone(shape);
  Value all = shard::AllGatherOp::create(
      b, loc, whole, grid, ArrayRef<int16_t>{axis}, x, APInt(64, 1));
  // The gathered chunks come in the ranks' order; put them in sequence
  // order.
  shape[1] = seq / (2 * size);
  SmallVector<Type> pieces(2 * size, type.clone(shape));
  auto split = SplitOp::create(b, loc, pieces, all, 1);
  SmallVector<Value> ordered(2 * size);
  for (int64_t k = 0; k < 2 * size; ++k)
    ordered[chunkAt(k)] = split.getResult(k);
  return ConcatOp::create(b, loc, whole, ordered, 1);
}

Value ContextParallelRewriter::positions(Location loc) {
  if (!pos) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&func.getBody().front());
    Value all =
        IotaOp::create(b, loc, RankedTensorType::get({seq}, b.getI32Type()), 0);
    pos = slice(loc, all, 0);
  }
  return pos;
}

LogicalResult ContextParallelRewriter::attention(CausalAttentionOp op) {
  if (op.getPositions())
    return op.emitOpError("already attends from a part of the sequence");
  if (!parts.contains(op.getQuery()) || !parts.contains(op.getKey()) ||
      !parts.contains(op.getValue()))
    return op.emitOpError("context parallelism needs query, key and value "
                          "all cut along the sequence");
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  if (!allGather) {
    Value out = ring(op);
    op.getResult().replaceAllUsesWith(out);
    op.erase();
    parts.insert(out);
    return success();
  }
  Value key = gather(loc, op.getKey());
  Value value = gather(loc, op.getValue());
  auto local = CausalAttentionOp::create(b, loc, op.getQuery(), key, value,
                                         op.getNumHeadsAttr(), positions(loc));
  local->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op.getResult().replaceAllUsesWith(local.getResult());
  op.erase();
  parts.insert(local.getResult());
  return success();
}

Value ContextParallelRewriter::shift(Location loc, Value x) {
  return shard::ShiftOp::create(b, loc, x.getType(), grid,
                                ArrayRef<int16_t>{axis}, x, APInt(64, axis),
                                /*offset=*/1, /*rotate=*/true);
}

// Step 0 attends this rank's own keys; step j those of rank r - j, which
// the previous rank passed on (shard.shift by one along the axis, with
// their positions). Each step's output and log-sum-exp are merged into
// the running ones. The next step's blocks are passed before this step's
// attention, so a runtime that overlaps point-to-point transfers can hide
// them behind it. With the load-balanced chunks, every step after the
// first has each query see a whole chunk or nothing, half the block.
Value ContextParallelRewriter::ring(CausalAttentionOp op) {
  Location loc = op.getLoc();
  Value query = op.getQuery(), key = op.getKey(), value = op.getValue();
  Value queryPos = positions(loc), keyPos = queryPos;
  Value out, lse;
  for (int64_t step = 0; step < size; ++step) {
    Value nextKey, nextValue, nextPos;
    if (step + 1 < size) {
      nextKey = shift(loc, key);
      nextValue = shift(loc, value);
      nextPos = shift(loc, keyPos);
      for (Value v : {nextKey, nextValue, nextPos})
        v.getDefiningOp()->setDiscardableAttrs(
            op->getDiscardableAttrDictionary());
    }
    auto block = AttentionBlockOp::create(b, loc, query, key, value, queryPos,
                                          keyPos, op.getNumHeadsAttr());
    block->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    if (!out) {
      out = block.getResult();
      lse = block.getLse();
    } else {
      auto merge = AttentionMergeOp::create(b, loc, out, lse, block.getResult(),
                                            block.getLse());
      merge->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      out = merge.getResult();
      lse = merge.getLse();
    }
    key = nextKey;
    value = nextValue;
    keyPos = nextPos;
  }
  return out;
}

/// Ops that work token by token: the same op on this rank's tokens, with
/// dimension 1 of its results cut.
LogicalResult ContextParallelRewriter::rewrite(Operation &op) {
  if (auto attn = dyn_cast<CausalAttentionOp>(op))
    return attention(attn);
  bool tokenwise =
      isa<EmbeddingOp, LinearOp, LayerNormOp, GeluOp, AddOp, UnaryOp, BinaryOp,
          CastOp, GradAllReduceOp, CrossEntropyOp, RowMaxOp,
          VocabParallelPartialsOp, VocabParallelLossOp, shard::AllReduceOp>(op);
  if (!tokenwise)
    return op.emitOpError("context parallelism does not know how to run "
                          "this op on a part of the sequence");
  // Every activation over the whole sequence (rank 3, dimension 1 the
  // sequence's length) must be this rank's part; weights are read whole.
  auto whole = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return !parts.contains(v) && t && t.getRank() >= 3 &&
           t.getDimSize(1) == seq;
  };
  for (Value v : op.getOperands())
    if (whole(v)) {
      // A broadcast along the sequence (a row-parallel bias) is made
      // again at this rank's length.
      auto wide = v.getDefiningOp<BroadcastOp>();
      if (!wide || !llvm::is_contained(wide.getDimensions(), 1))
        return op.emitOpError("mixes this rank's part of the sequence with "
                              "a value over the whole sequence");
    }
  b.setInsertionPoint(&op);
  for (OpOperand &use : op.getOpOperands()) {
    if (!whole(use.get()))
      continue;
    auto wide = use.get().getDefiningOp<BroadcastOp>();
    use.set(BroadcastOp::create(b, wide.getLoc(), local(wide.getType()),
                                wide.getInput(), wide.getDimensionsAttr()));
    if (wide->use_empty())
      wide->erase();
  }
  // The result types: inferred again, or with the sequence cut.
  SmallVector<Type> types;
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(
            op.getContext(), op.getLoc(), op.getOperands(),
            op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
            op.getRegions(), types)))
      return op.emitOpError("has no result type on a part of the sequence");
  } else {
    for (Type t : op.getResultTypes())
      types.push_back(local(t));
  }
  for (auto [result, type] : llvm::zip(op.getResults(), types)) {
    result.setType(type);
    // Per-token results (batch x tokens x ...); the loss is a scalar.
    if (cast<RankedTensorType>(type).getRank() >= 2)
      parts.insert(result);
  }
  return success();
}

/// Replaces every use of `x` by this rank's part of it along `dim`.
Value ContextParallelRewriter::cut(Location loc, Value x, int64_t dim) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : x.getUses())
    uses.push_back(&use);
  Value part = slice(loc, x, dim);
  for (OpOperand *use : uses)
    use->set(part);
  parts.insert(part);
  return part;
}

LogicalResult ContextParallelRewriter::run() {
  Block &body = func.getBody().front();
  // The sequence: the data inputs' dimension 1.
  SmallVector<BlockArgument> data;
  for (BlockArgument arg : body.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), kParamAttrName))
      continue;
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() != 2 || !type.getElementType().isInteger())
      return func.emitOpError("context parallelism needs token inputs of "
                              "shape batch x sequence, got ")
             << arg.getType();
    if (seq && type.getDimSize(1) != seq)
      return func.emitOpError("context parallelism needs every input to "
                              "cover the same sequence");
    seq = type.getDimSize(1);
    data.push_back(arg);
  }
  if (data.empty())
    return func.emitOpError("context parallelism needs token inputs");
  if (seq % (2 * size) != 0)
    return func.emitOpError("cannot cut a sequence of ")
           << seq << " into 2 x " << size << " context-parallel chunks";

  // 1. This rank's tokens and labels.
  b.setInsertionPointToStart(&body);
  for (BlockArgument arg : data)
    if (!arg.use_empty())
      cut(arg.getLoc(), arg, 1);

  // 2. The ops in order: the position ids are this rank's, the rest follows
  //    the parts.
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (auto iota = dyn_cast<IotaOp>(op)) {
      auto type = cast<RankedTensorType>(iota.getType());
      if (type.getRank() == 2 && iota.getDimension() == 1 &&
          type.getDimSize(1) == seq) {
        b.setInsertionPointAfter(iota);
        cut(iota.getLoc(), iota, 1);
      }
      continue;
    }
    if (op.getNumResults() == 0 || parts.contains(op.getResult(0)) ||
        llvm::none_of(op.getOperands(),
                      [&](Value v) { return parts.contains(v); }))
      continue;
    if (failed(rewrite(op)))
      return failure();
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 body.getTerminator()->getOperandTypes()));
  return success();
}

namespace {
struct GptcContextParallelPass final
    : mlir::gptc::impl::GptcContextParallelPassBase<GptcContextParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ParallelAttr parallel = getParallelConfig(module);
    if (!parallel)
      return;
    std::optional<unsigned> axis = parallel.findAxis(MeshAxisKind::Context);
    if (!axis)
      return;
    shard::GridOp grid = getParallelGrid(module, parallel);
    if (!grid)
      return signalPassFailure();
    int64_t size = grid.getShape()[*axis];
    if (size == 1)
      return;
    if (parallel.getSequenceParallel()) {
      module.emitError("context parallelism and sequence parallelism both "
                       "cut the sequence: use one of them");
      return signalPassFailure();
    }
    auto forward = SymbolTable(module).lookup<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("gptc-context-parallel needs @forward");
      return signalPassFailure();
    }
    if (failed(ContextParallelRewriter(forward, grid.getSymName(),
                                       static_cast<int16_t>(*axis), size,
                                       parallel.getContextAllGather())
                   .run()))
      return signalPassFailure();
  }
};
} // namespace
