//===- SplitBackward.cpp - A chunk's backward in two halves -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-split-backward: the zero-bubble pipeline schedules run a chunk's
// backward as two computations, the gradient of its input (which the
// previous stage waits for) and, later, the gradients of its parameters
// (which nobody waits for). The halves are slices of the backward the
// autodiff wrote: the input half is what its input-gradient results (and
// the last chunk's loss) depend on; the weight half is the rest of what the
// parameter gradients need, reading the values the input half saved for it.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCSPLITBACKWARDPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
struct GptcSplitBackwardPass
    : mlir::gptc::impl::GptcSplitBackwardPassBase<GptcSplitBackwardPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// The values defined outside `op` that it (or an op nested in it) reads.
static void operandsOf(Operation *op, SmallVectorImpl<Value> &out) {
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentBlock()->getParentOp()))
        out.push_back(v);
  });
}

/// The ops of `block` that `roots` depend on.
static llvm::SmallPtrSet<Operation *, 32> sliceOf(Block &block,
                                                  ArrayRef<Value> roots) {
  llvm::SmallPtrSet<Operation *, 32> in;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &block || !in.insert(def).second)
      continue;
    operandsOf(def, work);
  }
  return in;
}

/// `f`'s arguments that `used` holds, as a new function's argument list.
static void keepArguments(func::FuncOp f, const llvm::SetVector<Value> &used,
                          SmallVectorImpl<Type> &types,
                          SmallVectorImpl<DictionaryAttr> &attrs,
                          SmallVectorImpl<Value> &kept) {
  for (BlockArgument arg : f.getArguments())
    if (used.contains(arg)) {
      types.push_back(arg.getType());
      attrs.push_back(f.getArgAttrDict(arg.getArgNumber()));
      kept.push_back(arg);
    }
}

static LogicalResult splitBackward(func::FuncOp f, StringRef chunk) {
  MLIRContext *ctx = f.getContext();
  if (!llvm::hasSingleElement(f.getBody()))
    return f.emitOpError("must have one block to be split");
  Block &body = f.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return f.emitOpError("must end in func.return to be split");
  // The received values (differentiated as parameters) by name, and
  // whether a cotangent seeds the backward (every chunk but the last).
  llvm::StringSet<> received;
  bool seeded = false;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (f.getArgAttr(i, kPipelineInAttrName))
      if (auto p = f.getArgAttrOfType<StringAttr>(i, kParamAttrName))
        received.insert(p.getValue());
    if (auto in = f.getArgAttrOfType<InputAttr>(i, kInputAttrName))
      seeded |= in.getKind() == InputKind::Cotangent;
  }
  // Results: the input half's (the received values' gradients; the loss,
  // unless a cotangent seeds the backward: then it is the objective,
  // which nobody reads) and the weight half's (the parameters').
  SmallVector<unsigned> inputResults, weightResults;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    if (auto out = f.getResultAttrOfType<OutputAttr>(r, kOutputAttrName);
        out && out.getKind() == OutputKind::Loss) {
      if (!seeded)
        inputResults.push_back(r);
      continue;
    }
    auto g = f.getResultAttrOfType<StringAttr>(r, kGradAttrName);
    if (!g)
      return f.emitOpError("result ")
             << r << " is neither the loss nor a gradient: cannot split it";
    (received.contains(g.getValue()) ? inputResults : weightResults)
        .push_back(r);
  }
  SmallVector<Value> inputRoots;
  for (unsigned r : inputResults)
    inputRoots.push_back(ret.getOperand(r));
  llvm::SmallPtrSet<Operation *, 32> inputOps = sliceOf(body, inputRoots);
  // A parameter gradient the input half computes anyway (a norm's weight
  // gradient, a result of the op that gives its input gradient) is
  // returned by it.
  SmallVector<unsigned> weightOnly;
  for (unsigned r : weightResults) {
    Operation *def = ret.getOperand(r).getDefiningOp();
    if (!def || def->getBlock() != &body)
      return f.emitOpError("returns an argument as the gradient of result ")
             << r << ": cannot split it";
    (inputOps.contains(def) ? inputResults : weightOnly).push_back(r);
  }
  weightResults = std::move(weightOnly);
  inputRoots.clear();
  for (unsigned r : inputResults)
    inputRoots.push_back(ret.getOperand(r));
  SmallVector<Value> weightRoots;
  for (unsigned r : weightResults)
    weightRoots.push_back(ret.getOperand(r));
  llvm::SmallPtrSet<Operation *, 32> weightNeeds = sliceOf(body, weightRoots);

  // The weight half: the ops the parameters' gradients need that the
  // input half does not compute; a value it reads from the input half is
  // saved, unless its op has no operands (a constant, an iota): computed
  // again.
  llvm::SmallPtrSet<Operation *, 32> inWeight;
  for (Operation *op : weightNeeds)
    if (!inputOps.contains(op))
      inWeight.insert(op);
  llvm::SetVector<Value> saved, weightArgs, inputArgs;
  SmallVector<Operation *> again;
  auto readByWeight = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == &body)
        weightArgs.insert(v);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (def->getBlock() != &body || inWeight.contains(def))
      return;
    if (def->getNumOperands() == 0 && def->getNumRegions() == 0)
      again.push_back(def);
    else
      saved.insert(v);
  };
  for (Operation *op : inWeight) {
    SmallVector<Value> operands;
    operandsOf(op, operands);
    for (Value v : operands)
      readByWeight(v);
  }
  inWeight.insert(again.begin(), again.end());
  SmallVector<Operation *> weightOps;
  for (Operation &op : body.without_terminator())
    if (inWeight.contains(&op))
      weightOps.push_back(&op);
  // The saved values in the order the input half computes them.
  SmallVector<Value> savedOrder(saved.begin(), saved.end());
  llvm::stable_sort(savedOrder, [](Value a, Value b) {
    return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp());
  });
  for (Operation &op : body.without_terminator())
    if (inputOps.contains(&op)) {
      SmallVector<Value> operands;
      operandsOf(&op, operands);
      for (Value v : operands)
        if (isa<BlockArgument>(v))
          inputArgs.insert(v);
    }
  for (Value v : inputRoots)
    if (isa<BlockArgument>(v))
      inputArgs.insert(v);

  OpBuilder b(ctx);
  b.setInsertionPoint(f);
  Location loc = f.getLoc();
  auto makeFunc = [&](StringRef name, ArrayRef<Type> argTypes,
                      ArrayRef<DictionaryAttr> argAttrs,
                      ArrayRef<Type> resultTypes,
                      ArrayRef<DictionaryAttr> resultAttrs) {
    auto g = func::FuncOp::create(b, loc, name,
                                  b.getFunctionType(argTypes, resultTypes));
    g.setVisibility(f.getVisibility());
    for (NamedAttribute a : f->getDiscardableAttrs())
      g->setAttr(a.getName(), a.getValue());
    g.setAllArgAttrs(argAttrs);
    g.setAllResultAttrs(resultAttrs);
    g.addEntryBlock();
    return g;
  };

  // The input half.
  {
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    SmallVector<Value> args;
    keepArguments(f, inputArgs, argTypes, argAttrs, args);
    for (unsigned r : inputResults) {
      resultTypes.push_back(f.getResultTypes()[r]);
      resultAttrs.push_back(f.getResultAttrDict(r));
    }
    for (auto [k, v] : llvm::enumerate(savedOrder)) {
      resultTypes.push_back(v.getType());
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          kOutputAttrName, OutputAttr::get(ctx, OutputKind::Saved, StringAttr(),
                                           static_cast<int64_t>(k)))));
    }
    func::FuncOp g = makeFunc((chunk + "_backward_input").str(), argTypes,
                              argAttrs, resultTypes, resultAttrs);
    IRMapping map;
    for (auto [from, to] : llvm::zip(args, g.getArguments()))
      map.map(from, to);
    OpBuilder ib = OpBuilder::atBlockEnd(&g.getBody().front());
    for (Operation &op : body.without_terminator())
      if (inputOps.contains(&op))
        ib.clone(op, map);
    SmallVector<Value> results;
    for (Value v : inputRoots)
      results.push_back(map.lookup(v));
    for (Value v : savedOrder)
      results.push_back(map.lookup(v));
    func::ReturnOp::create(ib, loc, results);
  }
  // The weight half.
  {
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    SmallVector<Value> args;
    keepArguments(f, weightArgs, argTypes, argAttrs, args);
    for (auto [k, v] : llvm::enumerate(savedOrder)) {
      argTypes.push_back(v.getType());
      argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          kInputAttrName, InputAttr::get(ctx, InputKind::Saved, StringAttr(),
                                         static_cast<int64_t>(k)))));
    }
    for (unsigned r : weightResults) {
      resultTypes.push_back(f.getResultTypes()[r]);
      resultAttrs.push_back(f.getResultAttrDict(r));
    }
    func::FuncOp g = makeFunc((chunk + "_backward_weight").str(), argTypes,
                              argAttrs, resultTypes, resultAttrs);
    IRMapping map;
    for (auto [from, to] : llvm::zip(args, g.getArguments()))
      map.map(from, to);
    for (auto [k, v] : llvm::enumerate(savedOrder))
      map.map(v, g.getArgument(args.size() + k));
    OpBuilder wb = OpBuilder::atBlockEnd(&g.getBody().front());
    for (Operation *op : weightOps)
      wb.clone(*op, map);
    SmallVector<Value> results;
    for (Value v : weightRoots)
      results.push_back(map.lookup(v));
    func::ReturnOp::create(wb, loc, results);
  }
  f.erase();
  return success();
}

void GptcSplitBackwardPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<std::pair<func::FuncOp, std::string>> backwards;
  for (int64_t c = 0;; ++c) {
    std::string chunk = "chunk" + std::to_string(c);
    auto f = module.lookupSymbol<func::FuncOp>(chunk + "_backward");
    if (!f)
      break;
    backwards.push_back({f, chunk});
  }
  if (backwards.empty()) {
    module.emitError("gptc-split-backward needs @chunk<c>_backward "
                     "functions (gptc-pipeline-split, then gptc-autodiff)");
    return signalPassFailure();
  }
  for (auto &[f, chunk] : backwards) {
    if (module.lookupSymbol(chunk + "_backward_input") ||
        module.lookupSymbol(chunk + "_backward_weight")) {
      f.emitOpError("is already split: @")
          << chunk << "_backward_input or _weight exists";
      return signalPassFailure();
    }
    if (failed(splitBackward(f, chunk)))
      return signalPassFailure();
  }
}
