//===- GptcAutodiff.cpp - Vector-Jacobian rules of gptc ops ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// AutodiffOpInterface for every differentiable gptc op. Each rule builds the
// gradients of its operands at the builder's insertion point, at the
// forward op's location, so a backward op is traced to the same field of
// the model description as its forward op.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

/// A zero tensor of `type`.
static Value zeros(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  auto zero = b.getFloatAttr(tensor.getElementType(), 0.0);
  return ConstantOp::create(b, loc, tensor,
                            DenseElementsAttr::get(tensor, zero));
}

/// `grad`, the gradient of `result`, or zeros where the loss does not
/// depend on that result (one result of a multi-result op).
static Value gradOrZeros(OpBuilder &b, Location loc, Value grad, Value result) {
  return grad ? grad : zeros(b, loc, result.getType());
}

/// `value` reshaped to `shape` (no op when it already has it).
static Value reshapeTo(OpBuilder &b, Location loc, Value value,
                       ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value);
}

/// Collapses all but the last dimension: `[d0, ..., dn-1, k]` -> `[M, k]`.
static Value flattenRows(OpBuilder &b, Location loc, Value value) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  return reshapeTo(b, loc, value, {rows, shape.back()});
}

//===----------------------------------------------------------------------===//
// Ops without differentiable operands
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::buildVectorJacobianProduct(OpBuilder &, ValueRange,
                                                     SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult IotaOp::buildVectorJacobianProduct(OpBuilder &, ValueRange,
                                                 SmallVectorImpl<Value> &) {
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding and dense layers
//===----------------------------------------------------------------------===//

LogicalResult
EmbeddingOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Value table = EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                        getIds(), resultGrads[0], getOffset());
  operandGrads.append({Value(), table});
  if (getOffset())
    operandGrads.push_back(Value());
  return success();
}

/// y = x W^T + b, with x flattened to [M, K] and dy to [M, N]:
///   dx = dy W,   dW = dy^T x,   db = sum_rows(dy).
LogicalResult
LinearOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value x = getInput();
  auto xType = getInput().getType();
  if (xType.getRank() == 1)
    x = reshapeTo(b, loc, x, {1, xType.getDimSize(0)});
  Value x2 = flattenRows(b, loc, x);
  Value dy2 = flattenRows(b, loc, resultGrads[0]);
  Value dx2 =
      MatmulOp::create(b, loc, dy2, getWeight(), /*transpose_lhs=*/false,
                       /*transpose_rhs=*/false);
  Value dx = reshapeTo(b, loc, dx2, getInput().getType().getShape());
  Value dw = MatmulOp::create(b, loc, dy2, x2, /*transpose_lhs=*/true,
                              /*transpose_rhs=*/false);
  operandGrads.append({dx, dw});
  if (getBias())
    operandGrads.push_back(
        ReduceSumOp::create(b, loc, dy2, b.getDenseI64ArrayAttr({0})));
  return success();
}

/// C = op(A) op(B). With a = op(A), b' = op(B): da = dC b'^T, db' = a^T dC,
/// each transposed back when the operand was used transposed; every case
/// is one matmul with transpose flags.
LogicalResult
MatmulOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dc = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Value da = ta ? MatmulOp::create(b, loc, rhs, dc, /*transpose_lhs=*/tb,
                                   /*transpose_rhs=*/true)
                : MatmulOp::create(b, loc, dc, rhs, /*transpose_lhs=*/false,
                                   /*transpose_rhs=*/!tb);
  Value db = tb ? MatmulOp::create(b, loc, dc, lhs, /*transpose_lhs=*/true,
                                   /*transpose_rhs=*/ta)
                : MatmulOp::create(b, loc, lhs, dc, /*transpose_lhs=*/!ta,
                                   /*transpose_rhs=*/false);
  operandGrads.append({da, db});
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and activations
//===----------------------------------------------------------------------===//

LogicalResult
LayerNormOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto grad = LayerNormGradOp::create(b, getLoc(), getInput(), getGamma(),
                                      resultGrads[0], getEpsilonAttr());
  operandGrads.append(
      {grad.getInputGrad(), grad.getGammaGrad(), grad.getBetaGrad()});
  return success();
}

LogicalResult
GeluOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      GeluGradOp::create(b, getLoc(), getInput(), resultGrads[0], getExact()));
  return success();
}

LogicalResult
SoftmaxOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      SoftmaxGradOp::create(b, getLoc(), getResult(), resultGrads[0]));
  return success();
}

LogicalResult
AddOp::buildVectorJacobianProduct(OpBuilder &, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append({resultGrads[0], resultGrads[0]});
  return success();
}

/// A tensor of `type` with every element `value`.
static Value splat(OpBuilder &b, Location loc, Type type, double value) {
  auto tensor = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, tensor,
      DenseElementsAttr::get(tensor,
                             b.getFloatAttr(tensor.getElementType(), value)));
}

LogicalResult
UnaryOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value x = getInput(), y = getResult(), dy = resultGrads[0];
  Type type = y.getType();
  auto unary = [&](UnaryFn fn, Value v) -> Value {
    return UnaryOp::create(b, loc, fn, v);
  };
  auto binary = [&](BinaryFn fn, Value l, Value r) -> Value {
    return BinaryOp::create(b, loc, fn, l, r);
  };
  auto mul = [&](Value l, Value r) { return binary(BinaryFn::mul, l, r); };
  Value dx;
  switch (getFn()) {
  case UnaryFn::neg:
    dx = unary(UnaryFn::neg, dy);
    break;
  case UnaryFn::sqrt: // dy / (2 y)
    dx = binary(BinaryFn::div, dy, mul(splat(b, loc, type, 2.0), y));
    break;
  case UnaryFn::exp: // dy y
    dx = mul(dy, y);
    break;
  case UnaryFn::log: // dy / x
    dx = binary(BinaryFn::div, dy, x);
    break;
  // Each op built in its own statement: the order of function arguments'
  // evaluation is unspecified, and the IR's order must not depend on the
  // compiler.
  case UnaryFn::tanh: { // dy (1 - y^2)
    Value one = splat(b, loc, type, 1.0);
    Value y2 = mul(y, y);
    dx = mul(dy, binary(BinaryFn::sub, one, y2));
    break;
  }
  case UnaryFn::erf: { // dy 2/sqrt(pi) exp(-x^2)
    Value scaled = mul(dy, splat(b, loc, type, 1.1283791670955126));
    Value gauss = unary(UnaryFn::exp, unary(UnaryFn::neg, mul(x, x)));
    dx = mul(scaled, gauss);
    break;
  }
  case UnaryFn::reciprocal: // -dy y^2
    dx = unary(UnaryFn::neg, mul(dy, mul(y, y)));
    break;
  case UnaryFn::relu: // dy [x > 0]
    dx = mul(dy, unary(UnaryFn::step, x));
    break;
  case UnaryFn::sigmoid: { // dy y (1 - y)
    Value dyY = mul(dy, y);
    Value oneMinusY = binary(BinaryFn::sub, splat(b, loc, type, 1.0), y);
    dx = mul(dyY, oneMinusY);
    break;
  }
  case UnaryFn::abs: // dy sign(x)
    dx = mul(dy, unary(UnaryFn::sign, x));
    break;
  case UnaryFn::step:
  case UnaryFn::sign:
    dx = zeros(b, loc, type);
    break;
  }
  operandGrads.push_back(dx);
  return success();
}

LogicalResult
BinaryOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value l = getLhs(), r = getRhs(), y = getResult(), dy = resultGrads[0];
  auto binary = [&](BinaryFn fn, Value u, Value v) -> Value {
    return BinaryOp::create(b, loc, fn, u, v);
  };
  auto mul = [&](Value u, Value v) { return binary(BinaryFn::mul, u, v); };
  auto neg = [&](Value v) -> Value {
    return UnaryOp::create(b, loc, UnaryFn::neg, v);
  };
  switch (getFn()) {
  case BinaryFn::sub:
    operandGrads.append({dy, neg(dy)});
    break;
  case BinaryFn::mul:
    operandGrads.append({mul(dy, r), mul(dy, l)});
    break;
  case BinaryFn::div: // dy / r, -dy y / r
    operandGrads.append({binary(BinaryFn::div, dy, r),
                         neg(binary(BinaryFn::div, mul(dy, y), r))});
    break;
  case BinaryFn::pow: { // dy r l^(r-1), dy y log(l)
    Value rMinus1 = binary(BinaryFn::sub, r, splat(b, loc, r.getType(), 1.0));
    Value dl = mul(dy, mul(r, binary(BinaryFn::pow, l, rMinus1)));
    Value dyY = mul(dy, y);
    Value logL = UnaryOp::create(b, loc, UnaryFn::log, l);
    operandGrads.append({dl, mul(dyY, logL)});
    break;
  }
  case BinaryFn::unless_nan: // 0 (piecewise constant in l), unless_nan(l, dy)
    operandGrads.append(
        {splat(b, loc, l.getType(), 0.0), binary(BinaryFn::unless_nan, l, dy)});
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

LogicalResult CausalAttentionOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads,
    SmallVectorImpl<Value> &operandGrads) {
  auto grad = CausalAttentionGradOp::create(b, getLoc(), getQuery(), getKey(),
                                            getValue(), resultGrads[0],
                                            getNumHeadsAttr(), getPositions());
  operandGrads.append(
      {grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  // The positions are integers: no gradient.
  if (getPositions())
    operandGrads.push_back(Value());
  return success();
}

/// One ring step: the gradients of its output and log-sum-exp (either may
/// be unused, hence zero) go to one gradient op.
LogicalResult AttentionBlockOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value dout = gradOrZeros(b, loc, resultGrads[0], getResult());
  Value dlse = gradOrZeros(b, loc, resultGrads[1], getLse());
  auto grad = AttentionBlockGradOp::create(
      b, loc, getQuery(), getKey(), getValue(), getQueryPositions(),
      getKeyPositions(), dout, dlse, getNumHeadsAttr());
  // The positions are integers: no gradient.
  grads.append({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad(),
                Value(), Value()});
  return success();
}

LogicalResult AttentionMergeOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value dout = gradOrZeros(b, loc, resultGrads[0], getResult());
  Value dlse = gradOrZeros(b, loc, resultGrads[1], getLse());
  auto grad = AttentionMergeGradOp::create(b, loc, getA(), getLseA(), getB(),
                                           getLseB(), dout, dlse);
  grads.append({grad.getAGrad(), grad.getLseAGrad(), grad.getBGrad(),
                grad.getLseBGrad()});
  return success();
}

LogicalResult CrossEntropyOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads,
    SmallVectorImpl<Value> &operandGrads) {
  Value dlogits = CrossEntropyGradOp::create(
      b, getLoc(), getLogits(), getLabels(), resultGrads[0], getNormalizer(),
      getIgnoreIndexAttr());
  // The normalizer is a token count: constant for differentiation.
  operandGrads.append({dlogits, Value()});
  if (getNormalizer())
    operandGrads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

LogicalResult
ReduceSumOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(BroadcastOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getDimensionsAttr()));
  return success();
}

LogicalResult
BroadcastOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      ReduceSumOp::create(b, getLoc(), resultGrads[0], getDimensionsAttr()));
  return success();
}

LogicalResult
ReshapeOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      ReshapeOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}

LogicalResult
TransposeOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  operandGrads.push_back(TransposeOp::create(b, getLoc(), resultGrads[0],
                                             b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult
SplitOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> pieces;
  for (auto [result, grad] : llvm::zip(getResults(), resultGrads))
    pieces.push_back(grad ? grad : zeros(b, getLoc(), result.getType()));
  operandGrads.push_back(ConcatOp::create(b, getLoc(), getInput().getType(),
                                          pieces, getAxisAttr()));
  return success();
}

LogicalResult
ConcatOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  auto pieces = SplitOp::create(b, getLoc(), getInputs().getTypes(),
                                resultGrads[0], getAxisAttr());
  operandGrads.append(pieces.getResults().begin(), pieces.getResults().end());
  return success();
}

LogicalResult
CastOp::buildVectorJacobianProduct(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      CastOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel cross-entropy
//===----------------------------------------------------------------------===//

LogicalResult VocabParallelPartialsOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads,
    SmallVectorImpl<Value> &operandGrads) {
  auto rows = cast<RankedTensorType>(getMax().getType());
  Value dSum = resultGrads[0] ? resultGrads[0] : zeros(b, getLoc(), rows);
  Value dTarget = resultGrads[1] ? resultGrads[1] : zeros(b, getLoc(), rows);
  Value dLogits = VocabParallelPartialsGradOp::create(
      b, getLoc(), getLogits(), getMax(), getLabels(), getOffset(), dSum,
      dTarget, getVocabSizeAttr());
  // The maxima only shift the exponentials: the loss does not depend on
  // them, so they get no gradient.
  operandGrads.append({dLogits, Value(), Value(), Value()});
  return success();
}

LogicalResult VocabParallelLossOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads, SmallVectorImpl<Value> &grads) {
  Type rows = getSumExp().getType();
  auto g = VocabParallelLossGradOp::create(
      b, getLoc(), rows, rows, getSumExp(), getLabels(), resultGrads[0],
      getNormalizer(), getIgnoreIndexAttr());
  grads.append({Value(), g.getDSumExp(), g.getDTarget(), Value()});
  if (getNormalizer())
    grads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Tensor-parallel collectives
//===----------------------------------------------------------------------===//

LogicalResult GradAllReduceOp::buildVectorJacobianProduct(
    OpBuilder &b, ValueRange resultGrads,
    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(shard::AllReduceOp::create(
      b, getLoc(), resultGrads[0].getType(), getGrid(), getGridAxes(),
      resultGrads[0], shard::ReductionKind::Sum));
  return success();
}

namespace {
/// Megatron's "g": a sum all-reduce of partial results (after a
/// row-parallel layer) whose cotangent is replicated over the group, so the
/// gradient of each rank's partial result is that cotangent unchanged.
/// Only this use is differentiated: gptc's passes insert no other
/// all-reduce before gptc-autodiff.
struct AllReduceAutodiff
    : AutodiffOpInterface::ExternalModel<AllReduceAutodiff,
                                         shard::AllReduceOp> {
  LogicalResult
  buildVectorJacobianProduct(Operation *op, OpBuilder &, ValueRange resultGrads,
                             SmallVectorImpl<Value> &grads) const {
    auto reduce = cast<shard::AllReduceOp>(op);
    if (reduce.getReduction() != shard::ReductionKind::Sum)
      return op->emitOpError("has no gradient rule for this reduction");
    grads.push_back(resultGrads[0]);
    return success();
  }
};
} // namespace

namespace {
/// Sequence parallelism's "f": gathering the sequence shards of a
/// replicated-to-be activation; each rank's use of the whole sequence
/// contributes part of every shard's gradient, so the gradient is summed
/// over the group and scattered back (reduce-scatter).
struct AllGatherAutodiff
    : AutodiffOpInterface::ExternalModel<AllGatherAutodiff,
                                         shard::AllGatherOp> {
  LogicalResult
  buildVectorJacobianProduct(Operation *op, OpBuilder &b,
                             ValueRange resultGrads,
                             SmallVectorImpl<Value> &grads) const {
    auto gather = cast<shard::AllGatherOp>(op);
    grads.push_back(shard::ReduceScatterOp::create(
        b, op->getLoc(), gather.getInput().getType(), gather.getGrid(),
        gather.getGridAxes(), resultGrads[0], shard::ReductionKind::Sum,
        gather.getGatherAxis()));
    return success();
  }
};

/// Sequence parallelism's "g": the partial products summed and scattered
/// by sequence; the gradient of each shard is needed whole on every rank
/// (all-gather).
struct ReduceScatterAutodiff
    : AutodiffOpInterface::ExternalModel<ReduceScatterAutodiff,
                                         shard::ReduceScatterOp> {
  LogicalResult
  buildVectorJacobianProduct(Operation *op, OpBuilder &b,
                             ValueRange resultGrads,
                             SmallVectorImpl<Value> &grads) const {
    auto scatter = cast<shard::ReduceScatterOp>(op);
    if (scatter.getReduction() != shard::ReductionKind::Sum)
      return op->emitOpError("has no gradient rule for this reduction");
    grads.push_back(shard::AllGatherOp::create(
        b, op->getLoc(), scatter.getInput().getType(), scatter.getGrid(),
        scatter.getGridAxes(), resultGrads[0], scatter.getScatterAxis()));
    return success();
  }
};

/// Ring attention's passing of key and value blocks: each rank's gradient
/// goes back to the rank it came from (the opposite shift).
struct ShiftAutodiff
    : AutodiffOpInterface::ExternalModel<ShiftAutodiff, shard::ShiftOp> {
  LogicalResult
  buildVectorJacobianProduct(Operation *op, OpBuilder &b,
                             ValueRange resultGrads,
                             SmallVectorImpl<Value> &grads) const {
    auto shift = cast<shard::ShiftOp>(op);
    if (!shift.getRotate())
      return op->emitOpError("has no gradient rule without `rotate`");
    grads.push_back(shard::ShiftOp::create(
        b, op->getLoc(), shift.getInput().getType(), shift.getGridAttr(),
        shift.getGridAxesAttr(), resultGrads[0], shift.getShiftAxisAttr(),
        b.getI64IntegerAttr(-shift.getOffsetAttr().getInt()), b.getUnitAttr()));
    return success();
  }
};

/// A replicated value cut into its shards: every rank holds the whole
/// value, whose gradient gathers the shards' gradients.
struct AllSliceAutodiff
    : AutodiffOpInterface::ExternalModel<AllSliceAutodiff, shard::AllSliceOp> {
  LogicalResult
  buildVectorJacobianProduct(Operation *op, OpBuilder &b,
                             ValueRange resultGrads,
                             SmallVectorImpl<Value> &grads) const {
    auto slice = cast<shard::AllSliceOp>(op);
    grads.push_back(shard::AllGatherOp::create(
        b, op->getLoc(), slice.getInput().getType(), slice.getGrid(),
        slice.getGridAxes(), resultGrads[0], slice.getSliceAxis()));
    return success();
  }
};
} // namespace

void mlir::gptc::registerShardAutodiffModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<AllReduceAutodiff>(*ctx);
    shard::AllGatherOp::attachInterface<AllGatherAutodiff>(*ctx);
    shard::ReduceScatterOp::attachInterface<ReduceScatterAutodiff>(*ctx);
    shard::AllSliceOp::attachInterface<AllSliceAutodiff>(*ctx);
    shard::ShiftOp::attachInterface<ShiftAutodiff>(*ctx);
  });
}
