//===- NormalizationToLinalg.cpp - Row normalizations to linalg -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc.layer_norm and gptc.softmax, which normalize each row (the last
// dimension), as linalg.generic reductions over that dimension followed by
// one elementwise generic: the runtime kernels' formulas (two-pass mean and
// biased variance; softmax shifted by the row's maximum), accumulated in
// f32 for 16-bit floats.
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

namespace {
/// The maps of a row computation over `rank` loops: the element, its row
/// (every loop but the last) and its column (the last loop).
struct RowMaps {
  int64_t rank;
  AffineMap element, row, column;
  SmallVector<int64_t> rowShape;

  RowMaps(MLIRContext *ctx, RankedTensorType type)
      : rank(type.getRank()),
        element(AffineMap::getMultiDimIdentityMap(rank, ctx)),
        row(dropDims(ctx, rank, {rank - 1})),
        column(AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, ctx)}, ctx)),
        rowShape(type.getShape().drop_back()) {}
};

/// A reduction over the last dimension of `inputs` (read through `maps`)
/// into one value per row, starting from `initial`.
Value reduceRows(
    OpBuilder &b, Location loc, const RowMaps &m, FloatType acc, double initial,
    ValueRange inputs, ArrayRef<AffineMap> maps,
    function_ref<Value(OpBuilder &, Location, ValueRange, Value)> combine) {
  Value init = filledTensor(b, loc, m.rowShape, acc, initial);
  return buildGeneric(
             b, loc, inputs, maps, {init}, {m.row}, m.rank, {m.rank - 1},
             [&](OpBuilder &nb, Location nested, ValueRange args) {
               Value r = combine(nb, nested, args.drop_back(), args.back());
               linalg::YieldOp::create(nb, nested, r);
             })
      .getResult(0);
}

/// Each row's sum and sum of squared deviations from its mean (two passes,
/// as the runtime's kernels): what layer norm and its gradient need.
std::pair<Value, Value> rowMoments(OpBuilder &b, Location loc, const RowMaps &m,
                                   FloatType acc, Value x) {
  double cols = static_cast<double>(
      cast<RankedTensorType>(x.getType()).getDimSize(m.rank - 1));
  Value sum = reduceRows(
      b, loc, m, acc, 0.0, {x}, {m.element},
      [&](OpBuilder &nb, Location l, ValueRange in, Value s) -> Value {
        return arith::AddFOp::create(nb, l, convertFloat(nb, l, in[0], acc), s);
      });
  Value squares = reduceRows(
      b, loc, m, acc, 0.0, {x, sum}, {m.element, m.row},
      [&](OpBuilder &nb, Location l, ValueRange in, Value s) -> Value {
        Value mean = arith::DivFOp::create(
            nb, l, in[1],
            arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, cols)));
        Value d =
            arith::SubFOp::create(nb, l, convertFloat(nb, l, in[0], acc), mean);
        return arith::AddFOp::create(nb, l, arith::MulFOp::create(nb, l, d, d),
                                     s);
      });
  return {sum, squares};
}

struct LayerNormToLinalg final : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Type element = type.getElementType();
    FloatType acc = accumulatorType(element);
    RowMaps m(op.getContext(), type);
    double cols = static_cast<double>(type.getDimSize(m.rank - 1));
    double eps = op.getEpsilon().convertToDouble();
    auto constant = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, v));
    };
    Value x = op.getInput();
    Value sum, squares;
    std::tie(sum, squares) = rowMoments(rewriter, loc, m, acc, x);
    Value out = emptyTensor(rewriter, loc, type.getShape(), element);
    auto y = buildGeneric(
        rewriter, loc, {x, sum, squares, op.getGamma(), op.getBeta()},
        {m.element, m.row, m.row, m.column, m.column}, {out}, {m.element},
        m.rank, {}, [&](OpBuilder &b, Location l, ValueRange args) {
          Value c = constant(b, l, cols);
          Value mean = arith::DivFOp::create(b, l, args[1], c);
          Value var = arith::DivFOp::create(b, l, args[2], c);
          Value rstd = arith::DivFOp::create(
              b, l, constant(b, l, 1.0),
              math::SqrtOp::create(
                  b, l, arith::AddFOp::create(b, l, var, constant(b, l, eps))));
          Value n = arith::MulFOp::create(
              b, l,
              arith::SubFOp::create(b, l, convertFloat(b, l, args[0], acc),
                                    mean),
              rstd);
          Value v = arith::AddFOp::create(
              b, l,
              arith::MulFOp::create(b, l, n, convertFloat(b, l, args[3], acc)),
              convertFloat(b, l, args[4], acc));
          linalg::YieldOp::create(b, l, convertFloat(b, l, v, element));
        });
    rewriter.replaceOp(op, y.getResults());
    return success();
  }
};

struct SoftmaxToLinalg final : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Type element = type.getElementType();
    FloatType acc = accumulatorType(element);
    RowMaps m(op.getContext(), type);
    Value x = op.getInput();
    Value max = reduceRows(
        rewriter, loc, m, acc, -std::numeric_limits<double>::infinity(), {x},
        {m.element},
        [&](OpBuilder &b, Location l, ValueRange in, Value s) -> Value {
          return arith::MaximumFOp::create(b, l, convertFloat(b, l, in[0], acc),
                                           s);
        });
    auto shifted = [&](OpBuilder &b, Location l, Value xv, Value mv) {
      return math::ExpOp::create(
          b, l, arith::SubFOp::create(b, l, convertFloat(b, l, xv, acc), mv));
    };
    Value sum = reduceRows(
        rewriter, loc, m, acc, 0.0, {x, max}, {m.element, m.row},
        [&](OpBuilder &b, Location l, ValueRange in, Value s) -> Value {
          return arith::AddFOp::create(b, l, shifted(b, l, in[0], in[1]), s);
        });
    Value out = emptyTensor(rewriter, loc, type.getShape(), element);
    auto y = buildGeneric(
        rewriter, loc, {x, max, sum}, {m.element, m.row, m.row}, {out},
        {m.element}, m.rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value v = arith::DivFOp::create(b, l, shifted(b, l, args[0], args[1]),
                                          args[2]);
          linalg::YieldOp::create(b, l, convertFloat(b, l, v, element));
        });
    rewriter.replaceOp(op, y.getResults());
    return success();
  }
};
/// dx = y (dy - sum(dy y)) along the last dimension.
struct SoftmaxGradToLinalg final : OpRewritePattern<SoftmaxGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Type element = type.getElementType();
    FloatType acc = accumulatorType(element);
    RowMaps m(op.getContext(), type);
    Value y = op.getOutput(), dy = op.getGrad();
    Value dot = reduceRows(
        rewriter, loc, m, acc, 0.0, {y, dy}, {m.element, m.element},
        [&](OpBuilder &b, Location l, ValueRange in, Value s) -> Value {
          return arith::AddFOp::create(
              b, l,
              arith::MulFOp::create(b, l, convertFloat(b, l, in[0], acc),
                                    convertFloat(b, l, in[1], acc)),
              s);
        });
    Value out = emptyTensor(rewriter, loc, type.getShape(), element);
    auto dx = buildGeneric(
        rewriter, loc, {y, dy, dot}, {m.element, m.element, m.row}, {out},
        {m.element}, m.rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value v = arith::MulFOp::create(
              b, l, convertFloat(b, l, args[0], acc),
              arith::SubFOp::create(b, l, convertFloat(b, l, args[1], acc),
                                    args[2]));
          linalg::YieldOp::create(b, l, convertFloat(b, l, v, element));
        });
    rewriter.replaceOp(op, dx.getResults());
    return success();
  }
};

/// With n = (x - mean) rstd and dn = dy gamma (the runtime's formulas):
///   dx = rstd (dn - mean(dn) - n mean(dn n)),
///   dgamma = sum over rows of dy n, dbeta = sum over rows of dy.
struct LayerNormGradToLinalg final : OpRewritePattern<LayerNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getInput().getType());
    Type element = type.getElementType();
    FloatType acc = accumulatorType(element);
    RowMaps m(ctx, type);
    double cols = static_cast<double>(type.getDimSize(m.rank - 1));
    double eps = op.getEpsilon().convertToDouble();
    auto constant = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, v));
    };
    Value x = op.getInput(), gamma = op.getGamma(), dy = op.getGrad();
    Value sum, squares;
    std::tie(sum, squares) = rowMoments(rewriter, loc, m, acc, x);
    // The normalized value of an element from the row's sums.
    auto normalized = [&](OpBuilder &b, Location l, Value xv, Value s,
                          Value sq) -> std::pair<Value, Value> {
      Value c = constant(b, l, cols);
      Value mean = arith::DivFOp::create(b, l, s, c);
      Value var = arith::DivFOp::create(b, l, sq, c);
      Value rstd = arith::DivFOp::create(
          b, l, constant(b, l, 1.0),
          math::SqrtOp::create(
              b, l, arith::AddFOp::create(b, l, var, constant(b, l, eps))));
      Value n = arith::MulFOp::create(
          b, l, arith::SubFOp::create(b, l, convertFloat(b, l, xv, acc), mean),
          rstd);
      return {n, rstd};
    };
    // Per row: sum(dn) and sum(dn n).
    Value dnInit = filledTensor(rewriter, loc, m.rowShape, acc, 0.0);
    Value dnnInit = filledTensor(rewriter, loc, m.rowShape, acc, 0.0);
    auto rowSums = buildGeneric(
        rewriter, loc, {x, sum, squares, gamma, dy},
        {m.element, m.row, m.row, m.column, m.element}, {dnInit, dnnInit},
        {m.row, m.row}, m.rank, {m.rank - 1},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value n = normalized(b, l, args[0], args[1], args[2]).first;
          Value dn =
              arith::MulFOp::create(b, l, convertFloat(b, l, args[4], acc),
                                    convertFloat(b, l, args[3], acc));
          linalg::YieldOp::create(
              b, l,
              ValueRange{
                  arith::AddFOp::create(b, l, args[5], dn),
                  arith::AddFOp::create(b, l, args[6],
                                        arith::MulFOp::create(b, l, dn, n))});
        });
    Value out = emptyTensor(rewriter, loc, type.getShape(), element);
    auto dx = buildGeneric(
        rewriter, loc,
        {x, sum, squares, gamma, dy, rowSums.getResult(0),
         rowSums.getResult(1)},
        {m.element, m.row, m.row, m.column, m.element, m.row, m.row}, {out},
        {m.element}, m.rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [n, rstd] = normalized(b, l, args[0], args[1], args[2]);
          Value c = constant(b, l, cols);
          Value dn =
              arith::MulFOp::create(b, l, convertFloat(b, l, args[4], acc),
                                    convertFloat(b, l, args[3], acc));
          Value meanDn = arith::DivFOp::create(b, l, args[5], c);
          Value meanDnN = arith::DivFOp::create(b, l, args[6], c);
          Value v = arith::MulFOp::create(
              b, l, rstd,
              arith::SubFOp::create(b, l,
                                    arith::SubFOp::create(b, l, dn, meanDn),
                                    arith::MulFOp::create(b, l, n, meanDnN)));
          linalg::YieldOp::create(b, l, convertFloat(b, l, v, element));
        });
    // dgamma and dbeta: sums over every dimension but the last.
    SmallVector<int64_t> rows =
        llvm::to_vector(llvm::seq<int64_t>(0, m.rank - 1));
    int64_t cols64 = type.getDimSize(m.rank - 1);
    Value gInit = filledTensor(rewriter, loc, {cols64}, acc, 0.0);
    Value bInit = filledTensor(rewriter, loc, {cols64}, acc, 0.0);
    auto params = buildGeneric(
        rewriter, loc, {x, sum, squares, dy},
        {m.element, m.row, m.row, m.element}, {gInit, bInit},
        {m.column, m.column}, m.rank, rows,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value n = normalized(b, l, args[0], args[1], args[2]).first;
          Value d = convertFloat(b, l, args[3], acc);
          linalg::YieldOp::create(
              b, l,
              ValueRange{arith::AddFOp::create(
                             b, l, args[4], arith::MulFOp::create(b, l, d, n)),
                         arith::AddFOp::create(b, l, args[5], d)});
        });
    rewriter.replaceOp(
        op, {dx.getResult(0),
             roundTensor(rewriter, loc, params.getResult(0),
                         op.getGammaGrad().getType().getElementType()),
             roundTensor(rewriter, loc, params.getResult(1),
                         op.getBetaGrad().getType().getElementType())});
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcNormalizationToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LayerNormToLinalg, SoftmaxToLinalg, SoftmaxGradToLinalg,
               LayerNormGradToLinalg>(patterns.getContext());
}
