//===- TensorParallel.cpp - Megatron tensor parallelism --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Rewrites @forward into one tensor-parallel rank's computation: column- and
// row-parallel linear layers as the importer annotated them, with
// gptc.grad_all_reduce ("f") and shard.all_reduce ("g") around each pair.
// gptc-autodiff then differentiates the sharded graph, so the backward
// collectives follow from the rules of those two ops.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCTENSORPARALLELPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
class TensorParallelRewriter {
public:
  TensorParallelRewriter(func::FuncOp func, StringRef grid, int16_t axis,
                         int64_t size, bool sequenceParallel)
      : func(func), grid(grid), axis(axis), size(size),
        sequenceParallel(sequenceParallel), b(func.getContext()) {}

  LogicalResult run();

private:
  /// Splits dimension `dim` of parameter `arg` over the tensor axis.
  LogicalResult splitParam(Value value, int64_t dim, Operation *user);
  LogicalResult column(LinearOp op);
  LogicalResult row(LinearOp op);
  LogicalResult vocabEmbedding(EmbeddingOp op);
  LogicalResult vocabHead(LinearOp op);
  LogicalResult vocabLoss(CrossEntropyOp op);
  /// The first vocabulary id of this rank's block (made once).
  Value vocabOffset(int64_t block);
  /// The replicated input of a column-parallel layer (or the head) from
  /// `x`: "f" (gptc.grad_all_reduce), or with sequence parallelism the
  /// all-gather of the sequence shards (made once per value).
  Value enter(Value x, Location loc);
  /// The sum of the ranks' partial results: "g" (all-reduce), or with
  /// sequence parallelism a reduce-scatter into sequence shards.
  Value leave(Value partial, Location loc);
  /// A replicated parameter used on sequence shards: its gradient is
  /// summed over the tensor axis.
  Value partialGrad(Value param, Location loc);
  /// Ops on sequence shards between the tensor-parallel regions.
  LogicalResult sequenceOp(Operation &op);

  func::FuncOp func;
  StringRef grid;
  int16_t axis;
  int64_t size;
  bool sequenceParallel;
  OpBuilder b;
  /// Activations split by sequence (dimension 1) with sequence parallelism.
  DenseSet<Value> seqSharded;
  /// Activations that hold this rank's part (heads or hidden units).
  DenseSet<Value> sharded;
  /// Inputs of column-parallel layers and their "f".
  DenseMap<Value, Value> entered;
  /// Logits that hold this rank's block of the vocabulary.
  DenseSet<Value> vocabSharded;
  Value offset;
  int64_t offsetBlock = 0;
};
} // namespace

LogicalResult TensorParallelRewriter::splitParam(Value value, int64_t dim,
                                                 Operation *user) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &func.getBody().front() ||
      !func.getArgAttr(arg.getArgNumber(), kParamAttrName))
    return user->emitOpError("tensor parallelism needs the layer's weights "
                             "to be parameters of the function");
  auto type = cast<RankedTensorType>(arg.getType());
  if (auto existing = func.getArgAttrOfType<DictionaryAttr>(
          arg.getArgNumber(), kShardingAttrName)) {
    // A tied table (embedding and language-model head) is split once.
    BlockSharding s = BlockSharding::get(existing, type);
    if (s.axes[dim] == SmallVector<int64_t>{axis})
      return success();
    return user->emitOpError("shares a parameter with a tensor-parallel "
                             "layer that splits it differently");
  }
  if (type.getDimSize(dim) % size != 0)
    return user->emitOpError("cannot split dimension ")
           << dim << " of " << type << " over " << size
           << " tensor-parallel ranks";
  BlockSharding s = BlockSharding::whole(type);
  s.axes[dim].push_back(axis);
  func.setArgAttr(arg.getArgNumber(), kShardingAttrName, s.toAttr(b));
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= size;
  arg.setType(type.clone(shape));
  return success();
}

LogicalResult TensorParallelRewriter::column(LinearOp op) {
  if (sharded.contains(op.getInput()))
    return op.emitOpError("column-parallel layer on an already split input");
  if (failed(splitParam(op.getWeight(), 0, op)) ||
      (op.getBias() && failed(splitParam(op.getBias(), 0, op))))
    return failure();
  Value in = enter(op.getInput(), op.getLoc());
  b.setInsertionPoint(op);
  auto local =
      LinearOp::create(b, op.getLoc(), in, op.getWeight(), op.getBias());
  local->setAttrs(op->getAttrDictionary());
  op.getResult().replaceAllUsesWith(local.getResult());
  op.erase();
  sharded.insert(local.getResult());
  return success();
}

LogicalResult TensorParallelRewriter::row(LinearOp op) {
  if (!sharded.contains(op.getInput()))
    return op.emitOpError("row-parallel layer on an input that is not split "
                          "(no column-parallel layer before it)");
  if (failed(splitParam(op.getWeight(), 1, op)))
    return failure();
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto partial =
      LinearOp::create(b, loc, op.getInput(), op.getWeight(), Value());
  partial->setAttrs(op->getAttrDictionary());
  // "g": the ranks' partial products summed; the bias once, after the sum.
  Value sum = leave(partial, loc);
  if (Value bias = op.getBias()) {
    auto type = cast<RankedTensorType>(sum.getType());
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d + 1 < type.getRank(); ++d)
      dims.push_back(d);
    if (sequenceParallel)
      bias = partialGrad(bias, loc);
    Value wide =
        BroadcastOp::create(b, loc, type, bias, b.getDenseI64ArrayAttr(dims));
    sum = AddOp::create(b, loc, sum, wide);
    if (sequenceParallel)
      seqSharded.insert(sum);
  }
  op.getResult().replaceAllUsesWith(sum);
  op.erase();
  return success();
}

Value TensorParallelRewriter::vocabOffset(int64_t block) {
  if (!offset) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&func.getBody().front());
    offset = ShardOffsetOp::create(b, func.getLoc(),
                                   RankedTensorType::get({}, b.getI32Type()),
                                   grid, ArrayRef<int16_t>{axis}, block);
    offsetBlock = block;
  }
  return offset;
}

/// Each rank looks up the ids its block of the table holds (zeros for the
/// others); an all-reduce ("g") completes the rows.
LogicalResult TensorParallelRewriter::vocabEmbedding(EmbeddingOp op) {
  auto table = cast<RankedTensorType>(op.getTable().getType());
  int64_t vocab = table.getDimSize(0);
  if (vocab % size != 0)
    return op.emitOpError("cannot split the vocabulary of ")
           << vocab << " over " << size
           << " tensor-parallel ranks (make vocab_size a multiple of the "
              "tensor-parallel size)";
  if (failed(splitParam(op.getTable(), 0, op)))
    return failure();
  Value first = vocabOffset(vocab / size);
  if (offsetBlock != vocab / size)
    return op.emitOpError("splits a vocabulary of another size");
  b.setInsertionPoint(op);
  auto part =
      EmbeddingOp::create(b, op.getLoc(), op.getIds(), op.getTable(), first);
  Value rows = leave(part, op.getLoc());
  op.getResult().replaceAllUsesWith(rows);
  op.erase();
  return success();
}

/// The language-model head: this rank's block of the logits, from the
/// replicated hidden state ("f").
LogicalResult TensorParallelRewriter::vocabHead(LinearOp op) {
  if (op.getBias())
    return op.emitOpError("vocabulary-parallel head with a bias");
  if (failed(splitParam(op.getWeight(), 0, op)))
    return failure();
  // The whole vocabulary (the table may be the embedding's, already split).
  auto arg = cast<BlockArgument>(op.getWeight());
  int64_t vocab = BlockSharding::get(func.getArgAttrOfType<DictionaryAttr>(
                                         arg.getArgNumber(), kShardingAttrName),
                                     cast<RankedTensorType>(arg.getType()))
                      .shape[0];
  (void)vocabOffset(vocab / size);
  if (offsetBlock != vocab / size)
    return op.emitOpError("splits a vocabulary of another size");
  Value in = enter(op.getInput(), op.getLoc());
  b.setInsertionPoint(op);
  auto local = LinearOp::create(b, op.getLoc(), in, op.getWeight(), Value());
  local->setAttrs(op->getAttrDictionary());
  op.getResult().replaceAllUsesWith(local.getResult());
  op.erase();
  vocabSharded.insert(local.getResult());
  return success();
}

/// Megatron's vocabulary-parallel cross-entropy: the maxima (max
/// all-reduce), then the sums of exponentials and the target logits (sum
/// all-reduces), combined into the loss.
LogicalResult TensorParallelRewriter::vocabLoss(CrossEntropyOp op) {
  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  ArrayRef<int16_t> i16(axis); // refers to the member
  Value localMax = RowMaxOp::create(b, loc, op.getLogits());
  Value max = shard::AllReduceOp::create(b, loc, localMax.getType(), grid, i16,
                                         localMax, shard::ReductionKind::Max);
  // A padded vocabulary (the importer's gptc.vocab_size on the head): the
  // padding ids' logits count in no sum.
  IntegerAttr real;
  if (Operation *head = op.getLogits().getDefiningOp())
    real = head->getAttrOfType<IntegerAttr>(kVocabSizeAttrName);
  auto parts = VocabParallelPartialsOp::create(b, loc, op.getLogits(), max,
                                               op.getLabels(), offset, real);
  Value sum =
      shard::AllReduceOp::create(b, loc, max.getType(), grid, i16,
                                 parts.getSumExp(), shard::ReductionKind::Sum);
  Value target =
      shard::AllReduceOp::create(b, loc, max.getType(), grid, i16,
                                 parts.getTarget(), shard::ReductionKind::Sum);
  auto loss = VocabParallelLossOp::create(
      b, loc, op.getLoss().getType(), max, sum, target, op.getLabels(),
      op.getNormalizer(), op.getIgnoreIndexAttr());
  op.getLoss().replaceAllUsesWith(loss.getLoss());
  op.erase();
  return success();
}

Value TensorParallelRewriter::enter(Value x, Location loc) {
  Value &in = entered[x];
  if (in)
    return in;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(x);
  if (sequenceParallel && seqSharded.contains(x)) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[1] *= size;
    in = shard::AllGatherOp::create(b, loc, type.clone(shape), grid,
                                    ArrayRef<int16_t>{axis}, x, APInt(64, 1));
  } else {
    in = GradAllReduceOp::create(b, loc, x, grid, ArrayRef<int16_t>{axis});
  }
  return in;
}

Value TensorParallelRewriter::leave(Value partial, Location loc) {
  auto type = cast<RankedTensorType>(partial.getType());
  if (!sequenceParallel)
    return shard::AllReduceOp::create(b, loc, type, grid,
                                      ArrayRef<int16_t>{axis}, partial,
                                      shard::ReductionKind::Sum);
  SmallVector<int64_t> shape(type.getShape());
  shape[1] /= size;
  Value shards = shard::ReduceScatterOp::create(
      b, loc, type.clone(shape), grid, ArrayRef<int16_t>{axis}, partial,
      shard::ReductionKind::Sum, APInt(64, 1));
  seqSharded.insert(shards);
  return shards;
}

Value TensorParallelRewriter::partialGrad(Value param, Location loc) {
  Value &wrapped = entered[param];
  if (!wrapped) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(param);
    wrapped =
        GradAllReduceOp::create(b, loc, param, grid, ArrayRef<int16_t>{axis});
  }
  return wrapped;
}

LogicalResult TensorParallelRewriter::sequenceOp(Operation &op) {
  b.setInsertionPoint(&op);
  Location loc = op.getLoc();
  if (auto add = dyn_cast<AddOp>(op)) {
    // A replicated operand (the position embedding) is cut into this
    // rank's sequence shard.
    SmallVector<Value> operands;
    for (Value v : add->getOperands()) {
      if (!seqSharded.contains(v)) {
        auto type = cast<RankedTensorType>(v.getType());
        if (type.getRank() < 2 || type.getDimSize(1) % size != 0)
          return add.emitOpError("cannot cut an operand into sequence shards");
        SmallVector<int64_t> shape(type.getShape());
        shape[1] /= size;
        v = shard::AllSliceOp::create(b, loc, type.clone(shape), grid,
                                      ArrayRef<int16_t>{axis}, v, APInt(64, 1));
      }
      operands.push_back(v);
    }
    auto local = AddOp::create(b, loc, operands[0], operands[1]);
    add.getResult().replaceAllUsesWith(local.getResult());
    add.erase();
    seqSharded.insert(local.getResult());
    return success();
  }
  if (auto norm = dyn_cast<LayerNormOp>(op)) {
    if (!seqSharded.contains(norm.getInput()))
      return norm.emitOpError("normalizes a split weight");
    // One statement each: the wrappers go to the block's start, so their
    // order must not depend on the compiler's argument evaluation order
    // (beta first leaves gamma's first in the IR).
    Value beta = partialGrad(norm.getBeta(), loc);
    Value gamma = partialGrad(norm.getGamma(), loc);
    auto local = LayerNormOp::create(b, loc, norm.getInput(), gamma, beta,
                                     norm.getEpsilonAttr());
    norm.getResult().replaceAllUsesWith(local.getResult());
    norm.erase();
    seqSharded.insert(local.getResult());
    return success();
  }
  return op.emitOpError("sequence parallelism does not know how to run this "
                        "op on sequence shards");
}

LogicalResult TensorParallelRewriter::run() {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto linear = dyn_cast<LinearOp>(op)) {
      if (auto role = linear->getAttrOfType<TensorParallelAttr>(
              kTensorParallelAttrName)) {
        LogicalResult done = success();
        switch (role.getValue()) {
        case TensorParallel::Column:
          done = column(linear);
          break;
        case TensorParallel::Row:
          done = row(linear);
          break;
        case TensorParallel::Vocab:
          done = vocabHead(linear);
          break;
        }
        if (failed(done))
          return failure();
        continue;
      }
    }
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      auto role =
          embedding->getAttrOfType<TensorParallelAttr>(kTensorParallelAttrName);
      if (role && role.getValue() == TensorParallel::Vocab) {
        if (failed(vocabEmbedding(embedding)))
          return failure();
        continue;
      }
    }
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (vocabSharded.contains(ce.getLogits())) {
        if (failed(vocabLoss(ce)))
          return failure();
        continue;
      }
    }
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return vocabSharded.contains(v); }))
      return op.emitOpError("tensor parallelism does not know how to run "
                            "this op on a block of the vocabulary");
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return seqSharded.contains(v); })) {
      if (failed(sequenceOp(op)))
        return failure();
      continue;
    }
    bool split = llvm::any_of(op.getOperands(),
                              [&](Value v) { return sharded.contains(v); });
    if (!split)
      continue;
    // Between a column- and a row-parallel layer: each rank's heads or
    // units.
    if (auto attention = dyn_cast<CausalAttentionOp>(op)) {
      if (!llvm::all_of(op.getOperands(),
                        [&](Value v) { return sharded.contains(v); }))
        return op.emitOpError("needs query, key and value all split by heads");
      int64_t heads = attention.getNumHeads();
      if (heads % size != 0)
        return op.emitOpError("cannot split ")
               << heads << " heads over " << size << " tensor-parallel ranks";
      b.setInsertionPoint(&op);
      auto local = CausalAttentionOp::create(
          b, op.getLoc(), attention.getQuery(), attention.getKey(),
          attention.getValue(), b.getI64IntegerAttr(heads / size),
          attention.getPositions());
      attention.getResult().replaceAllUsesWith(local.getResult());
      attention.erase();
      sharded.insert(local.getResult());
      continue;
    }
    if (auto gelu = dyn_cast<GeluOp>(op)) {
      b.setInsertionPoint(&op);
      auto local =
          GeluOp::create(b, op.getLoc(), gelu.getInput(), gelu.getExact());
      gelu.getResult().replaceAllUsesWith(local.getResult());
      gelu.erase();
      sharded.insert(local.getResult());
      continue;
    }
    return op.emitOpError("tensor parallelism does not know how to run this "
                          "op on a rank's part of the heads or units");
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 func.getResultTypes()));
  return success();
}

namespace {
struct GptcTensorParallelPass final
    : mlir::gptc::impl::GptcTensorParallelPassBase<GptcTensorParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ParallelAttr parallel = getParallelConfig(module);
    if (!parallel)
      return;
    shard::GridOp grid = getParallelGrid(module, parallel);
    if (!grid)
      return signalPassFailure();
    std::optional<unsigned> axis = parallel.findAxis(MeshAxisKind::Tensor);
    if (!axis)
      return;
    int64_t size = grid.getShape()[*axis];
    if (size == 1)
      return;
    auto forward = SymbolTable(module).lookup<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("gptc-tensor-parallel needs @forward");
      return signalPassFailure();
    }
    if (failed(TensorParallelRewriter(forward, grid.getSymName(),
                                      static_cast<int16_t>(*axis), size,
                                      parallel.getSequenceParallel())
                   .run()))
      return signalPassFailure();
  }
};
} // namespace
