//===- Recompute.cpp - Activation recomputation -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trades compute for memory in a function gptc-autodiff wrote (its forward
// ops, up to the loss, then the backward): forward values the backward
// reads are recomputed in the backward, just before their first use,
// instead of being kept from the forward.
//
// - selective: layer norms, GELUs and casts of activations, whose inputs
//   the backward keeps anyway (a norm's input for its gradient, GELU's
//   pre-activation for its own); nothing is kept longer than before, and
//   the cost is a few memory-bound passes.
// - full: every op of a transformer layer (found by its name location,
//   "h.<n>...") but the values the next layer or the head reads (the
//   layer's outputs, the checkpoints): the backward of a layer starts by
//   recomputing its forward from its input, as Megatron's full
//   recomputation and gptc's pipeline stages do. The last layer is kept:
//   its backward follows its forward at once.
//
// Ops whose operands are all arguments (a parameter's cast) are never
// recomputed: they are parameter-sized, not activations.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCRECOMPUTEPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// The function's forward (ops up to and including the loss) and backward.
struct Halves {
  DenseSet<Operation *> forward;
  /// Forward ops in order.
  SmallVector<Operation *> forwardOps;
  SmallVector<Operation *> backwardOps;
};
} // namespace

static FailureOr<Halves> splitHalves(func::FuncOp func) {
  Block &body = func.getBody().front();
  Operation *loss = findLoss(func.getBody());
  if (!loss)
    return func.emitOpError("has no loss (gptc.cross_entropy or "
                            "gptc.vocab_parallel_loss) to find its forward "
                            "by");
  if (loss->getBlock() != &body)
    return loss->emitOpError("must be in the function's body to find its "
                             "forward by");
  Halves h;
  bool inForward = true;
  for (Operation &op : body.without_terminator()) {
    if (inForward) {
      h.forward.insert(&op);
      h.forwardOps.push_back(&op);
    } else {
      h.backwardOps.push_back(&op);
    }
    if (&op == loss)
      inForward = false;
  }
  return h;
}

/// Whether `op` computes on activations (some operand is a forward op's
/// result), rather than on arguments alone.
static bool readsActivations(Operation *op, const Halves &h) {
  return llvm::any_of(op->getOperands(), [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && h.forward.contains(def);
  });
}

static bool usedByBackward(Value v, const Halves &h) {
  return llvm::any_of(v.getUsers(), [&](Operation *u) {
    return !h.forward.contains(u) && u->getBlock() == v.getParentBlock();
  });
}

/// The forward ops to recompute under `mode`.
static DenseSet<Operation *> chooseRecomputed(const Halves &h, Recompute mode) {
  DenseSet<Operation *> chosen;
  if (mode == Recompute::Full) {
    // The last layer's backward comes right after its forward: recomputing
    // it would lower no peak, so its activations are kept.
    int64_t lastLayer = -1;
    for (Operation *op : h.forwardOps)
      lastLayer = std::max(lastLayer, layerOf(op->getLoc()));
    for (Operation *op : h.forwardOps) {
      int64_t layer = layerOf(op->getLoc());
      if (layer < 0 || layer == lastLayer || op->getNumRegions() ||
          !readsActivations(op, h) || !isPure(op))
        continue;
      // A value another layer's (or the head's) forward reads is the
      // layer's output: kept, the next layer's recomputation starts there.
      bool checkpoint = llvm::any_of(op->getUsers(), [&](Operation *u) {
        return h.forward.contains(u) && layerOf(u->getLoc()) != layer;
      });
      if (!checkpoint)
        chosen.insert(op);
    }
    return chosen;
  }
  // selective: cheap ops (and chains of them, a norm then its cast) whose
  // inputs stay alive for the backward anyway. Start from every candidate
  // and drop, until nothing changes, those the backward does not need and
  // those whose inputs would have to be kept longer.
  SmallVector<Operation *> candidates;
  for (Operation *op : h.forwardOps)
    if (isa<LayerNormOp, GeluOp, CastOp>(op) && readsActivations(op, h)) {
      candidates.push_back(op);
      chosen.insert(op);
    }
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation *op : candidates) {
      if (!chosen.contains(op))
        continue;
      bool needed = llvm::any_of(op->getResults(), [&](Value r) {
        return usedByBackward(r, h) ||
               llvm::any_of(r.getUsers(),
                            [&](Operation *u) { return chosen.contains(u); });
      });
      bool inputsAvailable = llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || !h.forward.contains(def) || chosen.contains(def) ||
               usedByBackward(v, h);
      });
      if (!needed || !inputsAvailable) {
        chosen.erase(op);
        changed = true;
      }
    }
  }
  return chosen;
}

LogicalResult mlir::gptc::recomputeActivations(func::FuncOp func,
                                               Recompute mode) {
  if (mode == Recompute::None)
    return success();
  FailureOr<Halves> h = splitHalves(func);
  if (failed(h))
    return failure();
  DenseSet<Operation *> chosen = chooseRecomputed(*h, mode);
  if (chosen.empty())
    return success();
  // Walk the backward in order; the first read of a recomputed value
  // clones its op (and the recomputed ops it reads, first) right before
  // the reader, so each clone dominates every later reader.
  IRMapping clones;
  OpBuilder b(func.getContext());
  std::function<Value(Value)> materialize = [&](Value v) -> Value {
    if (Value c = clones.lookupOrNull(v))
      return c;
    Operation *op = v.getDefiningOp();
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && chosen.contains(def))
        materialize(operand);
    Operation *copy = b.clone(*op, clones);
    // Marked so that CSE keeps the clone apart from the forward's op (the
    // point is to compute it twice, not to keep it).
    copy->setAttr(kRematerializeAttrName, b.getUnitAttr());
    return clones.lookup(v);
  };
  for (Operation *reader : h->backwardOps) {
    for (OpOperand &use : reader->getOpOperands()) {
      Operation *def = use.get().getDefiningOp();
      if (!def || !chosen.contains(def))
        continue;
      b.setInsertionPoint(reader);
      use.set(materialize(use.get()));
    }
  }
  // The terminator (the loss and gradients) reads no activation but the
  // loss, which is not recomputed.
  return success();
}

int64_t mlir::gptc::savedActivationBytes(func::FuncOp func) {
  FailureOr<Halves> h = splitHalves(func);
  if (failed(h))
    return 0;
  // A reshape is a view of its operand's buffer: what is kept is the
  // buffer it views, counted once.
  DenseSet<Value> kept;
  for (Operation *op : h->forwardOps)
    for (Value r : op->getResults()) {
      if (!isa<RankedTensorType>(r.getType()) || !usedByBackward(r, *h))
        continue;
      while (auto view = r.getDefiningOp<ReshapeOp>())
        r = view.getOperand();
      kept.insert(r);
    }
  int64_t bytes = 0;
  for (Value v : kept) {
    auto type = cast<RankedTensorType>(v.getType());
    if (isa<BlockArgument>(v))
      continue; // the caller's (a parameter, a batch)
    bytes += type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
  }
  return bytes;
}

namespace {
struct GptcRecomputePass final
    : mlir::gptc::impl::GptcRecomputePassBase<GptcRecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The option, else the module's gptc.recompute, else none.
    Recompute chosen = Recompute::None;
    if (mode == RecomputeMode::Selective) {
      chosen = Recompute::Selective;
    } else if (mode == RecomputeMode::Full) {
      chosen = Recompute::Full;
    } else if (mode == RecomputeMode::None) {
      chosen = Recompute::None;
    } else if (RecomputeAttr attr =
                   GptcDialect::RecomputeAttrHelper(&getContext())
                       .getAttr(module)) {
      chosen = attr.getValue();
    }
    if (chosen == Recompute::None)
      return;
    auto func = SymbolTable(module).lookup<func::FuncOp>(function);
    if (!func) {
      module.emitError("gptc-recompute needs @") << function;
      return signalPassFailure();
    }
    if (failed(recomputeActivations(func, chosen)))
      return signalPassFailure();
  }
};
} // namespace
