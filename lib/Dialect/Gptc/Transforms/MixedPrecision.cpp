//===- MixedPrecision.cpp - 16-bit GEMMs, fp32 elsewhere -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The policy of PyTorch's autocast: GEMMs (linear and matmul) and
// attention (causal_attention, autocast's scaled_dot_product_attention)
// take bf16 or fp16 operands and give results of that type, every other op
// stays fp32 as autocast's fp32 list keeps normalization, softmax and the
// loss. Every cast is an explicit gptc.cast in the IR; a cast back to the
// 16-bit type of a value just widened folds away, so a projection's 16-bit
// result feeds attention directly. Ring attention's steps take 16-bit
// queries, keys and values and give fp32 outputs (the merges across steps
// stay fp32, as Transformer Engine's ring accumulates).
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
    Precision precision = getPrecision(module);
    if (precision == Precision::FP32)
      return;
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func)
      return;
    Type low16 = precision == Precision::BF16
                     ? Type(BFloat16Type::get(&getContext()))
                     : Type(Float16Type::get(&getContext()));
    Type f32 = Float32Type::get(&getContext());
    // Attention's positions (integers) are read as they are.
    auto isInteger = [](Value v) {
      return isa<IntegerType>(getElementTypeOrSelf(v.getType()));
    };
    auto isF32 = [&](Value v) {
      return isInteger(v) ||
             cast<RankedTensorType>(v.getType()).getElementType() == f32;
    };
    SmallVector<Operation *> gemms;
    func.walk([&](Operation *op) {
      if (isa<LinearOp, MatmulOp, CausalAttentionOp, AttentionBlockOp>(op) &&
          llvm::all_of(op->getOperands(), isF32))
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
        low.push_back(isInteger(operand) ? operand
                                         : castTo(b, loc, operand, low16));
      if (auto block = dyn_cast<AttentionBlockOp>(op)) {
        // A ring step: 16-bit operands, fp32 output and log-sum-exp.
        auto step =
            AttentionBlockOp::create(b, loc, low[0], low[1], low[2], low[3],
                                     low[4], block.getNumHeadsAttr());
        step->setDiscardableAttrs(op->getDiscardableAttrDictionary());
        op->replaceAllUsesWith(step);
        op->erase();
        continue;
      }
      if (auto linear = dyn_cast<LinearOp>(op)) {
        result = LinearOp::create(b, loc, low[0], low[1],
                                  linear.getBias() ? low[2] : Value());
      } else if (auto attention = dyn_cast<CausalAttentionOp>(op)) {
        result = CausalAttentionOp::create(b, loc, low[0], low[1], low[2],
                                           attention.getNumHeads(),
                                           attention.getPositions());
      } else {
        auto matmul = cast<MatmulOp>(op);
        result =
            MatmulOp::create(b, loc, low[0], low[1], matmul.getTransposeLhs(),
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
