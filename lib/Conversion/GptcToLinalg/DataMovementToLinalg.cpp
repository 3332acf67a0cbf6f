//===- DataMovementToLinalg.cpp - Layout ops to linalg ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The ops that move or sum data without arithmetic of their own: constant
// (arith.constant), iota (linalg.generic on linalg.index), reshape
// (tensor.reshape), transpose (linalg.transpose), split
// (tensor.extract_slice), concat (tensor.concat), broadcast
// (linalg.broadcast) and reduce_sum (linalg.generic with reduction loops,
// 16-bit floats summed in f32 as the runtime does).
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

namespace {
struct ConstantToArith final : OpRewritePattern<ConstantOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConstantOp op,
                                PatternRewriter &rewriter) const override {
    auto value = dyn_cast<TypedAttr>(op.getValue());
    if (!value)
      return rewriter.notifyMatchFailure(op, "not a typed constant");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, value);
    return success();
  }
};

/// result[i...] = i_d, the index along `dimension`.
struct IotaToLinalg final : OpRewritePattern<IotaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(IotaOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Location loc = op.getLoc();
    int64_t rank = type.getRank();
    Value init =
        emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
    int64_t dim = static_cast<int64_t>(op.getDimension());
    auto generic = buildGeneric(
        rewriter, loc, {}, {}, {init}, {rewriter.getMultiDimIdentityMap(rank)},
        rank, {}, [&](OpBuilder &b, Location nested, ValueRange) {
          Value i = linalg::IndexOp::create(b, nested, dim);
          Value v =
              arith::IndexCastOp::create(b, nested, type.getElementType(), i);
          linalg::YieldOp::create(b, nested, v);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// Static shapes: a reshape reinterprets the row-major elements.
struct ReshapeToTensor final : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Location loc = op.getLoc();
    SmallVector<int64_t> dims(type.getShape());
    auto shapeType =
        RankedTensorType::get({type.getRank()}, rewriter.getIndexType());
    Value shape = arith::ConstantOp::create(
        rewriter, loc,
        DenseIntElementsAttr::get(shapeType,
                                  llvm::map_to_vector(dims, [](int64_t d) {
                                    return APInt(64, static_cast<uint64_t>(d));
                                  })));
    rewriter.replaceOpWithNewOp<tensor::ReshapeOp>(op, type, op.getInput(),
                                                   shape);
    return success();
  }
};

struct TransposeToLinalg final : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Value init = emptyTensor(rewriter, op.getLoc(), type.getShape(),
                             type.getElementType());
    auto t = linalg::TransposeOp::create(rewriter, op.getLoc(), op.getInput(),
                                         init, op.getPermutation());
    rewriter.replaceOp(op, t.getResults());
    return success();
  }
};

/// Each result is the slice of the input at its offset along `axis`.
struct SplitToTensor final : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    auto input = cast<RankedTensorType>(op.getInput().getType());
    int64_t axis = static_cast<int64_t>(op.getAxis()), offset = 0;
    SmallVector<Value> pieces;
    for (Value r : op.getResults()) {
      auto type = cast<RankedTensorType>(r.getType());
      SmallVector<int64_t> offsets(input.getRank(), 0);
      SmallVector<int64_t> strides(input.getRank(), 1);
      offsets[axis] = offset;
      pieces.push_back(tensor::ExtractSliceOp::create(
          rewriter, op.getLoc(), type, op.getInput(), ValueRange{},
          ValueRange{}, ValueRange{}, rewriter.getDenseI64ArrayAttr(offsets),
          rewriter.getDenseI64ArrayAttr(type.getShape()),
          rewriter.getDenseI64ArrayAttr(strides)));
      offset += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, pieces);
    return success();
  }
};

struct ConcatToTensor final : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(
        op, op.getType(), static_cast<uint64_t>(op.getAxis()), op.getInputs());
    return success();
  }
};

/// gptc.broadcast's `dimensions` are the result's new dimensions, as in
/// linalg.broadcast.
struct BroadcastToLinalg final : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Value init = emptyTensor(rewriter, op.getLoc(), type.getShape(),
                             type.getElementType());
    auto bc = linalg::BroadcastOp::create(rewriter, op.getLoc(), op.getInput(),
                                          init, op.getDimensions());
    rewriter.replaceOp(op, bc.getResults());
    return success();
  }
};

/// Sums over `dimensions` in the accumulator type, then converts.
struct ReduceSumToLinalg final : OpRewritePattern<ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceSumOp op,
                                PatternRewriter &rewriter) const override {
    auto input = cast<RankedTensorType>(op.getInput().getType());
    auto type = cast<RankedTensorType>(op.getType());
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    FloatType acc = accumulatorType(type.getElementType());
    int64_t rank = input.getRank();
    ArrayRef<int64_t> dims = op.getDimensions();
    Value init = filledTensor(rewriter, loc, type.getShape(), acc, 0.0);
    auto sum = buildGeneric(
        rewriter, loc, {op.getInput()}, {rewriter.getMultiDimIdentityMap(rank)},
        {init}, {dropDims(ctx, rank, dims)}, rank, dims,
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value x = convertFloat(b, nested, args[0], acc);
          linalg::YieldOp::create(
              b, nested,
              arith::AddFOp::create(b, nested, x, args[1]).getResult());
        });
    Value result =
        roundTensor(rewriter, loc, sum.getResult(0), type.getElementType());
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcDataMovementToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns
      .add<ConstantToArith, IotaToLinalg, ReshapeToTensor, TransposeToLinalg,
           SplitToTensor, ConcatToTensor, BroadcastToLinalg, ReduceSumToLinalg>(
          patterns.getContext());
}
