//===- ContractionToLinalg.cpp - Matrix products to linalg -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc.matmul and gptc.linear as linalg's named contractions: transposed
// operands through linalg.transpose, batch dimensions collapsed into one
// for linalg.batch_matmul, `linear`'s leading dimensions into the rows of a
// linalg.matmul against the transposed weight, its bias as a broadcast
// add. 16-bit operands accumulate in f32 (the named ops widen them) and the
// result is rounded once, as oneDNN does for the runtime.
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

/// `v` with its last two dimensions swapped.
static Value swapLastTwo(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 1], shape[rank - 2]);
  Value init = emptyTensor(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
}

/// Collapses every dimension before the last `keep` into one.
static Value collapseLeading(OpBuilder &b, Location loc, Value v,
                             int64_t keep) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  if (rank == keep + 1)
    return v;
  SmallVector<ReassociationIndices> groups(1);
  int64_t lead = 1;
  for (int64_t d = 0; d < rank - keep; ++d) {
    groups[0].push_back(d);
    lead *= type.getDimSize(d);
  }
  SmallVector<int64_t> shape{lead};
  for (int64_t d = rank - keep; d < rank; ++d) {
    groups.push_back({d});
    shape.push_back(type.getDimSize(d));
  }
  auto collapsed = RankedTensorType::get(shape, type.getElementType());
  return tensor::CollapseShapeOp::create(b, loc, collapsed, v, groups);
}

/// Expands `v` (the leading dimensions collapsed into one) back to `type`.
static Value expandLeading(OpBuilder &b, Location loc, Value v,
                           RankedTensorType type, int64_t keep) {
  auto from = cast<RankedTensorType>(v.getType());
  if (from.getRank() == type.getRank())
    return v;
  int64_t rank = type.getRank();
  SmallVector<ReassociationIndices> groups(1);
  for (int64_t d = 0; d < rank - keep; ++d)
    groups[0].push_back(d);
  for (int64_t d = rank - keep; d < rank; ++d)
    groups.push_back({d});
  return tensor::ExpandShapeOp::create(b, loc, type, v, groups);
}

namespace {
struct MatmulToLinalg final : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(type.getElementType());
    Value lhs = op.getLhs(), rhs = op.getRhs();
    if (op.getTransposeLhs())
      lhs = swapLastTwo(rewriter, loc, lhs);
    if (op.getTransposeRhs())
      rhs = swapLastTwo(rewriter, loc, rhs);
    int64_t rank = type.getRank();
    Value product;
    if (rank == 2) {
      Value init = filledTensor(rewriter, loc, type.getShape(), acc, 0.0);
      product = linalg::MatmulOp::create(rewriter, loc, ValueRange{lhs, rhs},
                                         ValueRange{init})
                    .getResult(0);
    } else {
      lhs = collapseLeading(rewriter, loc, lhs, 2);
      rhs = collapseLeading(rewriter, loc, rhs, 2);
      int64_t batch = cast<RankedTensorType>(lhs.getType()).getDimSize(0);
      Value init = filledTensor(
          rewriter, loc,
          {batch, type.getDimSize(rank - 2), type.getDimSize(rank - 1)}, acc,
          0.0);
      product = linalg::BatchMatmulOp::create(
                    rewriter, loc, ValueRange{lhs, rhs}, ValueRange{init})
                    .getResult(0);
      product = expandLeading(rewriter, loc, product,
                              RankedTensorType::get(type.getShape(), acc), 2);
    }
    rewriter.replaceOp(
        op, roundTensor(rewriter, loc, product, type.getElementType()));
    return success();
  }
};

/// y[..., n] = sum_k x[..., k] W[n, k] (+ b[n]).
struct LinearToLinalg final : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(type.getElementType());
    Value x = collapseLeading(rewriter, loc, op.getInput(), 1);
    if (cast<RankedTensorType>(x.getType()).getRank() == 1)
      return rewriter.notifyMatchFailure(op, "needs rows to multiply");
    Value wt = swapLastTwo(rewriter, loc, op.getWeight());
    int64_t rows = cast<RankedTensorType>(x.getType()).getDimSize(0);
    int64_t n = type.getDimSize(type.getRank() - 1);
    Value init = filledTensor(rewriter, loc, {rows, n}, acc, 0.0);
    Value y = linalg::MatmulOp::create(rewriter, loc, ValueRange{x, wt},
                                       ValueRange{init})
                  .getResult(0);
    if (Value bias = op.getBias()) {
      AffineMap id = rewriter.getMultiDimIdentityMap(2);
      AffineMap col = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
      Value out = emptyTensor(rewriter, loc, {rows, n}, acc);
      y = buildGeneric(
              rewriter, loc, {y, bias}, {id, col}, {out}, {id}, 2, {},
              [&](OpBuilder &b, Location nested, ValueRange args) {
                Value bv = convertFloat(b, nested, args[1], acc);
                linalg::YieldOp::create(
                    b, nested,
                    arith::AddFOp::create(b, nested, args[0], bv).getResult());
              })
              .getResult(0);
    }
    y = roundTensor(rewriter, loc, y, type.getElementType());
    rewriter.replaceOp(op, expandLeading(rewriter, loc, y, type, 1));
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcContractionToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MatmulToLinalg, LinearToLinalg>(patterns.getContext());
}
