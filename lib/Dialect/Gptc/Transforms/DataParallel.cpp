//===- DataParallel.cpp - Data parallelism and ZeRO -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Turns the one-device @train_step into the program each data-parallel rank
// runs, with every collective an explicit `shard` op. This is gptc's own
// pass rather than upstream sharding propagation + partition because the
// semantics it needs are not element-wise shardings of one function:
// - the loss is a mean over real tokens, so the ranks' parts must be
//   weighted by a count that is itself all-reduced (upstream knows sums
//   and maxima of partial values, not weighted means);
// - ZeRO keeps a parameter replicated for the computation but sharded for
//   its optimizer state (and, at stage 3, for storage): a choice about where
//   a value lives between steps, not about how an op is partitioned.
// See docs/Passes.md.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCDATAPARALLELPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// What the pass needs to know about the mesh: the data-parallel group is
/// the data axis and the context axis together (context-parallel ranks
/// hold parts of the same sequences: their losses, token counts and
/// gradients add up like data-parallel ranks').
struct DataAxis {
  StringRef grid;
  SmallVector<shard::GridAxis> axes;
  /// The axis that splits the batch's rows (absent with only a context
  /// axis).
  std::optional<shard::GridAxis> rows;
  /// Ranks in the group, and over the rows axis alone.
  int64_t size = 1, rowRanks = 1;
  int zeroStage = 0;
  bool tokenWeighting = true;
  bool reduceEachMicrobatch = false;
};

class DataParallelRewriter {
public:
  DataParallelRewriter(func::FuncOp step, const DataAxis &data)
      : step(step), data(data), b(step.getContext()),
        body(step.getBody().front()) {}

  LogicalResult run();

private:
  /// The layout of `param`'s ZeRO slice: its layout (whole, or its
  /// tensor-parallel block) with dimension 0 further split over the data
  /// axis.
  DictionaryAttr zeroSharding(BlockArgument param, RankedTensorType local) {
    BlockSharding s =
        BlockSharding::get(step.getArgAttrOfType<DictionaryAttr>(
                               param.getArgNumber(), kShardingAttrName),
                           local);
    s.axes[0].append(data.axes.begin(), data.axes.end());
    return s.toAttr(b);
  }
  RankedTensorType sliceType(RankedTensorType t) {
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= data.size;
    return t.clone(shape);
  }
  bool sliceable(Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    return t && t.getRank() >= 1 && t.getDimSize(0) % data.size == 0;
  }
  ArrayRef<shard::GridAxis> axes() { return data.axes; }

  Value allReduce(Location loc, Value v) {
    return shard::AllReduceOp::create(b, loc, v.getType(), data.grid, axes(), v,
                                      shard::ReductionKind::Sum);
  }
  Value allSlice(Location loc, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return shard::AllSliceOp::create(b, loc, sliceType(t), data.grid, axes(), v,
                                     APInt(64, 0));
  }
  Value allGather(Location loc, Value v, RankedTensorType full) {
    return shard::AllGatherOp::create(b, loc, full, data.grid, axes(), v,
                                      APInt(64, 0));
  }
  Value reduceScatter(Location loc, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return shard::ReduceScatterOp::create(b, loc, sliceType(t), data.grid,
                                          axes(), v, shard::ReductionKind::Sum,
                                          APInt(64, 0));
  }
  /// Sets the insertion point right after `v` is defined.
  void after(Value v) {
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&body);
  }

  /// ZeRO 3: gathers the whole parameter where the computation uses the
  /// slice `param`: once just before the first forward use and again just
  /// before the first backward one (after the loss), in the block that
  /// holds them (the step, or gptc.accumulate's region: once per
  /// microbatch), so that the whole copy is released between them. A
  /// phase that reads only mixed precision's 16-bit cast gathers 16-bit
  /// slices instead.
  void gatherForUses(BlockArgument param, RankedTensorType whole,
                     Operation *except);
  LogicalResult weightByTokens();
  LogicalResult synchronize();

  func::FuncOp step;
  DataAxis data;
  OpBuilder b;
  Block &body;
};
} // namespace

/// The last cross-entropy among `block`'s own ops, or null: the ops after
/// it are the backward's. (findLoss walks nested regions too; the phases
/// here are positions in one block.)
static Operation *lossOf(Block *block) {
  Operation *loss = nullptr;
  for (Operation &op : *block)
    if (isa<CrossEntropyOp, VocabParallelLossOp>(op))
      loss = &op;
  return loss;
}

/// The 16-bit float type every use in `uses` casts to, or null when one of
/// them reads the value otherwise (or they cast to different types).
static Type narrowCastOf(ArrayRef<OpOperand *> uses) {
  Type narrow;
  for (OpOperand *use : uses) {
    auto cast = dyn_cast<CastOp>(use->getOwner());
    if (!cast)
      return nullptr;
    Type element = getElementTypeOrSelf(cast.getType());
    if (!isa<FloatType>(element) || element.getIntOrFloatBitWidth() != 16 ||
        (narrow && narrow != element))
      return nullptr;
    narrow = element;
  }
  return narrow;
}

void DataParallelRewriter::gatherForUses(BlockArgument param,
                                         RankedTensorType whole,
                                         Operation *except) {
  llvm::DenseMap<Block *, Operation *> losses;
  auto lossIn = [&](Block *block) {
    auto [it, inserted] = losses.try_emplace(block, nullptr);
    if (inserted)
      it->second = lossOf(block);
    return it->second;
  };

  // A cast of the parameter (mixed precision's 16-bit copy) made in the
  // forward and read again by the backward would keep the whole copy
  // alive from one phase to the other: the backward gets a cast of its own
  // just before its first reader there.
  SmallVector<CastOp> casts;
  for (Operation *user : param.getUsers())
    if (auto cast = dyn_cast<CastOp>(user))
      casts.push_back(cast);
  for (CastOp cast : casts) {
    Block *block = cast->getBlock();
    Operation *loss = lossIn(block);
    if (!loss || loss->isBeforeInBlock(cast))
      continue;
    SmallVector<OpOperand *> later;
    Operation *first = nullptr;
    for (OpOperand &use : cast->getUses()) {
      Operation *here = block->findAncestorOpInBlock(*use.getOwner());
      if (!here || !loss->isBeforeInBlock(here))
        continue;
      later.push_back(&use);
      if (!first || here->isBeforeInBlock(first))
        first = here;
    }
    if (later.empty())
      continue;
    b.setInsertionPoint(first);
    Operation *again = b.clone(*cast);
    again->setAttr(kRematerializeAttrName, b.getUnitAttr());
    for (OpOperand *use : later)
      use->set(again->getResult(0));
    if (cast->use_empty())
      cast->erase();
  }

  // Uses by block, in order, and in each block by phase (before the loss,
  // after it). Each phase gathers the parameter once, just before its
  // first use (uses are not ordered), so that each whole copy lives from
  // there to its last use; gptc-bucket-all-reduces later moves each
  // bucket of gathers one bucket ahead (the prefetch).
  llvm::MapVector<Block *, SmallVector<OpOperand *>> byBlock;
  for (OpOperand &use : param.getUses())
    if (use.getOwner() != except)
      byBlock[use.getOwner()->getBlock()].push_back(&use);
  for (auto &[block, uses] : byBlock) {
    Operation *loss = lossIn(block);
    // Split before rewriting: a 16-bit phase erases its readers.
    SmallVector<OpOperand *> phases[2];
    Operation *firsts[2] = {nullptr, nullptr};
    for (OpOperand *use : uses) {
      Operation *user = use->getOwner();
      bool after = loss && loss->isBeforeInBlock(user);
      phases[after].push_back(use);
      if (!firsts[after] || user->isBeforeInBlock(firsts[after]))
        firsts[after] = user;
    }
    for (bool backward : {false, true}) {
      ArrayRef<OpOperand *> phase = phases[backward];
      Operation *first = firsts[backward];
      if (phase.empty())
        continue;
      b.setInsertionPoint(first);
      Location loc = param.getLoc();
      // The backward's gather (and its cast) are marked so that CSE keeps
      // them apart from the forward's: the point is to hold the whole
      // parameter twice briefly, not once throughout.
      auto mark = [&](Value v) {
        if (backward)
          v.getDefiningOp()->setAttr(kRematerializeAttrName, b.getUnitAttr());
      };
      if (Type narrow = narrowCastOf(phase)) {
        // Every reader wants the 16-bit copy: each rank casts its slice
        // and the ranks gather the 16-bit slices, half the bytes of the
        // fp32 ones (FSDP's param_dtype); the cast is exact either way.
        auto local = cast<RankedTensorType>(param.getType());
        Value slice = CastOp::create(b, loc, local.clone(narrow), param);
        Value copy = allGather(loc, slice, whole.clone(narrow));
        mark(slice);
        mark(copy);
        for (OpOperand *use : phase) {
          Operation *reader = use->getOwner();
          reader->getResult(0).replaceAllUsesWith(copy);
          reader->erase();
        }
        continue;
      }
      Value copy = allGather(loc, param, whole);
      mark(copy);
      for (OpOperand *use : phase)
        use->set(copy);
    }
  }
}

/// Every rank normalizes its cross-entropy by the step's real tokens, summed
/// over the data axis; the loss is summed over the axis.
LogicalResult DataParallelRewriter::weightByTokens() {
  // 1. The data inputs are this rank's rows of the step's batch (context
  //    parallel ranks read the same rows).
  for (BlockArgument arg : body.getArguments()) {
    if (!data.rows)
      break;
    auto batch = step.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(),
                                                       kBatchAttrName);
    if (!batch)
      continue;
    NamedAttrList attrs(batch);
    attrs.set("axes", b.getDenseI64ArrayAttr({*data.rows}));
    step.setArgAttr(arg.getArgNumber(), kBatchAttrName,
                    attrs.getDictionary(step.getContext()));
  }

  // 2. The token count: the accumulation's, or a new one.
  CountTokensOp count;
  body.walk([&](CountTokensOp op) { count = op; });
  if (!count) {
    Operation *ce = findLoss(step.getBody());
    if (!ce)
      return step.emitOpError("has no gptc.cross_entropy to weight over "
                              "data-parallel ranks");
    BlockArgument labels = lossLabelsInput(ce);
    if (!labels || labels.getOwner() != &body)
      return ce->emitOpError("must take its labels from an input of "
                             "@train_step to be data parallel");
    b.setInsertionPointToStart(&body);
    count = CountTokensOp::create(b, ce->getLoc(),
                                  RankedTensorType::get({}, b.getF32Type()),
                                  labels, lossIgnoreIndex(ce));
    setLossNormalizers(step.getBody(), count);
  }
  // The count is of this rank's rows of whole sequences (a context
  // axis's ranks count the same tokens): summed over the data axis only.
  b.setInsertionPointAfter(count);
  if (!data.rows) {
    // Only a context axis: every rank already has the step's count.
  } else if (data.tokenWeighting) {
    Value total = shard::AllReduceOp::create(
        b, count.getLoc(), count.getType(), data.grid,
        ArrayRef<shard::GridAxis>{*data.rows}, count,
        shard::ReductionKind::Sum);
    count.getResult().replaceAllUsesExcept(total, total.getDefiningOp());
  } else {
    // The plain mean of the ranks' means: each rank divides by its own
    // tokens times the number of ranks.
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : count->getUses())
      uses.push_back(&use);
    Value scaled = count;
    for (int64_t i = 1; i < data.rowRanks; ++i)
      scaled = AddOp::create(b, count.getLoc(), scaled, count);
    for (OpOperand *use : uses)
      use->set(scaled);
  }

  // 3. The loss: the sum of the ranks' weighted parts.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    auto role = step.getResultAttrOfType<OutputAttr>(i, kOutputAttrName);
    if (!role || role.getKind() != OutputKind::Loss)
      continue;
    Value loss = ret.getOperand(i);
    b.setInsertionPoint(ret);
    ret.setOperand(i, allReduce(loss.getLoc(), loss));
  }
  return success();
}

/// One gradient synchronization per step, and ZeRO's slicing of the
/// optimizer state, gradients and parameters.
LogicalResult DataParallelRewriter::synchronize() {
  SmallVector<AdamWOp> updates;
  body.walk([&](AdamWOp op) { updates.push_back(op); });
  ClipScaleOp clip;
  body.walk([&](ClipScaleOp op) { clip = op; });
  if (updates.empty() || !clip)
    return step.emitOpError("has no gptc.adamw / gptc.clip_scale: run "
                            "gptc-optimizer before gptc-data-parallel");
  Value norm = clip.getNorm();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  int stage = data.zeroStage;

  // Gradients as the norm sees them, with the grid axes each is split over
  // (tensor parallelism's, and the data axis for ZeRO 2 and 3 slices).
  SmallVector<std::pair<Value, SmallVector<int16_t>>> normParts;
  bool splitNorm = false;
  for (AdamWOp update : updates) {
    Value grad = update.getGrad();
    auto param = dyn_cast<BlockArgument>(update.getParam());
    auto m = dyn_cast<BlockArgument>(update.getM());
    auto v = dyn_cast<BlockArgument>(update.getV());
    if (!param || !m || !v || param.getOwner() != &body)
      return update.emitOpError("must update arguments of @train_step");
    auto fullType = cast<RankedTensorType>(param.getType());
    bool slice = stage >= 1 && sliceable(fullType);
    BlockSharding base =
        BlockSharding::get(step.getArgAttrOfType<DictionaryAttr>(
                               param.getArgNumber(), kShardingAttrName),
                           fullType);
    DictionaryAttr zattr = slice ? zeroSharding(param, fullType) : nullptr;
    if (stage >= 1 && !slice)
      update.emitRemark("parameter of shape ")
          << fullType << " stays replicated: dimension 0 does not divide by "
          << "the data-parallel size " << data.size;

    // 1. The gradient: summed over ranks, whole or as this rank's slice.
    Value synced;
    auto loop = grad.getDefiningOp<AccumulateOp>();
    if (slice && stage >= 2 && loop && data.reduceEachMicrobatch) {
      // Each microbatch's part is reduce-scattered as soon as it is final,
      // inside the loop, which then sums this rank's slices.
      unsigned i = cast<OpResult>(grad).getResultNumber();
      Operation *yield = loop.getBody().front().getTerminator();
      Value part = yield->getOperand(i);
      if (isa<BlockArgument>(part))
        b.setInsertionPoint(yield);
      else
        b.setInsertionPointAfter(part.getDefiningOp());
      yield->setOperand(i, reduceScatter(update.getLoc(), part));
      grad.setType(yield->getOperand(i).getType());
      synced = grad;
    } else {
      after(grad);
      synced = slice && stage >= 2 ? reduceScatter(update.getLoc(), grad)
                                   : allReduce(update.getLoc(), grad);
      grad.replaceAllUsesExcept(synced, synced.getDefiningOp());
    }
    SmallVector<int16_t> split = base.splitAxes();
    if (slice && stage >= 2) {
      split.append(data.axes.begin(), data.axes.end());
      llvm::sort(split);
    }
    splitNorm |= !split.empty();
    normParts.push_back({synced, split});
    if (!slice)
      continue;

    // 2. The update on slices; moments live as slices.
    b.setInsertionPoint(update);
    Value gradSlice = stage >= 2 ? synced : allSlice(update.getLoc(), synced);
    Value paramSlice;
    if (stage >= 3) {
      // Parameters live as slices; the computation gathers them first.
      param.setType(sliceType(fullType));
      step.setArgAttr(param.getArgNumber(), kShardingAttrName, zattr);
      gatherForUses(param, fullType, update);
      paramSlice = param;
      b.setInsertionPoint(update);
    } else {
      paramSlice = allSlice(update.getLoc(), param);
    }
    for (BlockArgument moment : {m, v}) {
      moment.setType(sliceType(fullType));
      step.setArgAttr(moment.getArgNumber(), kShardingAttrName, zattr);
    }
    auto sliced = AdamWOp::create(
        b, update.getLoc(), paramSlice, gradSlice, m, v, update.getLr(),
        update.getStep(), update.getScale(), update.getBeta1Attr(),
        update.getBeta2Attr(), update.getEpsAttr(), update.getWeightDecayAttr(),
        update.getSkip());
    Value newParam = sliced.getNewParam();
    if (stage < 3)
      newParam = allGather(update.getLoc(), newParam, fullType);
    for (OpOperand &use :
         llvm::make_early_inc_range(update.getNewParam().getUses())) {
      use.set(newParam);
      if (use.getOwner() == ret && stage >= 3)
        step.setResultAttr(use.getOperandNumber(), kShardingAttrName, zattr);
    }
    for (auto [old, now] : {std::pair{update.getNewM(), sliced.getNewM()},
                            std::pair{update.getNewV(), sliced.getNewV()}})
      for (OpOperand &use : llvm::make_early_inc_range(old.getUses())) {
        use.set(now);
        if (use.getOwner() == ret)
          step.setResultAttr(use.getOperandNumber(), kShardingAttrName, zattr);
      }
    update.erase();
  }

  // 3. The norm: the ranks' sums of squares of split gradients add up
  //    (rebuilt in place of the optimizer's, which is then erased).
  if (splitNorm) {
    b.setInsertionPoint(clip);
    Value global = buildGradNorm(b, norm.getLoc(), data.grid, normParts);
    norm.replaceAllUsesWith(global);
    SmallVector<Operation *> dead{norm.getDefiningOp()};
    SmallPtrSet<Operation *, 8> erased;
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      if (!op || erased.contains(op) || !op->use_empty() ||
          !isa<GlobalNormOp, SumSquaresOp, SqrtOp, AddOp, shard::AllReduceOp>(
              op))
        continue;
      for (Value operand : op->getOperands())
        dead.push_back(operand.getDefiningOp());
      erased.insert(op);
      op->erase();
    }
  }

  // 4. The signature follows the retyped arguments and results.
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 ret.getOperandTypes()));
  return success();
}

LogicalResult DataParallelRewriter::run() {
  if (failed(weightByTokens()))
    return failure();
  return synchronize();
}

namespace {
struct GptcDataParallelPass final
    : mlir::gptc::impl::GptcDataParallelPassBase<GptcDataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ParallelAttr parallel = getParallelConfig(module);
    if (!parallel)
      return; // one device
    shard::GridOp grid = getParallelGrid(module, parallel);
    if (!grid)
      return signalPassFailure();
    DataAxis data;
    data.grid = grid.getSymName();
    data.zeroStage = static_cast<int>(parallel.getZeroStage());
    data.tokenWeighting = tokenWeighting;
    data.reduceEachMicrobatch = reduceEachMicrobatch;
    for (MeshAxisKind kind : {MeshAxisKind::Data, MeshAxisKind::Context}) {
      std::optional<unsigned> axis = parallel.findAxis(kind);
      if (!axis)
        continue;
      int64_t n = grid.getShape()[*axis];
      if (ShapedType::isDynamic(n)) {
        grid.emitOpError("needs a static data-parallel size");
        return signalPassFailure();
      }
      if (n == 1)
        continue;
      data.axes.push_back(static_cast<shard::GridAxis>(*axis));
      data.size *= n;
      if (kind == MeshAxisKind::Data) {
        data.rows = data.axes.back();
        data.rowRanks = n;
      }
    }
    // The group's axes in grid order (the order shard collectives and
    // gptc.sharding list them).
    llvm::sort(data.axes);
    if (data.size == 1)
      return;
    auto step = SymbolTable(module).lookup<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("gptc-data-parallel needs @train_step (run "
                       "gptc-optimizer first)");
      return signalPassFailure();
    }
    if (failed(DataParallelRewriter(step, data).run()))
      return signalPassFailure();
    // Evaluation: every data-parallel rank runs @forward on the same whole
    // batch, but a context axis's ranks each hold part of every sequence.
    if (std::optional<unsigned> cp = parallel.findAxis(MeshAxisKind::Context);
        cp && grid.getShape()[*cp] > 1)
      if (auto forward = SymbolTable(module).lookup<func::FuncOp>("forward"))
        if (failed(weightForwardOverContext(forward, data.grid,
                                            static_cast<shard::GridAxis>(*cp))))
          return signalPassFailure();
  }

  /// @forward's loss under context parallelism: each rank normalizes its
  /// cross-entropy by the real tokens of the whole sequences (counted on
  /// the whole labels, as @train_step does) and the parts are summed over
  /// the context axis, so that every rank has the one-device mean.
  static LogicalResult weightForwardOverContext(func::FuncOp forward,
                                                StringRef grid,
                                                shard::GridAxis axis) {
    Region &body = forward.getBody();
    Operation *ce = findLoss(body);
    if (!ce)
      return success(); // a forward without a loss: nothing to weight
    BlockArgument labels = lossLabelsInput(ce);
    if (!labels || labels.getOwner() != &body.front())
      return ce->emitOpError("must take its labels from an input of "
                             "@forward to be evaluated context parallel");
    OpBuilder b(forward.getContext());
    b.setInsertionPointToStart(&body.front());
    Value count = CountTokensOp::create(
        b, ce->getLoc(), RankedTensorType::get({}, b.getF32Type()), labels,
        lossIgnoreIndex(ce));
    setLossNormalizers(body, count);
    auto ret = cast<func::ReturnOp>(body.front().getTerminator());
    for (OpOperand &operand : ret->getOpOperands()) {
      if (operand.get().getDefiningOp() != ce)
        continue;
      b.setInsertionPoint(ret);
      Value loss = operand.get();
      operand.set(shard::AllReduceOp::create(b, loss.getLoc(), loss.getType(),
                                             grid, ArrayRef{axis}, loss,
                                             shard::ReductionKind::Sum));
    }
    return success();
  }
};
} // namespace
