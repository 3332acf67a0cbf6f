//===- ElementwiseToLinalg.cpp - gptc elementwise ops to linalg -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The elementwise family: add, gelu, gelu_grad, cast, unary and binary
// become one linalg.generic each, with identity indexing maps over every
// dimension and the scalar formula in its body. linalg's elementwise fusion
// then merges chains of them into one loop nest.
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// Scalar formulas
//===----------------------------------------------------------------------===//

namespace {
/// Scalar arithmetic plus GELU's formulas.
struct Scalar : linalg_lowering::ScalarBuilder {

  /// tanh. In f32, the runtime's [13/6] rational approximation (Eigen's):
  /// selects and polynomials only, so the loop around it vectorizes, and
  /// the generated kernel computes what the reference kernel does. Other
  /// types use math.tanh.
  Value tanh(Value x) {
    if (!type.isF32())
      return math::TanhOp::create(b, loc, x);
    const double clamp = 7.90531110763549805;
    x = max(min(x, c(clamp)), c(-clamp));
    Value x2 = mul(x, x);
    Value p = c(-2.76076847742355e-16);
    for (double k :
         {2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
          1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03})
      p = add(mul(p, x2), c(k));
    p = mul(p, x);
    Value q = c(1.19825839466702e-06);
    for (double k :
         {1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03})
      q = add(mul(q, x2), c(k));
    return div(p, q);
  }

  /// erf. In f32, the runtime's [13/10] rational approximation (Eigen's)
  /// on [-4, 4]; other types use math.erf (a libm call).
  Value erf(Value x) {
    if (!type.isF32())
      return math::ErfOp::create(b, loc, x);
    x = max(min(x, c(4.0)), c(-4.0));
    Value x2 = mul(x, x);
    Value p = c(-2.72614225801306e-10);
    for (double k :
         {2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02})
      p = add(mul(p, x2), c(k));
    p = mul(p, x);
    Value q = c(-1.45660718464996e-05);
    for (double k : {-2.13374055278905e-04, -1.68282697438203e-03,
                     -7.37332916720468e-03, -1.42647390514189e-02})
      q = add(mul(q, x2), c(k));
    return div(p, q);
  }

  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }

  /// gptc.unary's function of `x`, as the runtime's reference kernel
  /// computes it.
  Value unary(UnaryFn fn, Value x) {
    switch (fn) {
    case UnaryFn::neg:
      return arith::NegFOp::create(b, loc, x);
    case UnaryFn::sqrt:
      return math::SqrtOp::create(b, loc, x);
    case UnaryFn::exp:
      return exp(x);
    case UnaryFn::log:
      return math::LogOp::create(b, loc, x);
    case UnaryFn::tanh:
      return tanh(x);
    case UnaryFn::erf:
      return erf(x);
    case UnaryFn::reciprocal:
      return div(c(1.0), x);
    case UnaryFn::relu:
      return select(lt(c(0.0), x), x, c(0.0));
    case UnaryFn::sigmoid:
      return div(c(1.0), add(c(1.0), exp(arith::NegFOp::create(b, loc, x))));
    case UnaryFn::abs:
      return math::AbsFOp::create(b, loc, x);
    case UnaryFn::step:
      return select(lt(c(0.0), x), c(1.0), c(0.0));
    case UnaryFn::sign:
      return select(lt(c(0.0), x), c(1.0),
                    select(lt(x, c(0.0)), c(-1.0), c(0.0)));
    }
    llvm_unreachable("unknown unary function");
  }

  Value binary(BinaryFn fn, Value x, Value y) {
    switch (fn) {
    case BinaryFn::sub:
      return sub(x, y);
    case BinaryFn::mul:
      return mul(x, y);
    case BinaryFn::div:
      return div(x, y);
    case BinaryFn::pow:
      return math::PowFOp::create(b, loc, x, y);
    case BinaryFn::unless_nan: {
      Value nan =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
      return select(nan, c(0.0), y);
    }
    }
    llvm_unreachable("unknown binary function");
  }

  /// sqrt(2 / pi) (x + 0.044715 x^3), the argument of GELU's tanh.
  Value geluArgument(Value x) {
    Value x3 = mul(mul(x, x), x);
    return mul(c(0.7978845608028654), add(x, mul(c(0.044715), x3)));
  }

  /// 0.5 x (1 + tanh(u)).
  Value gelu(Value x) {
    return mul(mul(c(0.5), x), add(c(1.0), tanh(geluArgument(x))));
  }

  /// dy (0.5 (1 + t) + 0.5 x (1 - t^2) du/dx), du/dx = sqrt(2/pi) (1 +
  /// 3 0.044715 x^2), as the runtime's kernel computes it.
  Value geluGrad(Value x, Value dy) {
    Value t = tanh(geluArgument(x));
    Value du = mul(c(0.7978845608028654),
                   add(c(1.0), mul(c(3 * 0.044715), mul(x, x))));
    Value left = mul(c(0.5), add(c(1.0), t));
    Value right = mul(mul(mul(c(0.5), x), sub(c(1.0), mul(t, t))), du);
    return mul(dy, add(left, right));
  }

  /// The exact GELU: 0.5 x (1 + erf(x / sqrt(2))).
  Value geluExact(Value x) {
    Value e = erf(mul(c(0.7071067811865476), x));
    return mul(mul(c(0.5), x), add(c(1.0), e));
  }

  /// dy (0.5 (1 + erf(x / sqrt(2))) + x exp(-x^2 / 2) / sqrt(2 pi)), as
  /// the runtime's kernel computes it.
  Value geluExactGrad(Value x, Value dy) {
    Value cdf = mul(c(0.5), add(c(1.0), erf(mul(c(0.7071067811865476), x))));
    Value pdf = mul(c(0.3989422804014327),
                    unary(UnaryFn::exp, mul(c(-0.5), mul(x, x))));
    return mul(dy, add(cdf, mul(x, pdf)));
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// Replaces `op` (one result, every operand of the result's shape) by a
/// linalg.generic whose body is `body(builder, loc, operand elements)`.
static LogicalResult
lowerElementwise(Operation *op, PatternRewriter &rewriter,
                 function_ref<Value(Scalar &, ValueRange)> body) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape())
    return rewriter.notifyMatchFailure(op, "needs a static shape");
  for (Value operand : op->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(operand.getType());
    if (!t || t.getShape() != type.getShape())
      return rewriter.notifyMatchFailure(op, "operand shapes differ");
  }
  Location loc = op->getLoc();
  int64_t rank = type.getRank();
  Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                       type.getElementType());
  SmallVector<AffineMap> maps(op->getNumOperands() + 1,
                              rewriter.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      rewriter, loc, TypeRange{type}, op->getOperands(), ValueRange{init}, maps,
      iterators, [&](OpBuilder &b, Location nested, ValueRange args) {
        auto element = cast<FloatType>(type.getElementType());
        Scalar s{{b, nested, element}};
        Value result = body(s, args.drop_back());
        linalg::YieldOp::create(b, nested, result);
      });
  rewriter.replaceOp(op, generic.getResults());
  return success();
}

static Value addFormula(Scalar &s, ValueRange x) { return s.add(x[0], x[1]); }

namespace {
/// An elementwise gptc op -> one linalg.generic whose body is `Formula`
/// of the operands' elements (add: x + y).
template <typename OpTy, Value (*Formula)(Scalar &, ValueRange)>
struct ElementwiseToLinalg final : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    return lowerElementwise(op, rewriter, Formula);
  }
};

/// gptc.gelu -> linalg.generic { gelu(x) }, the tanh or the exact form.
struct GeluToLinalg final : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp op,
                                PatternRewriter &rewriter) const override {
    bool exact = op.getExact();
    return lowerElementwise(op, rewriter, [exact](Scalar &s, ValueRange x) {
      return exact ? s.geluExact(x[0]) : s.gelu(x[0]);
    });
  }
};

/// gptc.gelu_grad -> linalg.generic { dy gelu'(x) }.
struct GeluGradToLinalg final : OpRewritePattern<GeluGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluGradOp op,
                                PatternRewriter &rewriter) const override {
    bool exact = op.getExact();
    return lowerElementwise(op, rewriter, [exact](Scalar &s, ValueRange x) {
      return exact ? s.geluExactGrad(x[0], x[1]) : s.geluGrad(x[0], x[1]);
    });
  }
};

/// gptc.unary -> linalg.generic { fn(x) }.
struct UnaryToLinalg final : OpRewritePattern<UnaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnaryOp op,
                                PatternRewriter &rewriter) const override {
    UnaryFn fn = op.getFn();
    return lowerElementwise(op, rewriter, [fn](Scalar &s, ValueRange x) {
      return s.unary(fn, x[0]);
    });
  }
};

/// gptc.binary -> linalg.generic { fn(x, y) }.
struct BinaryToLinalg final : OpRewritePattern<BinaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BinaryOp op,
                                PatternRewriter &rewriter) const override {
    BinaryFn fn = op.getFn();
    return lowerElementwise(op, rewriter, [fn](Scalar &s, ValueRange x) {
      return s.binary(fn, x[0], x[1]);
    });
  }
};

/// gptc.cast -> linalg.generic { arith.extf / arith.truncf } (round to
/// nearest even).
struct CastToLinalg final : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto from = cast<FloatType>(op.getInput().getType().getElementType());
    auto to = cast<FloatType>(op.getType().getElementType());
    auto type = op.getType();
    Location loc = op.getLoc();
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(), to);
    int64_t rank = type.getRank();
    SmallVector<AffineMap> maps(2, rewriter.getMultiDimIdentityMap(rank));
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{op.getInput()},
        ValueRange{init}, maps, iterators,
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value v = args[0];
          if (from.getWidth() < to.getWidth())
            v = arith::ExtFOp::create(b, nested, to, v);
          else if (from.getWidth() > to.getWidth())
            v = arith::TruncFOp::create(b, nested, to, v);
          else if (from != to)
            v = arith::TruncFOp::create(
                b, nested, to,
                arith::ExtFOp::create(b, nested, b.getF32Type(), v));
          linalg::YieldOp::create(b, nested, v);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ElementwiseToLinalg<AddOp, addFormula>, GeluToLinalg,
               GeluGradToLinalg, CastToLinalg, UnaryToLinalg, BinaryToLinalg>(
      patterns.getContext());
}

bool mlir::gptc::hasLinalgLowering(Operation *op) {
  if (!isa<AddOp, GeluOp, GeluGradOp, CastOp, UnaryOp, BinaryOp>(op))
    return false;
  // Static float tensors of one shape (which these ops' verifiers imply),
  // with a dimension 0 for the runtime to split over threads: scalars stay
  // with the runtime, and so do empty tensors (nothing to generate).
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape() && type.getRank() >= 1 &&
         type.getNumElements() > 0 && isa<FloatType>(type.getElementType());
}
