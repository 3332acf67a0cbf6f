//===- MixedPrecision.cpp - 16-bit GEMMs, fp32 elsewhere -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The policy of PyTorch's autocast for GEMMs (linear and matmul in bf16 or
// fp16, their results too), with every other op kept in fp32 as
// autocast's fp32 list keeps normalization, softmax and the loss; unlike
// autocast, attention's products stay fp32 too (gptc's causal_attention
// is one op). Every cast is an explicit gptc.cast in the IR.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCMIXEDPRECISIONPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

/// `value` cast to `element`, or null for a null value.
static Value castTo(OpBuilder &b, Location loc, Value value, Type element) {
  if (!value)
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  return CastOp::create(b, loc, type.clone(element), value);
}

namespace {
struct GptcMixedPrecisionPass final
    : mlir::gptc::impl::GptcMixedPrecisionPassBase<GptcMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto precision = module->getAttrOfType<StringAttr>(kPrecisionAttrName);
    if (!precision ||
        (precision.getValue() != "bf16" && precision.getValue() != "fp16"))
      return;
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func)
      return;
    Type low16 = precision.getValue() == "bf16"
                     ? Type(BFloat16Type::get(&getContext()))
                     : Type(Float16Type::get(&getContext()));
    Type f32 = Float32Type::get(&getContext());
    auto isF32 = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType() == f32;
    };
    SmallVector<Operation *> gemms;
    func.walk([&](Operation *op) {
      if (isa<LinearOp, MatmulOp>(op) && llvm::all_of(op->getOperands(), isF32))
        gemms.push_back(op);
    });
    for (Operation *op : gemms) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      Value result;
      // The casts in operand order (as statements: the order of a call's
      // arguments is unspecified).
      SmallVector<Value> low;
      for (Value operand : op->getOperands())
        low.push_back(castTo(b, loc, operand, low16));
      if (auto linear = dyn_cast<LinearOp>(op)) {
        result = LinearOp::create(b, loc, low[0], low[1],
                                  linear.getBias() ? low[2] : Value());
      } else {
        auto matmul = cast<MatmulOp>(op);
        result = MatmulOp::create(b, loc, low[0], low[1],
                                  matmul.getTransposeLhs(),
                                  matmul.getTransposeRhs());
      }
      // Attributes the op carried (tensor-parallel annotations) stay.
      result.getDefiningOp()->setDiscardableAttrs(
          op->getDiscardableAttrDictionary());
      op->getResult(0).replaceAllUsesWith(castTo(b, loc, result, f32));
      op->erase();
    }
  }
};
} // namespace
