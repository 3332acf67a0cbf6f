//===- OpsTest.cpp - gptc op builders, inference, FLOPs -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::gptc;

namespace {

class OpsTest : public ::testing::Test {
protected:
  OpsTest() : b(&ctx) {
    ctx.loadDialect<GptcDialect>();
    module = ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(module->getBody());
  }
  /// A value of the given type (a constant of zeros).
  Value value(ArrayRef<int64_t> shape, Type element = {}) {
    auto type =
        RankedTensorType::get(shape, element ? element : b.getF32Type());
    Attribute zero =
        isa<FloatType>(type.getElementType())
            ? Attribute(b.getFloatAttr(type.getElementType(), 0))
            : Attribute(b.getIntegerAttr(type.getElementType(), 0));
    return ConstantOp::create(b, b.getUnknownLoc(), type,
                              DenseElementsAttr::get(type, zero));
  }

  MLIRContext ctx;
  OpBuilder b;
  OwningOpRef<ModuleOp> module;
};

TEST_F(OpsTest, LinearInfersItsResultAndCountsFlops) {
  Value x = value({4, 8, 16}), w = value({32, 16}), bias = value({32});
  auto op = LinearOp::create(b, b.getUnknownLoc(), x, w, bias);
  EXPECT_EQ(op.getType(), RankedTensorType::get({4, 8, 32}, b.getF32Type()));
  EXPECT_EQ(op.getFlopCount(), 2 * 4 * 8 * 32 * 16 + 4 * 8 * 32);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(OpsTest, MatmulTransposedOperands) {
  Value a = value({2, 16, 8}), c = value({2, 5, 8});
  auto op = MatmulOp::create(b, b.getUnknownLoc(), a, c,
                             /*transpose_lhs=*/false, /*transpose_rhs=*/true);
  EXPECT_EQ(op.getType(), RankedTensorType::get({2, 16, 5}, b.getF32Type()));
  EXPECT_EQ(op.getFlopCount(), 2 * 2 * 16 * 5 * 8);
}

TEST_F(OpsTest, InferenceWithoutLocationFailsQuietly) {
  Value x = value({4, 16}), w = value({32, 15});
  SmallVector<Type> types;
  LinearOp::Adaptor adaptor(ValueRange{x, w}, b.getDictionaryAttr({}));
  EXPECT_TRUE(
      failed(LinearOp::inferReturnTypes(&ctx, std::nullopt, adaptor, types)));
  EXPECT_TRUE(types.empty());
}

TEST_F(OpsTest, AttentionFlopsCountTheFullSquare) {
  Value q = value({2, 10, 12});
  auto op = CausalAttentionOp::create(b, b.getUnknownLoc(), q, q, q,
                                      b.getI64IntegerAttr(3), Value());
  EXPECT_EQ(op.getType(), q.getType());
  EXPECT_EQ(op.getFlopCount(), 4 * 2 * 10 * 10 * 12 + 5 * 2 * 3 * 10 * 10);
}

// Context parallelism's attention: 4 query rows of a 10-token sequence
// against all 10 keys; the products count Tq x Tk.
TEST_F(OpsTest, PositionedAttentionFlopsCountQueriesTimesKeys) {
  Value q = value({2, 4, 12});
  Value kv = value({2, 10, 12});
  Value positions = value({4}, b.getI32Type());
  auto op = CausalAttentionOp::create(b, b.getUnknownLoc(), q, kv, kv,
                                      b.getI64IntegerAttr(3), positions);
  EXPECT_EQ(op.getType(), q.getType());
  EXPECT_EQ(op.getFlopCount(), 4 * 2 * 4 * 10 * 12 + 5 * 2 * 3 * 4 * 10);
  auto grad = CausalAttentionGradOp::create(b, b.getUnknownLoc(), q, kv, kv, q,
                                            b.getI64IntegerAttr(3), positions);
  EXPECT_EQ(grad.getQueryGrad().getType(), q.getType());
  EXPECT_EQ(grad.getKeyGrad().getType(), kv.getType());
  EXPECT_EQ(grad.getValueGrad().getType(), kv.getType());
}

TEST_F(OpsTest, EmbeddingAndLoss) {
  Value ids = value({4, 8}, b.getI32Type());
  Value table = value({100, 16});
  auto emb = EmbeddingOp::create(b, b.getUnknownLoc(), ids, table, Value());
  EXPECT_EQ(emb.getType(), RankedTensorType::get({4, 8, 16}, b.getF32Type()));
  Value logits = value({4, 8, 100});
  auto loss = CrossEntropyOp::create(b, b.getUnknownLoc(), logits, ids, Value(),
                                     IntegerAttr());
  EXPECT_EQ(loss.getType(), RankedTensorType::get({}, b.getF32Type()));
  EXPECT_TRUE(succeeded(verify(*module)));
}

/// Absurd shapes saturate instead of overflowing.
TEST_F(OpsTest, FlopCountsSaturate) {
  auto big = RankedTensorType::get({int64_t(1) << 31, int64_t(1) << 31},
                                   b.getF32Type());
  OperationState state(b.getUnknownLoc(), GeluOp::getOperationName());
  Value x = value({2});
  state.addOperands(x);
  state.addTypes(big);
  auto gelu = cast<GeluOp>(b.create(state));
  EXPECT_EQ(gelu.getFlopCount(), std::numeric_limits<int64_t>::max());
  gelu->erase();
}

} // namespace
