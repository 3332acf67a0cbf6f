//===- OptimizerToLinalg.cpp - The optimizer's ops to linalg ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The training step's tail: the gradient norm (sum_squares, global_norm:
// reductions accumulated in f64, as the runtime), the scalar schedule and
// clipping (learning_rate, clip_scale, sqrt, div: arith and math on the
// scalars extracted from rank-0 tensors, in f64 where the runtime computes
// in double), fp16's loss scaling (found_inf, loss_scale_update), the
// token count, and the updates (adamw, multi_adamw: one elementwise generic
// per parameter with three results, the bias corrections computed once on
// scalars; a nonzero skip flag keeps the state).
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

namespace {
/// Scalar arithmetic on the scalars of rank-0 tensors.
struct Scalars : ScalarBuilder {
  /// The float scalar of a rank-0 tensor, converted to `type`.
  Value of(Value tensor) {
    Value v = tensor::ExtractOp::create(b, loc, tensor, ValueRange{});
    if (isa<IntegerType>(v.getType()))
      return arith::SIToFPOp::create(b, loc, type, v);
    return convertFloat(b, loc, v, type);
  }
  /// `v` as a rank-0 tensor of `element`.
  Value tensorOf(Value v, Type element) {
    if (isa<FloatType>(element))
      v = convertFloat(b, loc, v, element);
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, element), ValueRange{v});
  }
};

Scalars f64(OpBuilder &b, Location loc) {
  return {{b, loc, Float64Type::get(b.getContext())}};
}

/// sum(x^2) over every element of `x`, in f64.
Value sumOfSquares(OpBuilder &b, Location loc, Value x) {
  FloatType acc = Float64Type::get(b.getContext());
  Value s = reduceAll(
      b, loc, {x}, acc, 0.0,
      [&](OpBuilder &nb, Location l, ValueRange in, Value sum) -> Value {
        Value v = convertFloat(nb, l, in[0], acc);
        return arith::AddFOp::create(nb, l, sum,
                                     arith::MulFOp::create(nb, l, v, v));
      });
  return tensor::ExtractOp::create(b, loc, s, ValueRange{});
}

/// The sum of squares of every input (f64).
Value totalSquares(OpBuilder &b, Location loc, ValueRange inputs) {
  Scalars s = f64(b, loc);
  Value total = s.c(0.0);
  for (Value x : inputs)
    total = s.add(total, sumOfSquares(b, loc, x));
  return total;
}

struct SumSquaresToLinalg final : OpRewritePattern<SumSquaresOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SumSquaresOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s = f64(rewriter, op.getLoc());
    Value total = totalSquares(rewriter, op.getLoc(), op.getInputs());
    rewriter.replaceOp(op, s.tensorOf(total, rewriter.getF32Type()));
    return success();
  }
};

struct GlobalNormToLinalg final : OpRewritePattern<GlobalNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GlobalNormOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s = f64(rewriter, op.getLoc());
    Value total = totalSquares(rewriter, op.getLoc(), op.getInputs());
    Value norm = math::SqrtOp::create(rewriter, op.getLoc(), total);
    rewriter.replaceOp(op, s.tensorOf(norm, rewriter.getF32Type()));
    return success();
  }
};

struct SqrtToArith final : OpRewritePattern<SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SqrtOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s{{rewriter, op.getLoc(), rewriter.getF32Type()}};
    Value r = math::SqrtOp::create(rewriter, op.getLoc(), s.of(op.getInput()));
    rewriter.replaceOp(op, s.tensorOf(r, rewriter.getF32Type()));
    return success();
  }
};

struct DivToArith final : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s{{rewriter, op.getLoc(), rewriter.getF32Type()}};
    Value r = s.div(s.of(op.getLhs()), s.of(op.getRhs()));
    rewriter.replaceOp(op, s.tensorOf(r, rewriter.getF32Type()));
    return success();
  }
};

/// min(1, max / (norm + 1e-6)), 1 without clipping; with a loss scale S,
/// clip(norm / S) / S. In f64, as the runtime.
struct ClipScaleToArith final : OpRewritePattern<ClipScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ClipScaleOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s = f64(rewriter, op.getLoc());
    double maxNorm = op.getMaxNorm().convertToDouble();
    Value norm = s.of(op.getNorm());
    Value scale;
    if (op.getLossScale())
      scale = s.of(op.getLossScale());
    if (scale)
      norm = s.div(norm, scale);
    Value r = maxNorm <= 0 ? s.c(1.0)
                           : s.min(s.c(1.0),
                                   s.div(s.c(maxNorm), s.add(norm, s.c(1e-6))));
    if (scale)
      r = s.div(r, scale);
    rewriter.replaceOp(op, s.tensorOf(r, rewriter.getF32Type()));
    return success();
  }
};

/// Warm-up, then cosine, linear or constant decay to `min` at `total`.
struct LearningRateToArith final : OpRewritePattern<LearningRateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LearningRateOp op,
                                PatternRewriter &rewriter) const override {
    Scalars s = f64(rewriter, op.getLoc());
    double peak = op.getPeak().convertToDouble();
    double min = op.getMin().convertToDouble();
    double warmup = static_cast<double>(op.getWarmup());
    double span = static_cast<double>(op.getTotal() - op.getWarmup());
    Value step = s.of(op.getStep());
    Value warm = s.div(s.mul(s.c(peak), s.add(step, s.c(1.0))),
                       s.c(std::max(warmup, 1.0)));
    Value progress =
        span > 0 ? s.div(s.sub(step, s.c(warmup)), s.c(span)) : s.c(1.0);
    progress = s.max(s.c(0.0), s.min(progress, s.c(1.0)));
    LrDecay decay = op.getDecay();
    Value coefficient;
    if (decay == LrDecay::Cosine)
      coefficient = s.mul(
          s.c(0.5),
          s.add(s.c(1.0), math::CosOp::create(rewriter, op.getLoc(),
                                              s.mul(s.c(M_PI), progress))));
    else if (decay == LrDecay::Linear)
      coefficient = s.sub(s.c(1.0), progress);
    else
      coefficient = s.c(1.0);
    Value decayed = s.add(s.c(min), s.mul(coefficient, s.c(peak - min)));
    Value lr = s.select(s.lt(step, s.c(warmup)), warm, decayed);
    rewriter.replaceOp(op, s.tensorOf(lr, rewriter.getF32Type()));
    return success();
  }
};

/// 1.0 when any element is not finite.
struct FoundInfToLinalg final : OpRewritePattern<FoundInfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FoundInfOp op,
                                PatternRewriter &rewriter) const override {
    FloatType f32 = rewriter.getF32Type();
    Value flag = reduceAll(
        rewriter, op.getLoc(), {op.getInput()}, f32, 0.0,
        [&](OpBuilder &b, Location l, ValueRange in, Value found) -> Value {
          Scalars s{{b, l, cast<FloatType>(in[0].getType())}};
          // x - x is NaN exactly when x is infinite or NaN.
          Value d = s.sub(in[0], in[0]);
          Value bad =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, d, d);
          // The flag is the maximum of the per-element flags: a combiner
          // the GPU's warp and block reductions take.
          Scalars f{{b, l, f32}};
          return arith::MaximumFOp::create(b, l, found,
                                           f.select(bad, f.c(1.0), f.c(0.0)));
        });
    rewriter.replaceOp(op, flag);
    return success();
  }
};

/// The labels that are not `ignore_index`, as an f32 count.
struct CountTokensToLinalg final : OpRewritePattern<CountTokensOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CountTokensOp op,
                                PatternRewriter &rewriter) const override {
    FloatType f32 = rewriter.getF32Type();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value count = reduceAll(
        rewriter, op.getLoc(), {op.getLabels()}, f32, 0.0,
        [&](OpBuilder &b, Location l, ValueRange in, Value n) -> Value {
          Scalars f{{b, l, f32}};
          Value add = f.c(1.0);
          if (ignore) {
            Value ig = arith::ConstantOp::create(
                b, l, b.getIntegerAttr(in[0].getType(), *ignore));
            Value kept = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne,
                                               in[0], ig);
            add = f.select(kept, f.c(1.0), f.c(0.0));
          }
          return f.add(n, add);
        });
    rewriter.replaceOp(op, count);
    return success();
  }
};

/// GradScaler's state machine on the scalars (the runtime's
/// updateLossScale).
struct LossScaleUpdateToArith final : OpRewritePattern<LossScaleUpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LossScaleUpdateOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Scalars s = f64(rewriter, loc);
    Scalars f{{rewriter, loc, rewriter.getF32Type()}};
    Type i32 = rewriter.getI32Type();
    auto ext = [&](Value t) {
      return tensor::ExtractOp::create(rewriter, loc, t, ValueRange{});
    };
    auto i = [&](int64_t v) {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getIntegerAttr(i32, v));
    };
    Value scale = ext(op.getScale()), good = ext(op.getGood()),
          updates = ext(op.getUpdates());
    Value found = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::UNE, ext(op.getFound()), f.c(0.0));
    Value scale64 = convertFloat(rewriter, loc, scale, s.type);
    Value backedOff = convertFloat(
        rewriter, loc, s.mul(scale64, s.c(op.getBackoff().convertToDouble())),
        f.type);
    Value grown = convertFloat(
        rewriter, loc, s.mul(scale64, s.c(op.getGrowth().convertToDouble())),
        f.type);
    // A grown scale that overflows f32 stays where it was.
    Value diff = f.sub(grown, grown);
    Value finite = arith::CmpFOp::create(rewriter, loc,
                                         arith::CmpFPredicate::ORD, diff, diff);
    grown = f.select(finite, grown, scale);
    Value nextGood = arith::AddIOp::create(rewriter, loc, good, i(1));
    Value grow = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sge,
                                       nextGood, i(op.getInterval()));
    Value goodScale = f.select(grow, grown, scale);
    Value goodCount =
        arith::SelectOp::create(rewriter, loc, grow, i(0), nextGood);
    Value newScale = f.select(found, backedOff, goodScale);
    Value newGood =
        arith::SelectOp::create(rewriter, loc, found, i(0), goodCount);
    Value newUpdates = arith::SelectOp::create(
        rewriter, loc, found, updates,
        arith::AddIOp::create(rewriter, loc, updates, i(1)));
    rewriter.replaceOp(op,
                       {f.tensorOf(newScale, f.type), f.tensorOf(newGood, i32),
                        f.tensorOf(newUpdates, i32)});
    return success();
  }
};

/// One parameter's AdamW update as an elementwise generic with three
/// results (PyTorch's order of operations, the runtime's formulas).
struct AdamWScalars {
  Value stepSize, bc2Sqrt, lr, scale, skip; // f64, f64, f64, f64, i1 or null
};

AdamWScalars adamwScalars(OpBuilder &b, Location loc, Value lrT, Value stepT,
                          Value scaleT, Value skipT, double beta1,
                          double beta2) {
  Scalars s = f64(b, loc);
  AdamWScalars r;
  r.lr = s.of(lrT);
  r.scale = s.of(scaleT);
  Value t = s.add(s.of(stepT), s.c(1.0));
  r.stepSize =
      s.div(r.lr, s.sub(s.c(1.0), math::PowFOp::create(b, loc, s.c(beta1), t)));
  r.bc2Sqrt = math::SqrtOp::create(
      b, loc, s.sub(s.c(1.0), math::PowFOp::create(b, loc, s.c(beta2), t)));
  if (skipT)
    r.skip = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                   s.of(skipT), s.c(0.0));
  return r;
}

SmallVector<Value> adamwUpdate(OpBuilder &b, Location loc, Value p, Value g,
                               Value m, Value v, const AdamWScalars &k,
                               double beta1, double beta2, double eps,
                               double weightDecay) {
  auto type = cast<RankedTensorType>(p.getType());
  auto element = cast<FloatType>(type.getElementType());
  int64_t rank = type.getRank();
  Scalars s64 = f64(b, loc);
  // The per-step factors in the element type, as the runtime casts them.
  Value stepSize = convertFloat(b, loc, k.stepSize, element);
  Value bc2Sqrt = convertFloat(b, loc, k.bc2Sqrt, element);
  Value decay = convertFloat(
      b, loc, s64.sub(s64.c(1.0), s64.mul(k.lr, s64.c(weightDecay))), element);
  Value scale = convertFloat(b, loc, k.scale, element);
  SmallVector<Value> inits;
  for (int i = 0; i < 3; ++i)
    inits.push_back(emptyTensor(b, loc, type.getShape(), element));
  AffineMap id = b.getMultiDimIdentityMap(rank);
  auto generic = buildGeneric(
      b, loc, {p, g, m, v}, {id, id, id, id}, inits, {id, id, id}, rank, {},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Scalars s{{nb, l, element}};
        Value grad = s.mul(a[1], scale);
        Value mi = s.add(a[2], s.mul(s.c(1.0 - beta1), s.sub(grad, a[2])));
        Value vi = s.add(s.mul(a[3], s.c(beta2)),
                         s.mul(s.mul(s.c(1.0 - beta2), grad), grad));
        Value denom =
            s.add(s.div(math::SqrtOp::create(nb, l, vi), bc2Sqrt), s.c(eps));
        Value pi = s.sub(s.mul(a[0], decay), s.div(s.mul(stepSize, mi), denom));
        if (k.skip) {
          pi = s.select(k.skip, a[0], pi);
          mi = s.select(k.skip, a[2], mi);
          vi = s.select(k.skip, a[3], vi);
        }
        linalg::YieldOp::create(nb, l, ValueRange{pi, mi, vi});
      });
  return SmallVector<Value>(generic.getResults().begin(),
                            generic.getResults().end());
}

struct AdamWToLinalg final : OpRewritePattern<AdamWOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AdamWOp op,
                                PatternRewriter &rewriter) const override {
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    AdamWScalars k =
        adamwScalars(rewriter, op.getLoc(), op.getLr(), op.getStep(),
                     op.getScale(), op.getSkip(), b1, b2);
    rewriter.replaceOp(op, adamwUpdate(rewriter, op.getLoc(), op.getParam(),
                                       op.getGrad(), op.getM(), op.getV(), k,
                                       b1, b2, op.getEps().convertToDouble(),
                                       op.getWeightDecay().convertToDouble()));
    return success();
  }
};

struct MultiAdamWToLinalg final : OpRewritePattern<MultiAdamWOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MultiAdamWOp op,
                                PatternRewriter &rewriter) const override {
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    AdamWScalars k =
        adamwScalars(rewriter, op.getLoc(), op.getLr(), op.getStep(),
                     op.getScale(), op.getSkip(), b1, b2);
    unsigned n = op.getNumParams();
    SmallVector<Value> results(3 * n);
    for (unsigned i = 0; i < n; ++i) {
      SmallVector<Value> r =
          adamwUpdate(rewriter, op.getLoc(), op.getParams()[i],
                      op.getGrads()[i], op.getM()[i], op.getV()[i], k, b1, b2,
                      op.getEps().convertToDouble(), op.getDecays()[i]);
      for (unsigned j = 0; j < 3; ++j)
        results[j * n + i] = r[j];
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcOptimizerToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SumSquaresToLinalg, GlobalNormToLinalg, SqrtToArith, DivToArith,
               ClipScaleToArith, LearningRateToArith, FoundInfToLinalg,
               CountTokensToLinalg, LossScaleUpdateToArith, AdamWToLinalg,
               MultiAdamWToLinalg>(patterns.getContext());
}
