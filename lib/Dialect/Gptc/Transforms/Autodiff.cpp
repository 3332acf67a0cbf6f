//===- Autodiff.cpp - Reverse-mode differentiation of a model -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Builds @forward_backward from @forward: the forward ops, then their
// vector-Jacobian products in reverse order, returning the loss and the
// gradient of every parameter.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCAUTODIFFPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

#define DEBUG_TYPE "gptc-autodiff"

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

/// A constant tensor of `type` filled with `value`.
static Value splat(OpBuilder &b, Location loc, Type type, double value) {
  auto tensor = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, tensor,
      DenseElementsAttr::get(tensor,
                             b.getFloatAttr(tensor.getElementType(), value)));
}

/// Checks that `func` can be differentiated: one block, one scalar float
/// result.
static LogicalResult checkDifferentiable(func::FuncOp func) {
  if (!llvm::hasSingleElement(func.getBody()))
    return func.emitOpError("must have a single block to be differentiated");
  FunctionType type = func.getFunctionType();
  auto loss = type.getNumResults() == 1
                  ? dyn_cast<RankedTensorType>(type.getResult(0))
                  : RankedTensorType();
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return func.emitOpError(
        "must return exactly one scalar floating-point loss to be "
        "differentiated");
  return success();
}

/// Appends the backward ops to the body of `func` (a clone of the forward
/// function) and makes it return the loss and the parameter gradients.
/// With `scaledSeed` the seed is a new last argument, the loss scale, and
/// the gradients are those of the loss times it.
static LogicalResult differentiate(func::FuncOp func, bool scaledSeed) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  OpBuilder b(ret);

  // 1. Seed: d loss / d loss = 1, or the loss scale (fp16).
  DenseMap<Value, Value> grads;
  if (scaledSeed) {
    if (failed(func.insertArgument(
            func.getNumArguments(), loss.getType(),
            b.getDictionaryAttr(b.getNamedAttr(
                kInputAttrName,
                InputAttr::get(b.getContext(), InputKind::LossScale))),
            loss.getLoc())))
      return func.emitOpError("cannot take the loss scale as an argument");
    grads[loss] = body.getArguments().back();
  } else {
    grads[loss] = splat(b, loss.getLoc(), loss.getType(), 1.0);
  }

  // 2. Visit the forward ops in reverse; every backward op is inserted
  //    before the return, so the backward ops run in reverse order too.
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool reached = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
      reached |= bool(resultGrads.back());
    }
    // Ops the loss does not depend on need no rule.
    if (!reached)
      continue;
    auto rule = dyn_cast<AutodiffOpInterface>(op);
    if (!rule)
      return op->emitOpError(
          "has no vector-Jacobian rule: gptc-autodiff cannot differentiate "
          "through it");
    SmallVector<Value> operandGrads;
    if (failed(rule.buildVectorJacobianProduct(b, resultGrads, operandGrads)))
      return op->emitOpError("failed to build its vector-Jacobian product");
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("vector-Jacobian rule returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands()
             << " operands";
    // 3. A value used several times sums the gradients of its uses.
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad)
        continue;
      if (grad.getType() != operand.getType())
        return op->emitOpError("vector-Jacobian rule gives a gradient of type ")
               << grad.getType() << " for an operand of type "
               << operand.getType();
      Value &sum = grads[operand];
      sum = sum ? AddOp::create(b, op->getLoc(), sum, grad).getResult() : grad;
    }
  }

  // 4. Return the loss and each parameter's gradient, zero when the loss
  //    does not depend on it.
  SmallVector<Value> results{loss};
  SmallVector<StringAttr> names;
  for (BlockArgument arg : body.getArguments()) {
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
    if (!name)
      continue;
    Value grad = grads.lookup(arg);
    results.push_back(grad ? grad : splat(b, arg.getLoc(), arg.getType(), 0.0));
    names.push_back(name);
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();

  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  func.setFunctionType(FunctionType::get(func.getContext(),
                                         body.getArgumentTypes(), resultTypes));
  // The forward function's result attributes describe its one result.
  func.removeResAttrsAttr();
  func.setResultAttr(0, kOutputAttrName,
                     OutputAttr::get(b.getContext(), OutputKind::Loss));
  for (auto [i, name] : llvm::enumerate(names))
    func.setResultAttr(i + 1, kGradAttrName, name);
  return success();
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct GptcAutodiffPass final
    : mlir::gptc::impl::GptcAutodiffPassBase<GptcAutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto forward = symbols.lookup<func::FuncOp>(function);
    if (!forward) {
      module.emitError("gptc-autodiff: no function '") << function << "'";
      return signalPassFailure();
    }
    if (symbols.lookup(output)) {
      forward.emitError("gptc-autodiff: the module already has a symbol '")
          << output << "'";
      return signalPassFailure();
    }
    if (failed(checkDifferentiable(forward)))
      return signalPassFailure();

    auto clone = cast<func::FuncOp>(forward->clone());
    clone.setSymName(output);
    symbols.insert(clone, std::next(Block::iterator(forward)));
    // fp16 scales the loss (dynamic loss scaling): the backward is seeded
    // with the scale, an argument the training step feeds from its state.
    // A vector-Jacobian objective (a pipeline chunk's, which takes the
    // cotangents of its outputs) is not: its cotangents already carry the
    // scale of the loss they came from.
    bool vjp = llvm::any_of(forward.getArguments(), [&](BlockArgument a) {
      auto input =
          forward.getArgAttrOfType<InputAttr>(a.getArgNumber(), kInputAttrName);
      return input && input.getKind() == InputKind::Cotangent;
    });
    bool scaled = getPrecision(module) == Precision::FP16 && !vjp;
    if (failed(differentiate(clone, scaled)))
      return signalPassFailure();
  }
};
} // namespace
