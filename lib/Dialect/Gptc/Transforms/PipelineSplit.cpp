//===- PipelineSplit.cpp - @forward cut into pipeline chunks ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCPIPELINESPLITPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

int64_t mlir::gptc::layerOf(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    StringRef n = name.getName().getValue();
    int64_t layer;
    if (n.consume_front("h.") && !n.consumeInteger(10, layer) &&
        (n.empty() || n.starts_with(".")))
      return layer;
    return layerOf(name.getChildLoc());
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (int64_t layer = layerOf(l); layer >= 0)
        return layer;
  return -1;
}

/// Whether the op belongs after the last layer (the final norm, the head,
/// the loss).
static bool isHead(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    StringRef n = name.getName().getValue();
    if (n == "ln_f" || n == "lm_head" || n == "loss")
      return true;
    return isHead(name.getChildLoc());
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return llvm::any_of(fused.getLocations(), isHead);
  return false;
}

namespace {
struct GptcPipelineSplitPass
    : mlir::gptc::impl::GptcPipelineSplitPassBase<GptcPipelineSplitPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void GptcPipelineSplitPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("gptc-pipeline-split needs @forward");
    return signalPassFailure();
  }
  int64_t n = static_cast<int64_t>(boundaries.size()) + 1;
  for (size_t i = 0; i < boundaries.size(); ++i)
    if (boundaries[i] < 1 || (i && boundaries[i] <= boundaries[i - 1])) {
      module.emitError("pipeline boundaries must be increasing layers >= 1");
      return signalPassFailure();
    }
  auto chunkOfLayer = [&](int64_t layer) {
    int64_t c = 0;
    while (c + 1 < n && layer >= boundaries[c])
      ++c;
    return c;
  };
  Block &body = forward.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // 1. Each op's chunk: its layer's, the last for the head, else the
  //    latest of its operands' (never earlier than those).
  // Ops of no operands (constants, iotas, a rank's shard offset) are
  // cloned into every chunk that uses them instead of crossing a
  // boundary.
  auto isRemat = [](Operation &op) {
    return op.getNumOperands() == 0 && op.getNumRegions() == 0 &&
           op.getNumResults() > 0;
  };
  DenseMap<Operation *, int64_t> chunkOf;
  for (Operation &op : body.without_terminator()) {
    int64_t c = 0;
    int64_t layer = layerOf(op.getLoc());
    if (layer >= 0)
      c = chunkOfLayer(layer);
    else if (isHead(op.getLoc()))
      c = n - 1;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp(); def && !isRemat(*def))
        c = std::max(c, chunkOf.lookup(def));
    if (layer >= 0 && c != chunkOfLayer(layer)) {
      op.emitOpError("of layer ")
          << layer << " reads a value of a later pipeline chunk";
      return signalPassFailure();
    }
    chunkOf[&op] = c;
  }
  for (Value v : ret.getOperands())
    if (Operation *def = v.getDefiningOp())
      if (chunkOf.lookup(def) != n - 1) {
        ret.emitOpError("returns a value that is not computed in the last "
                        "pipeline chunk");
        return signalPassFailure();
      }
  if (layerOf(ret.getLoc()) >= 0 || forward.getNumResults() != 1) {
    forward.emitOpError("must return the loss alone");
    return signalPassFailure();
  }

  // 2. What crosses each boundary b (between chunks b and b + 1): values
  //    defined in chunks <= b and used in chunks > b, in definition order.
  std::vector<SmallVector<Value>> crossing(n);
  for (Operation &op : body.without_terminator())
    for (Value v : op.getResults()) {
      if (isRemat(op))
        continue;
      int64_t def = chunkOf.lookup(&op), last = def;
      for (Operation *user : v.getUsers())
        last = std::max(last, isa<func::ReturnOp>(user) ? n - 1
                                                        : chunkOf.lookup(user));
      if (last > def && !isa<FloatType>(getElementTypeOrSelf(v.getType()))) {
        op.emitOpError("computes a value of another pipeline chunk that is "
                       "not floating point; it cannot cross a boundary");
        return signalPassFailure();
      }
      for (int64_t b = def; b < last; ++b)
        crossing[b].push_back(v);
    }

  // 3. The chunk functions.
  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(forward);
  SymbolTable symbols(module);
  auto build = [&](int64_t c, bool objective) -> func::FuncOp {
    SmallVector<Value> ins(c ? crossing[c - 1] : SmallVector<Value>());
    // Arguments of @forward the chunk's ops use.
    llvm::SetVector<BlockArgument> used;
    for (Operation &op : body.without_terminator())
      if (chunkOf.lookup(&op) == c)
        for (Value v : op.getOperands())
          if (auto arg = dyn_cast<BlockArgument>(v))
            used.insert(arg);
    SmallVector<BlockArgument> args(used.begin(), used.end());
    llvm::sort(args, [](BlockArgument a, BlockArgument b) {
      return a.getArgNumber() < b.getArgNumber();
    });
    SmallVector<Value> outs(c + 1 < n ? crossing[c]
                                      : SmallVector<Value>(ret.getOperands()));
    SmallVector<Type> argTypes, resultTypes;
    for (BlockArgument a : args)
      argTypes.push_back(a.getType());
    for (Value v : ins)
      argTypes.push_back(v.getType());
    if (objective)
      for (Value v : outs)
        argTypes.push_back(v.getType());
    if (objective)
      resultTypes.push_back(RankedTensorType::get({}, builder.getF32Type()));
    else
      for (Value v : outs)
        resultTypes.push_back(v.getType());
    std::string name =
        "chunk" + std::to_string(c) + (objective ? "_objective" : "");
    auto func =
        func::FuncOp::create(builder, forward.getLoc(), name,
                             builder.getFunctionType(argTypes, resultTypes));
    Block *entry = func.addEntryBlock();
    IRMapping map;
    unsigned i = 0;
    for (BlockArgument a : args) {
      func.setArgAttrs(i, forward.getArgAttrDict(a.getArgNumber()));
      map.map(a, entry->getArgument(i++));
    }
    for (auto [k, v] : llvm::enumerate(ins)) {
      func.setArgAttr(i, kPipelineInAttrName, builder.getI64IntegerAttr(k));
      func.setArgAttr(i, kParamAttrName,
                      builder.getStringAttr("pipeline.in." + Twine(k)));
      map.map(v, entry->getArgument(i++));
    }
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    for (Operation &op : body.without_terminator()) {
      bool used = isRemat(op) && llvm::any_of(op.getUsers(), [&](Operation *u) {
                    return !isa<func::ReturnOp>(u) && chunkOf.lookup(u) == c;
                  });
      if (used || (!isRemat(op) && chunkOf.lookup(&op) == c))
        b.clone(op, map);
    }
    SmallVector<Value> results;
    for (Value v : outs)
      results.push_back(map.lookup(v));
    if (objective) {
      // sum_k <out_k, cot_k>: the scalar whose gradient is the VJP.
      Value total;
      for (auto [k, y] : llvm::enumerate(results)) {
        func.setArgAttr(i, kInputAttrName,
                        InputAttr::get(builder.getContext(),
                                       InputKind::Cotangent, StringAttr(), k));
        Value cot = entry->getArgument(i++);
        auto type = cast<RankedTensorType>(y.getType());
        auto row = RankedTensorType::get({1, type.getNumElements()},
                                         type.getElementType());
        Location loc = y.getLoc();
        Value a = ReshapeOp::create(b, loc, row, y);
        Value g = ReshapeOp::create(b, loc, row, cot);
        Value dot = MatmulOp::create(b, loc, a, g, /*transpose_lhs=*/false,
                                     /*transpose_rhs=*/true);
        Value scalar = ReshapeOp::create(
            b, loc, RankedTensorType::get({}, type.getElementType()), dot);
        total =
            total ? AddOp::create(b, loc, total, scalar).getResult() : scalar;
      }
      results = {total};
    } else {
      for (unsigned k = 0; k < results.size(); ++k)
        func.setResultAttr(
            k, kOutputAttrName,
            c + 1 < n
                ? OutputAttr::get(builder.getContext(), OutputKind::Boundary,
                                  StringAttr(), k)
                : OutputAttr::get(builder.getContext(), OutputKind::Loss));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    symbols.insert(func);
    builder.setInsertionPointAfter(func);
    return func;
  };
  for (int64_t c = 0; c < n; ++c) {
    build(c, /*objective=*/false);
    if (c + 1 < n)
      build(c, /*objective=*/true);
  }
}
