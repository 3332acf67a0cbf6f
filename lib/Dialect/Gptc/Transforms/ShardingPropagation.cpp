//===- ShardingPropagation.cpp - Tensor-axis layouts from seeds -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Derives how every value of @forward sits on the tensor-parallel axis
// (whole, or split on one dimension) from a few seeds, upstream
// `shard.shard` annotations, and writes the decision for each layer that
// gptc-tensor-parallel partitions (`gptc.tensor_parallel` = column, row or
// vocab). Without seeds it seeds Megatron's layout from the graph's
// structure (the weight producing each attention's query, the weight
// before each GELU, the vocabulary table), so a graph that carries no
// annotation is sharded too.
//
// The rules are per op, run forward and backward to a fixpoint (as
// upstream's sharding-propagation): a linear layer whose weight is split
// on dimension 0 takes a whole input and gives an output split on its
// last dimension (column); split on dimension 1, it takes an input split
// on its last dimension and gives a whole output (row: the partial sums
// are reduced); attention's query, key, value and output share one
// layout (heads); GELU keeps its input's; a linear layer with an unknown
// weight takes column or row from its output or input. Everything else
// computes on whole values. Two rules that disagree are an error at the
// op, with a note where the other layout came from.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCSHARDINGPROPAGATIONPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// Where a value sits on the tensor axis: whole on every rank (dim < 0),
/// or split into equal blocks along dimension `dim`.
struct Layout {
  int64_t dim = -1;

  static Layout whole() { return {}; }
  static Layout split(int64_t d) { return {d}; }
  bool isSplit() const { return dim >= 0; }
  bool operator==(const Layout &o) const { return dim == o.dim; }
  bool operator!=(const Layout &o) const { return dim != o.dim; }
  std::string str() const {
    return isSplit() ? "split on dimension " + std::to_string(dim) : "whole";
  }
};

class Propagation {
public:
  Propagation(func::FuncOp func, StringRef grid, int16_t axis)
      : func(func), grid(grid), axis(axis) {}

  /// Reads and removes the `shard.shard` seeds of @forward; `found` says
  /// whether there were any.
  LogicalResult readSeeds(bool &found);
  /// Megatron's seeds, chosen from the graph's structure.
  LogicalResult defaultSeeds();
  /// Runs the rules to a fixpoint, makes what is still unknown whole, runs
  /// them again (they now check), and writes the layers' roles.
  LogicalResult run();

private:
  std::optional<Layout> get(Value v) const {
    auto it = layouts.find(v);
    if (it == layouts.end())
      return std::nullopt;
    return it->second;
  }
  /// `v` must be `l` because of `op`: sets it, or reports the conflict.
  LogicalResult require(Value v, Layout l, Operation *op);
  LogicalResult visit(Operation *op);
  LogicalResult visitLinear(LinearOp op);
  LogicalResult visitAttention(CausalAttentionOp op);
  LogicalResult seed(Value v, Layout l, Operation *why);
  void writeRoles();
  std::string describe(Value v);

  func::FuncOp func;
  StringRef grid;
  int16_t axis;
  DenseMap<Value, Layout> layouts;
  /// The op (or seed) whose rule set each layout.
  DenseMap<Value, Operation *> origin;
  bool changed = false;
};
} // namespace

std::string Propagation::describe(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kParamAttrName))
      return ("parameter '" + name.getValue() + "'").str();
    return "argument #" + std::to_string(arg.getArgNumber());
  }
  Operation *def = v.getDefiningOp();
  return ("the result of " + def->getName().getStringRef()).str();
}

LogicalResult Propagation::seed(Value v, Layout l, Operation *why) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || (l.isSplit() && l.dim >= type.getRank()))
    return why->emitOpError("seeds a split of dimension ")
           << l.dim << " of " << v.getType();
  auto [it, inserted] = layouts.try_emplace(v, l);
  if (!inserted && it->second != l)
    return why->emitOpError("seeds ")
           << describe(v) << " " << l.str() << ", but another seed made it "
           << it->second.str();
  if (inserted)
    origin[v] = why;
  return success();
}

LogicalResult Propagation::require(Value v, Layout l, Operation *op) {
  if (!isa<RankedTensorType>(v.getType()))
    return success();
  auto [it, inserted] = layouts.try_emplace(v, l);
  if (inserted) {
    origin[v] = op;
    changed = true;
    return success();
  }
  if (it->second == l)
    return success();
  InFlightDiagnostic diag = op->emitOpError("sharding conflict: needs ")
                            << describe(v) << " " << l.str()
                            << " on the tensor axis, but it is "
                            << it->second.str();
  if (Operation *from = origin.lookup(v); from && from != op)
    diag.attachNote(from->getLoc())
        << "made " << it->second.str() << " by this "
        << from->getName().getStringRef();
  diag.attachNote() << "gptc-sharding-propagation does not insert "
                       "resharding collectives; change the seeds";
  return failure();
}

LogicalResult Propagation::visitLinear(LinearOp op) {
  Value x = op.getInput(), w = op.getWeight(), bias = op.getBias();
  int64_t last = cast<RankedTensorType>(x.getType()).getRank() - 1;
  std::optional<Layout> wl = get(w);
  if (!wl) {
    // The weight's layout from its neighbours: an input split on its last
    // dimension makes the layer row-parallel, a split output (or bias)
    // column-parallel.
    std::optional<Layout> xl = get(x), yl = get(op.getResult());
    if (xl && xl->isSplit())
      wl = Layout::split(1);
    else if ((yl && yl->isSplit()) ||
             (bias && get(bias) && get(bias)->isSplit()))
      wl = Layout::split(0);
    else
      return success();
    if (failed(require(w, *wl, op)))
      return failure();
  }
  if (*wl == Layout::split(0))
    return failure(failed(require(x, Layout::whole(), op)) ||
                   failed(require(op.getResult(), Layout::split(last), op)) ||
                   (bias && failed(require(bias, Layout::split(0), op))));
  if (*wl == Layout::split(1))
    return failure(failed(require(x, Layout::split(last), op)) ||
                   failed(require(op.getResult(), Layout::whole(), op)) ||
                   (bias && failed(require(bias, Layout::whole(), op))));
  if (wl->isSplit())
    return op.emitOpError("splits its weight on dimension ")
           << wl->dim
           << "; a linear layer's weight splits on dimension 0 (column) or "
              "1 (row)";
  return failure(failed(require(x, Layout::whole(), op)) ||
                 failed(require(op.getResult(), Layout::whole(), op)) ||
                 (bias && failed(require(bias, Layout::whole(), op))));
}

LogicalResult Propagation::visitAttention(CausalAttentionOp op) {
  SmallVector<Value> all = {op.getQuery(), op.getKey(), op.getValue(),
                            op.getResult()};
  std::optional<Layout> l;
  for (Value v : all)
    if ((l = get(v)))
      break;
  if (!l)
    return success();
  int64_t last = op.getResult().getType().getRank() - 1;
  if (l->isSplit() && l->dim != last)
    return op.emitOpError("splits attention on dimension ")
           << l->dim << "; attention splits by heads (dimension " << last
           << ")";
  for (Value v : all)
    if (failed(require(v, *l, op)))
      return failure();
  return success();
}

LogicalResult Propagation::visit(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return visitLinear(linear);
  if (auto attention = dyn_cast<CausalAttentionOp>(op))
    return visitAttention(attention);
  if (auto gelu = dyn_cast<GeluOp>(op)) {
    // Elementwise: input and output share a layout, either way.
    if (std::optional<Layout> l = get(gelu.getInput()))
      return require(gelu.getResult(), *l, op);
    if (std::optional<Layout> l = get(gelu.getResult()))
      return require(gelu.getInput(), *l, op);
    return success();
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    // A table split by vocabulary: each rank looks up its block's ids and
    // the rows are completed by an all-reduce.
    if (std::optional<Layout> l = get(embedding.getTable());
        l && l->isSplit() && l->dim != 0)
      return op->emitOpError("splits an embedding table on dimension ")
             << l->dim << "; tables split by vocabulary (dimension 0)";
    return failure(failed(require(embedding.getIds(), Layout::whole(), op)) ||
                   failed(require(embedding.getResult(), Layout::whole(), op)));
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    // Logits split by vocabulary become the vocabulary-parallel loss.
    std::optional<Layout> l = get(ce.getLogits());
    if (l && l->isSplit() && !ce.getLogits().getDefiningOp<LinearOp>())
      return op->emitOpError("takes logits split by vocabulary that no "
                             "linear layer produced");
    return failure(failed(require(ce.getLabels(), Layout::whole(), op)) ||
                   failed(require(ce.getLoss(), Layout::whole(), op)));
  }
  // Every other op computes on whole values.
  for (Value v : op->getOperands())
    if (failed(require(v, Layout::whole(), op)))
      return failure();
  for (Value v : op->getResults())
    if (failed(require(v, Layout::whole(), op)))
      return failure();
  return success();
}

LogicalResult Propagation::readSeeds(bool &found) {
  found = false;
  SmallVector<shard::ShardOp> annotations;
  func.walk([&](shard::ShardOp op) { annotations.push_back(op); });
  for (shard::ShardOp op : annotations) {
    found = true;
    auto sharding = op.getSharding().getDefiningOp<shard::ShardingOp>();
    if (!sharding)
      return op.emitOpError("seed's sharding must come from shard.sharding");
    if (sharding.getGrid() != grid)
      return op.emitOpError("seeds a sharding on grid @")
             << sharding.getGrid() << "; the mesh is @" << grid;
    if (!sharding.getStaticHaloSizes().empty() ||
        !sharding.getStaticShardedDimsOffsets().empty() ||
        !sharding.getDynamicHaloSizes().empty() ||
        !sharding.getDynamicShardedDimsOffsets().empty())
      return op.emitOpError("seeds halos or uneven blocks; gptc splits into "
                            "equal blocks");
    Layout l;
    ArrayRef<shard::GridAxesAttr> dims = sharding.getSplitAxes().getAxes();
    for (auto [d, axes] : llvm::enumerate(dims)) {
      if (axes.empty())
        continue;
      if (axes.size() != 1 || axes[0] != axis)
        return op.emitOpError("seeds a split over grid axes other than the "
                              "tensor axis (")
               << axis << "); the data and pipeline axes come from the mesh";
      l = Layout::split(static_cast<int64_t>(d));
    }
    if (failed(seed(op.getSrc(), l, op)))
      return failure();
  }
  // The seeds are read: the annotations go, so the partitioner sees plain
  // values (the layouts live in this propagation, then in the roles).
  for (shard::ShardOp op : annotations) {
    op.getResult().replaceAllUsesWith(op.getSrc());
    Value s = op.getSharding();
    op.erase();
    if (Operation *def = s.getDefiningOp(); def && def->use_empty())
      def->erase();
  }
  return success();
}

LogicalResult Propagation::defaultSeeds() {
  auto isParam = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &func.getBody().front() &&
           func.getArgAttr(arg.getArgNumber(), kParamAttrName);
  };
  // Only the vocabulary-parallel loss takes split logits: a table is split
  // when every head that reads it feeds a cross-entropy alone.
  auto feedsLossOnly = [](Value logits) {
    return !logits.use_empty() &&
           llvm::all_of(logits.getUsers(),
                        [](Operation *u) { return isa<CrossEntropyOp>(u); });
  };
  auto vocabTable = [&](Value table) {
    return isParam(table) && llvm::all_of(table.getUsers(), [&](Operation *u) {
             if (isa<EmbeddingOp>(u))
               return true;
             auto head = dyn_cast<LinearOp>(u);
             return head && head.getWeight() == table && !head.getBias() &&
                    feedsLossOnly(head.getResult());
           });
  };
  for (Operation &op : func.getBody().front()) {
    Value weight;
    if (auto attention = dyn_cast<CausalAttentionOp>(op)) {
      if (auto q = attention.getQuery().getDefiningOp<LinearOp>())
        weight = q.getWeight();
    } else if (auto gelu = dyn_cast<GeluOp>(op)) {
      if (auto up = gelu.getInput().getDefiningOp<LinearOp>())
        weight = up.getWeight();
    } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      // The token embedding: ids the step is given (positions are
      // computed), a table read only by lookups and loss heads.
      if (!embedding.getOffset() && isa<BlockArgument>(embedding.getIds()) &&
          vocabTable(embedding.getTable()))
        weight = embedding.getTable();
    } else if (auto head = dyn_cast<LinearOp>(op)) {
      if (!head.getBias() && feedsLossOnly(head.getResult()) &&
          vocabTable(head.getWeight()))
        weight = head.getWeight();
    }
    if (weight && isParam(weight) &&
        failed(seed(weight, Layout::split(0), &op)))
      return failure();
  }
  return success();
}

void Propagation::writeRoles() {
  Builder b(func.getContext());
  for (Operation &op : func.getBody().front()) {
    std::optional<TensorParallel> role;
    if (auto linear = dyn_cast<LinearOp>(op)) {
      Layout w = *get(linear.getWeight());
      if (w == Layout::split(1))
        role = TensorParallel::Row;
      else if (w == Layout::split(0))
        role = llvm::all_of(linear.getResult().getUsers(),
                            [](Operation *u) { return isa<CrossEntropyOp>(u); })
                   ? TensorParallel::Vocab
                   : TensorParallel::Column;
    } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      if (get(embedding.getTable())->isSplit())
        role = TensorParallel::Vocab;
    }
    if (!role)
      op.removeAttr(kTensorParallelAttrName);
    else
      op.setAttr(kTensorParallelAttrName,
                 TensorParallelAttr::get(b.getContext(), *role));
  }
}

LogicalResult Propagation::run() {
  Block &body = func.getBody().front();
  auto fixpoint = [&]() -> LogicalResult {
    do {
      changed = false;
      for (Operation &op : body)
        if (failed(visit(&op)))
          return failure();
    } while (changed);
    return success();
  };
  if (failed(fixpoint()))
    return failure();
  // What no seed reached is whole; the rules run once more as checks (and
  // derive what follows from those values).
  auto wholeIfUnknown = [&](Value v) {
    if (isa<RankedTensorType>(v.getType()) && layouts.try_emplace(v).second)
      changed = true;
  };
  for (BlockArgument arg : body.getArguments())
    wholeIfUnknown(arg);
  for (Operation &op : body)
    for (Value v : op.getResults())
      wholeIfUnknown(v);
  if (failed(fixpoint()))
    return failure();
  writeRoles();
  return success();
}

namespace {
struct GptcShardingPropagationPass final
    : mlir::gptc::impl::GptcShardingPropagationPassBase<
          GptcShardingPropagationPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = SymbolTable(module).lookup<func::FuncOp>("forward");
    ParallelAttr parallel = getParallelConfig(module);
    std::optional<unsigned> axis;
    shard::GridOp grid;
    module.walk([&](shard::GridOp g) {
      if (!grid)
        grid = g;
    });
    if (parallel && grid)
      axis = parallel.findAxis(MeshAxisKind::Tensor);
    bool tensorAxis = forward && axis && grid.getShape()[*axis] > 1;
    // Seeds elsewhere, or with no tensor axis to split over, name nothing
    // gptc partitions.
    WalkResult misplaced = module.walk([&](shard::ShardOp op) {
      if (op->getParentOfType<func::FuncOp>() != forward) {
        op.emitOpError("seeds a sharding outside @forward (the function "
                       "gptc shards)");
        return WalkResult::interrupt();
      }
      if (!tensorAxis) {
        op.emitOpError("seeds a sharding, but the mesh has no tensor axis "
                       "larger than 1");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (misplaced.wasInterrupted())
      return signalPassFailure();
    if (!tensorAxis)
      return;
    Propagation propagation(forward, grid.getSymName(),
                            static_cast<int16_t>(*axis));
    bool found = false;
    if (failed(propagation.readSeeds(found)) ||
        (!found && defaultSeeds && failed(propagation.defaultSeeds())) ||
        failed(propagation.run()))
      return signalPassFailure();
  }
};
} // namespace
