//===- AttentionToLinalg.cpp - Causal attention to linalg ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc.causal_attention and its gradient as linalg.generic contractions
// and row reductions over the heads' view of q, k and v (`B x T x H x D`,
// a tensor.expand_shape of `B x T x C`): the scores, the causal row maximum
// and sum of exponentials of the scaled scores, then the output as the
// probability-weighted sum of values, each probability recomputed from
// the scores and the row statistics where it is used (as the runtime's
// backward recomputes them). The backward: dv, the probabilities'
// gradients, their row dot products with the probabilities, the scores'
// gradients, dq and dk. The score tensor is `B x H x T x T`: this is the
// reference lowering, not a flash-style tiling (the CPU runtime runs its
// own attention kernels).
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

namespace {
/// Builds generics whose loops are named by letters (`b`, `h`, `i`, `j`,
/// `d`) and whose operands are indexed by letters too.
struct Loops {
  OpBuilder &b;
  Location loc;
  FloatType acc;
  int64_t B, T, H, D;
  double scale;

  int64_t extent(char c) const {
    switch (c) {
    case 'b':
      return B;
    case 'h':
      return H;
    case 'd':
      return D;
    default:
      return T; // i, j
    }
  }
  AffineMap map(StringRef loops, StringRef dims) const {
    SmallVector<AffineExpr> exprs;
    for (char c : dims)
      exprs.push_back(getAffineDimExpr(loops.find(c), b.getContext()));
    return AffineMap::get(loops.size(), 0, exprs, b.getContext());
  }
  SmallVector<int64_t> shape(StringRef dims) const {
    SmallVector<int64_t> s;
    for (char c : dims)
      s.push_back(extent(c));
    return s;
  }
  /// One generic over `loops`: operands indexed by `dims`, one result
  /// indexed by `outDims` (a reduction over the loops it lacks), starting
  /// from `init`.
  Value generic(StringRef loops, ValueRange inputs, ArrayRef<StringRef> dims,
                StringRef outDims, double init,
                function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    SmallVector<AffineMap> maps;
    for (StringRef d : dims)
      maps.push_back(map(loops, d));
    SmallVector<int64_t> reduced;
    for (auto [k, c] : llvm::enumerate(loops))
      if (outDims.find(c) == StringRef::npos)
        reduced.push_back(static_cast<int64_t>(k));
    Value out = filledTensor(b, loc, shape(outDims), acc, init);
    return buildGeneric(b, loc, inputs, maps, {out}, {map(loops, outDims)},
                        loops.size(), reduced,
                        [&](OpBuilder &nb, Location l, ValueRange args) {
                          linalg::YieldOp::create(nb, l, body(nb, l, args));
                        })
        .getResult(0);
  }
  Value c(OpBuilder &nb, Location l, double v) const {
    return arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, v));
  }
  /// Whether key j is visible from query i (j <= i) in loops `loops`.
  Value visible(OpBuilder &nb, Location l, StringRef loops) const {
    Value i = linalg::IndexOp::create(nb, l, loops.find('i'));
    Value j = linalg::IndexOp::create(nb, l, loops.find('j'));
    return arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ule, j, i);
  }
  /// P[b,h,i,j] from the score, the row maximum and the row sum.
  Value probability(OpBuilder &nb, Location l, StringRef loops, Value score,
                    Value max, Value sum) const {
    Value e = math::ExpOp::create(
        nb, l,
        arith::SubFOp::create(
            nb, l, arith::MulFOp::create(nb, l, score, c(nb, l, scale)), max));
    Value p = arith::DivFOp::create(nb, l, e, sum);
    return arith::SelectOp::create(nb, l, visible(nb, l, loops), p,
                                   c(nb, l, 0.0));
  }
};

/// q, k or v as `B x T x H x D`.
Value heads(OpBuilder &b, Location loc, Value x, int64_t h) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape{type.getDimSize(0), type.getDimSize(1), h,
                             type.getDimSize(2) / h};
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), x,
      SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}});
}

/// `B x T x H x D` (accumulator) back to `type`.
Value merge(OpBuilder &b, Location loc, Value x, RankedTensorType type) {
  auto from = cast<RankedTensorType>(x.getType());
  Value collapsed = tensor::CollapseShapeOp::create(
      b, loc, RankedTensorType::get(type.getShape(), from.getElementType()), x,
      SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}});
  return roundTensor(b, loc, collapsed, type.getElementType());
}

/// The scores and the causal row statistics of the scaled scores.
struct Forward {
  Value scores, max, sum;
};

Forward forward(Loops &L, Value q, Value k) {
  Forward f;
  FloatType acc = L.acc;
  f.scores = L.generic("bhijd", {q, k}, {"bihd", "bjhd"}, "bhij", 0.0,
                       [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value prod = arith::MulFOp::create(
                             nb, l, convertFloat(nb, l, a[0], acc),
                             convertFloat(nb, l, a[1], acc));
                         return arith::AddFOp::create(nb, l, a[2], prod);
                       });
  f.max = L.generic("bhij", {f.scores}, {"bhij"}, "bhi",
                    -std::numeric_limits<double>::infinity(),
                    [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                      Value s = arith::MulFOp::create(nb, l, a[0],
                                                      L.c(nb, l, L.scale));
                      Value masked = arith::SelectOp::create(
                          nb, l, L.visible(nb, l, "bhij"), s,
                          L.c(nb, l, -std::numeric_limits<double>::infinity()));
                      return arith::MaximumFOp::create(nb, l, masked, a[1]);
                    });
  f.sum = L.generic(
      "bhij", {f.scores, f.max}, {"bhij", "bhi"}, "bhi", 0.0,
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value e = math::ExpOp::create(
            nb, l,
            arith::SubFOp::create(
                nb, l, arith::MulFOp::create(nb, l, a[0], L.c(nb, l, L.scale)),
                a[1]));
        Value masked = arith::SelectOp::create(nb, l, L.visible(nb, l, "bhij"),
                                               e, L.c(nb, l, 0.0));
        return arith::AddFOp::create(nb, l, a[2], masked);
      });
  return f;
}

Loops loopsFor(OpBuilder &b, Location loc, Value q, int64_t h) {
  auto type = cast<RankedTensorType>(q.getType());
  int64_t d = type.getDimSize(2) / h;
  return Loops{b,
               loc,
               accumulatorType(type.getElementType()),
               type.getDimSize(0),
               type.getDimSize(1),
               h,
               d,
               1.0 / std::sqrt(static_cast<double>(d))};
}

struct CausalAttentionToLinalg final : OpRewritePattern<CausalAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CausalAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getPositions())
      return rewriter.notifyMatchFailure(
          op, "attention from a part of the sequence has no reference "
              "lowering (the CPU runtime runs its own kernel)");
    Location loc = op.getLoc();
    int64_t h = op.getNumHeads();
    Loops L = loopsFor(rewriter, loc, op.getQuery(), h);
    Value q = heads(rewriter, loc, op.getQuery(), h);
    Value k = heads(rewriter, loc, op.getKey(), h);
    Value v = heads(rewriter, loc, op.getValue(), h);
    Forward f = forward(L, q, k);
    FloatType acc = L.acc;
    Value out = L.generic(
        "bihdj", {f.scores, f.max, f.sum, v}, {"bhij", "bhi", "bhi", "bjhd"},
        "bihd", 0.0, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value p = L.probability(nb, l, "bihdj", a[0], a[1], a[2]);
          return arith::AddFOp::create(
              nb, l, a[4],
              arith::MulFOp::create(nb, l, p, convertFloat(nb, l, a[3], acc)));
        });
    rewriter.replaceOp(
        op, merge(rewriter, loc, out, cast<RankedTensorType>(op.getType())));
    return success();
  }
};

struct CausalAttentionGradToLinalg final
    : OpRewritePattern<CausalAttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CausalAttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getPositions())
      return rewriter.notifyMatchFailure(
          op, "attention from a part of the sequence has no reference "
              "lowering (the CPU runtime runs its own kernel)");
    Location loc = op.getLoc();
    int64_t h = op.getNumHeads();
    Loops L = loopsFor(rewriter, loc, op.getQuery(), h);
    FloatType acc = L.acc;
    Value q = heads(rewriter, loc, op.getQuery(), h);
    Value k = heads(rewriter, loc, op.getKey(), h);
    Value v = heads(rewriter, loc, op.getValue(), h);
    Value dy = heads(rewriter, loc, op.getGrad(), h);
    Forward f = forward(L, q, k);
    auto mulAdd = [&](OpBuilder &nb, Location l, Value x, Value y,
                      Value sum) -> Value {
      return arith::AddFOp::create(
          nb, l, sum,
          arith::MulFOp::create(nb, l, convertFloat(nb, l, x, acc),
                                convertFloat(nb, l, y, acc)));
    };
    // dv[b,j,h,d] = sum_i P[b,h,i,j] dy[b,i,h,d].
    Value dv = L.generic(
        "bjhdi", {f.scores, f.max, f.sum, dy}, {"bhij", "bhi", "bhi", "bihd"},
        "bjhd", 0.0, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value p = L.probability(nb, l, "bjhdi", a[0], a[1], a[2]);
          return mulAdd(nb, l, p, a[3], a[4]);
        });
    // dP[b,h,i,j] = sum_d dy[b,i,h,d] v[b,j,h,d].
    Value dp = L.generic("bhijd", {dy, v}, {"bihd", "bjhd"}, "bhij", 0.0,
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           return mulAdd(nb, l, a[0], a[1], a[2]);
                         });
    // R[b,h,i] = sum_j P dP.
    Value r = L.generic(
        "bhij", {f.scores, f.max, f.sum, dp}, {"bhij", "bhi", "bhi", "bhij"},
        "bhi", 0.0, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value p = L.probability(nb, l, "bhij", a[0], a[1], a[2]);
          return mulAdd(nb, l, p, a[3], a[4]);
        });
    // dS = P (dP - R) scale: the gradient of the unscaled scores.
    AffineMap id = L.map("bhij", "bhij"), row = L.map("bhij", "bhi");
    Value dsInit = emptyTensor(rewriter, loc, L.shape("bhij"), acc);
    Value ds =
        buildGeneric(
            rewriter, loc, {f.scores, f.max, f.sum, dp, r},
            {id, row, row, id, row}, {dsInit}, {id}, 4, {},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value p = L.probability(nb, l, "bhij", a[0], a[1], a[2]);
              Value g = arith::MulFOp::create(
                  nb, l,
                  arith::MulFOp::create(
                      nb, l, p, arith::SubFOp::create(nb, l, a[3], a[4])),
                  L.c(nb, l, L.scale));
              linalg::YieldOp::create(nb, l, g);
            })
            .getResult(0);
    // dq[b,i,h,d] = sum_j dS k[b,j,h,d]; dk[b,j,h,d] = sum_i dS q[b,i,h,d].
    Value dq = L.generic("bihdj", {ds, k}, {"bhij", "bjhd"}, "bihd", 0.0,
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           return mulAdd(nb, l, a[0], a[1], a[2]);
                         });
    Value dk = L.generic("bjhdi", {ds, q}, {"bhij", "bihd"}, "bjhd", 0.0,
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           return mulAdd(nb, l, a[0], a[1], a[2]);
                         });
    auto type = cast<RankedTensorType>(op.getQuery().getType());
    rewriter.replaceOp(op, {merge(rewriter, loc, dq, type),
                            merge(rewriter, loc, dk, type),
                            merge(rewriter, loc, dv, type)});
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcAttentionToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<CausalAttentionToLinalg, CausalAttentionGradToLinalg>(
      patterns.getContext());
}
