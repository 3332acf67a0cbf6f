//===- GptcOps.cpp - gptc dialect operations ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Type inference, verifiers, folders and FLOP counts of the gptc ops.
//
// Shape errors are reported from `inferReturnTypes`, which the
// InferTypeOpInterface verifier calls with the op's location, so a malformed
// op and a builder given inconsistent operands get the same message.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::gptc;

#include "gptc/Dialect/Gptc/IR/GptcInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

/// Emits `'<opName>' op <message>` at `loc` when a location is given (type
/// inference may run without one) and returns failure.
static LogicalResult shapeError(std::optional<Location> loc, StringRef opName,
                                const Twine &message) {
  if (loc)
    mlir::emitError(*loc) << "'gptc." << opName << "' op " << message;
  return failure();
}

/// Returns `value`'s type as a ranked tensor, or null.
static RankedTensorType rankedType(Value value) {
  return value ? dyn_cast<RankedTensorType>(value.getType())
               : RankedTensorType();
}

/// Multiplies non-negative counts, saturating at INT64_MAX so that absurd
/// shapes give an absurd count rather than undefined behaviour.
static int64_t mulSat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::numeric_limits<int64_t>::max();
  return r;
}

static int64_t addSat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::numeric_limits<int64_t>::max();
  return r;
}

static int64_t numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  int64_t n = 1;
  for (int64_t d : tensor.getShape())
    n = mulSat(n, d);
  return n;
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

int64_t ConstantOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// IotaOp
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  int64_t rank = getType().getRank();
  if (getDimension() >= static_cast<uint64_t>(rank))
    return emitOpError("dimension ")
           << getDimension() << " is out of range for a rank-" << rank
           << " result";
  return success();
}

int64_t IotaOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType ids = rankedType(adaptor.getIds());
  RankedTensorType table = rankedType(adaptor.getTable());
  if (!ids || !table)
    return shapeError(loc, "embedding", "expects ranked tensor operands");
  if (table.getRank() != 2)
    return shapeError(loc, "embedding",
                      "expects a rank-2 table (vocab x width), got rank " +
                          Twine(table.getRank()));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

int64_t EmbeddingOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  RankedTensorType weight = rankedType(adaptor.getWeight());
  RankedTensorType bias = rankedType(adaptor.getBias());
  if (!input || !weight)
    return shapeError(loc, "linear", "expects ranked tensor operands");
  if (input.getRank() < 1)
    return shapeError(loc, "linear", "expects an input of rank >= 1");
  if (weight.getRank() != 2)
    return shapeError(loc, "linear",
                      "expects a rank-2 weight (out x in), got rank " +
                          Twine(weight.getRank()));
  int64_t k = input.getShape().back();
  if (weight.getDimSize(1) != k)
    return shapeError(loc, "linear",
                      "input features " + Twine(k) +
                          " do not match weight dimension 1 (" +
                          Twine(weight.getDimSize(1)) + ")");
  Type elementType = input.getElementType();
  if (weight.getElementType() != elementType)
    return shapeError(loc, "linear",
                      "expects input and weight of the same element type");
  if (adaptor.getBias()) {
    if (!bias || bias.getRank() != 1 ||
        bias.getDimSize(0) != weight.getDimSize(0))
      return shapeError(loc, "linear",
                        "expects a rank-1 bias of size " +
                            Twine(weight.getDimSize(0)));
    if (bias.getElementType() != elementType)
      return shapeError(loc, "linear",
                        "expects a bias of the input's element type");
  }
  SmallVector<int64_t> shape(input.getShape().drop_back());
  shape.push_back(weight.getDimSize(0));
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

int64_t LinearOp::getFlopCount() {
  int64_t k = getInput().getType().getShape().back();
  int64_t outputs = numElements(getType());
  int64_t flops = mulSat(mulSat(2, outputs), k);
  return getBias() ? addSat(flops, outputs) : flops;
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = rankedType(adaptor.getLhs());
  RankedTensorType rhs = rankedType(adaptor.getRhs());
  if (!lhs || !rhs)
    return shapeError(loc, "matmul", "expects ranked tensor operands");
  if (lhs.getRank() < 2 || lhs.getRank() != rhs.getRank())
    return shapeError(loc, "matmul",
                      "expects operands of equal rank >= 2, got " +
                          Twine(lhs.getRank()) + " and " +
                          Twine(rhs.getRank()));
  if (lhs.getElementType() != rhs.getElementType())
    return shapeError(loc, "matmul",
                      "expects operands of the same element type");
  int64_t rank = lhs.getRank();
  ArrayRef<int64_t> a = lhs.getShape(), b = rhs.getShape();
  if (a.drop_back(2) != b.drop_back(2))
    return shapeError(loc, "matmul", "expects equal batch dimensions");
  int64_t m = adaptor.getTransposeLhs() ? a[rank - 1] : a[rank - 2];
  int64_t ka = adaptor.getTransposeLhs() ? a[rank - 2] : a[rank - 1];
  int64_t kb = adaptor.getTransposeRhs() ? b[rank - 1] : b[rank - 2];
  int64_t n = adaptor.getTransposeRhs() ? b[rank - 2] : b[rank - 1];
  if (ka != kb)
    return shapeError(loc, "matmul",
                      "contraction sizes differ: " + Twine(ka) + " vs " +
                          Twine(kb));
  SmallVector<int64_t> shape(a.drop_back(2));
  shape.append({m, n});
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

int64_t MatmulOp::getFlopCount() {
  ArrayRef<int64_t> a = getLhs().getType().getShape();
  int64_t k = getTransposeLhs() ? a[a.size() - 2] : a.back();
  return mulSat(mulSat(2, numElements(getType())), k);
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  RankedTensorType gamma = rankedType(adaptor.getGamma());
  RankedTensorType beta = rankedType(adaptor.getBeta());
  if (!input || !gamma || !beta)
    return shapeError(loc, "layer_norm", "expects ranked tensor operands");
  if (input.getRank() < 1)
    return shapeError(loc, "layer_norm", "expects an input of rank >= 1");
  double eps = adaptor.getEpsilon().convertToDouble();
  if (!(eps > 0) || !std::isfinite(eps))
    return shapeError(loc, "layer_norm", "epsilon must be positive and finite");
  int64_t c = input.getShape().back();
  for (RankedTensorType param : {gamma, beta}) {
    if (param.getRank() != 1 || param.getDimSize(0) != c)
      return shapeError(loc, "layer_norm",
                        "expects gamma and beta of shape [" + Twine(c) + "]");
    if (param.getElementType() != input.getElementType())
      return shapeError(loc, "layer_norm",
                        "expects gamma and beta of the input's element type");
  }
  inferred.push_back(input);
  return success();
}

int64_t LayerNormOp::getFlopCount() {
  // mean (1), centred square and sum (3), normalize (2), affine (2).
  return mulSat(8, numElements(getType()));
}

//===----------------------------------------------------------------------===//
// GeluOp, SoftmaxOp, AddOp, UnaryOp, BinaryOp
//===----------------------------------------------------------------------===//

int64_t GeluOp::getFlopCount() {
  // x^3, fma, scale, tanh, add, two multiplies: about 8 per element.
  return mulSat(8, numElements(getType()));
}

LogicalResult SoftmaxOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError("expects an input of rank >= 1");
  return success();
}

int64_t SoftmaxOp::getFlopCount() {
  // max, subtract, exp, sum, divide.
  return mulSat(5, numElements(getType()));
}

int64_t AddOp::getFlopCount() { return numElements(getType()); }

int64_t UnaryOp::getFlopCount() {
  // A transcendental counts as one FLOP, as the fused ops count them.
  return numElements(getType());
}

int64_t BinaryOp::getFlopCount() { return numElements(getType()); }

//===----------------------------------------------------------------------===//
// CausalAttentionOp
//===----------------------------------------------------------------------===//

/// The result type of attention over `query`, `key` and `value` (shared by
/// the op and its gradient), or failure with a message under `opName`.
/// With `positions` the keys and values may cover a longer sequence than
/// the queries (context parallelism).
static FailureOr<RankedTensorType>
inferAttentionType(std::optional<Location> loc, StringRef opName, Value query,
                   Value key, Value value, int64_t heads, Value positions) {
  RankedTensorType q = rankedType(query);
  RankedTensorType k = rankedType(key);
  RankedTensorType v = rankedType(value);
  if (!q || !k || !v)
    return shapeError(loc, opName, "expects ranked tensor operands");
  if (q.getRank() != 3)
    return shapeError(loc, opName,
                      "expects query of shape batch x seq x width, got rank " +
                          Twine(q.getRank()));
  if (!positions) {
    if (k != q || v != q)
      return shapeError(loc, opName,
                        "expects query, key and value of the same type");
  } else {
    RankedTensorType p = rankedType(positions);
    if (k != v || k.getRank() != 3 ||
        k.getElementType() != q.getElementType() ||
        k.getDimSize(0) != q.getDimSize(0) ||
        k.getDimSize(2) != q.getDimSize(2))
      return shapeError(loc, opName,
                        "expects key and value of one type, with the "
                        "query's batch, width and element type");
    if (!p || p.getRank() != 1 || p.getDimSize(0) != q.getDimSize(1) ||
        !p.getElementType().isInteger(32))
      return shapeError(loc, opName,
                        "expects one i32 position per query row, got " +
                            Twine(p ? p.getDimSize(0) : -1) + " for " +
                            Twine(q.getDimSize(1)) + " rows");
    if (k.getDimSize(1) < q.getDimSize(1))
      return shapeError(loc, opName,
                        "expects at least as many keys as queries");
  }
  if (heads <= 0 || q.getDimSize(2) % heads != 0)
    return shapeError(loc, opName,
                      "width " + Twine(q.getDimSize(2)) +
                          " is not divisible by " + Twine(heads) + " heads");
  return q;
}

LogicalResult
CausalAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = inferAttentionType(
      loc, "causal_attention", adaptor.getQuery(), adaptor.getKey(),
      adaptor.getValue(), adaptor.getNumHeads(), adaptor.getPositions());
  if (failed(type))
    return failure();
  inferred.push_back(*type);
  return success();
}

/// FLOPs of attention-shaped work on `query` (B x Tq x C, H heads) and
/// `key` (B x Tk x C): `matmulFactor` B Tq Tk C for the products,
/// `softmaxFactor` B H Tq Tk for the score-wise work.
static int64_t attentionFlops(RankedTensorType query, RankedTensorType key,
                              int64_t heads, int64_t matmulFactor,
                              int64_t softmaxFactor) {
  ArrayRef<int64_t> s = query.getShape();
  int64_t b = s[0], t = s[1], c = s[2], tk = key.getDimSize(1);
  int64_t matmuls = mulSat(mulSat(mulSat(matmulFactor, b), mulSat(t, tk)), c);
  int64_t scores =
      mulSat(mulSat(softmaxFactor, b), mulSat(heads, mulSat(t, tk)));
  return addSat(matmuls, scores);
}

int64_t CausalAttentionOp::getFlopCount() {
  // Q K^T and P V: 2 x (2 B T T C); softmax (5 per score).
  return attentionFlops(getQuery().getType(), getKey().getType(), getNumHeads(),
                        4, 5);
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  RankedTensorType logits = rankedType(adaptor.getLogits());
  RankedTensorType labels = rankedType(adaptor.getLabels());
  if (!logits || !labels)
    return shapeError(loc, "cross_entropy", "expects ranked tensor operands");
  if (logits.getRank() < 1)
    return shapeError(loc, "cross_entropy", "expects logits of rank >= 1");
  if (labels.getShape() != logits.getShape().drop_back())
    return shapeError(loc, "cross_entropy",
                      "expects labels shaped like the logits without their "
                      "last (vocabulary) dimension");
  inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

int64_t CrossEntropyOp::getFlopCount() {
  // log-softmax over the vocabulary plus the gather and the mean.
  return mulSat(5, numElements(getLogits().getType()));
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("expects the same element type, got ")
           << in.getElementType() << " and " << out.getElementType();
  if (numElements(in) != numElements(out))
    return emitOpError("cannot reshape ")
           << numElements(in) << " elements into " << numElements(out);
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x): only the final shape matters.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

int64_t ReshapeOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  if (!input)
    return shapeError(loc, "transpose", "expects a ranked tensor operand");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(perm.size()) != rank)
    return shapeError(loc, "transpose",
                      "permutation has " + Twine(perm.size()) +
                          " entries for a rank-" + Twine(rank) + " input");
  llvm::SmallBitVector seen(rank);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen.test(p))
      return shapeError(loc, "transpose",
                        "permutation is not a permutation of [0, " +
                            Twine(rank) + ")");
    seen.set(p);
    shape.push_back(input.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // transpose(transpose(x, p), q) is x when q undoes p.
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> inner = producer.getPermutation();
    bool identity = true;
    for (auto [i, p] : llvm::enumerate(perm))
      identity &= inner[p] == static_cast<int64_t>(i);
    if (identity)
      return producer.getInput();
  }
  return {};
}

int64_t TransposeOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// SplitOp
//===----------------------------------------------------------------------===//

/// Checks that `pieces` tile `whole` along `axis` (split's results, concat's
/// inputs): same rank and element type, equal other dimensions, sizes along
/// `axis` adding up. `piece` and `other` name the two sides in messages.
static LogicalResult verifyPieces(Operation *op, RankedTensorType whole,
                                  TypeRange pieces, int64_t axis,
                                  StringRef piece, StringRef other) {
  int64_t rank = whole.getRank(), total = 0;
  for (Type type : pieces) {
    auto part = cast<RankedTensorType>(type);
    if (part.getElementType() != whole.getElementType() ||
        part.getRank() != rank)
      return op->emitOpError("expects ")
             << piece << "s of the " << other << "'s rank and element type";
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && part.getDimSize(d) != whole.getDimSize(d))
        return op->emitOpError() << piece << " dimension " << d
                                 << " differs from the " << other << "'s";
    total = addSat(total, part.getDimSize(axis));
  }
  if (total != whole.getDimSize(axis))
    return op->emitOpError()
           << piece << " sizes along axis " << axis << " add up to " << total
           << ", not " << whole.getDimSize(axis);
  return success();
}

LogicalResult SplitOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t rank = input.getRank();
  if (getResults().empty())
    return emitOpError("expects at least one result");
  if (getAxis() >= static_cast<uint64_t>(rank))
    return emitOpError("axis ")
           << getAxis() << " is out of range for a rank-" << rank << " input";
  return verifyPieces(*this, input, getResultTypes(), getAxis(), "result",
                      "input");
}

int64_t SplitOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

/// The float element type of a tensor value, or null.
static FloatType floatElement(Value v) {
  return dyn_cast<FloatType>(
      cast<RankedTensorType>(v.getType()).getElementType());
}

/// The value `v` widened exactly, if a cast of a float to a wider float
/// (bf16 or f16 to f32 or f64, f32 to f64) made it; else null.
static Value widenedFrom(Value v) {
  auto widen = v.getDefiningOp<CastOp>();
  if (!widen)
    return {};
  FloatType narrow = floatElement(widen.getInput()), wide = floatElement(v);
  if (!narrow || !wide || wide.getWidth() <= narrow.getWidth())
    return {};
  return widen.getInput();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // Back to the type of a value that was widened exactly: the value itself.
  if (Value original = widenedFrom(getInput()))
    if (original.getType() == getType())
      return original;
  return {};
}

/// A cast back to the narrow type of a piece of a split of an exact
/// widening is that piece of a split of the narrow value: a fused QKV
/// projection's bf16 result, widened and split, feeds bf16 attention
/// without a round trip (equal pieces merge by CSE).
static LogicalResult narrowSplitPiece(CastOp op, PatternRewriter &rewriter) {
  auto split = op.getInput().getDefiningOp<SplitOp>();
  if (!split)
    return failure();
  Value narrow = widenedFrom(split.getInput());
  if (!narrow || floatElement(op) != floatElement(narrow))
    return failure();
  FloatType narrowType = floatElement(narrow);
  SmallVector<Type> pieces;
  for (Type t : split.getResultTypes())
    pieces.push_back(cast<RankedTensorType>(t).clone(narrowType));
  auto narrowSplit = SplitOp::create(rewriter, split.getLoc(), pieces, narrow,
                                     split.getAxisAttr());
  rewriter.replaceOp(op, narrowSplit.getResult(
                             cast<OpResult>(op.getInput()).getResultNumber()));
  return success();
}

void CastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *) {
  results.add(narrowSplitPiece);
}

int64_t CastOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// ReduceSumOp, BroadcastOp
//===----------------------------------------------------------------------===//

/// Checks that `dims` is strictly increasing within [0, rank).
static bool isIncreasingWithin(ArrayRef<int64_t> dims, int64_t rank) {
  for (auto [i, d] : llvm::enumerate(dims))
    if (d < 0 || d >= rank || (i > 0 && dims[i - 1] >= d))
      return false;
  return true;
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  if (!input)
    return shapeError(loc, "reduce_sum", "expects a ranked tensor operand");
  ArrayRef<int64_t> dims = adaptor.getDimensions();
  if (!isIncreasingWithin(dims, input.getRank()))
    return shapeError(loc, "reduce_sum",
                      "dimensions must be strictly increasing within [0, " +
                          Twine(input.getRank()) + ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(input.getDimSize(d));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

int64_t ReduceSumOp::getFlopCount() {
  return numElements(getInput().getType());
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  ArrayRef<int64_t> dims = getDimensions();
  if (input.getElementType() != result.getElementType())
    return emitOpError("expects the input's element type");
  if (!isIncreasingWithin(dims, result.getRank()) ||
      result.getRank() - static_cast<int64_t>(dims.size()) != input.getRank())
    return emitOpError("dimensions must be strictly increasing, within the "
                       "result's rank, and add the missing ")
           << result.getRank() - input.getRank() << " dimensions";
  int64_t next = 0;
  for (int64_t d = 0; d < result.getRank(); ++d) {
    if (llvm::is_contained(dims, d))
      continue;
    if (result.getDimSize(d) != input.getDimSize(next))
      return emitOpError("result dimension ")
             << d << " does not match input dimension " << next;
    ++next;
  }
  return success();
}

int64_t BroadcastOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("expects at least one input");
  RankedTensorType result = getType();
  int64_t rank = result.getRank();
  if (getAxis() >= static_cast<uint64_t>(rank))
    return emitOpError("axis ")
           << getAxis() << " is out of range for a rank-" << rank << " result";
  return verifyPieces(*this, result, getInputs().getTypes(), getAxis(), "input",
                      "result");
}

int64_t ConcatOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingGradOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType ids = getIds().getType(), grad = getGrad().getType();
  RankedTensorType table = getType();
  if (table.getRank() != 2)
    return emitOpError("expects a rank-2 result (vocab x width)");
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(table.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expects a gradient shaped like the ids with the "
                       "width appended");
  if (grad.getElementType() != table.getElementType())
    return emitOpError("expects the gradient's element type");
  return success();
}

int64_t EmbeddingGradOp::getFlopCount() {
  return numElements(getGrad().getType());
}

//===----------------------------------------------------------------------===//
// LayerNormGradOp
//===----------------------------------------------------------------------===//

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  RankedTensorType gamma = rankedType(adaptor.getGamma());
  RankedTensorType grad = rankedType(adaptor.getGrad());
  if (!input || !gamma || !grad)
    return shapeError(loc, "layer_norm_grad", "expects ranked tensor operands");
  if (input.getRank() < 1 || grad != input)
    return shapeError(loc, "layer_norm_grad",
                      "expects a gradient of the input's type, rank >= 1");
  if (gamma.getRank() != 1 || gamma.getDimSize(0) != input.getShape().back() ||
      gamma.getElementType() != input.getElementType())
    return shapeError(loc, "layer_norm_grad",
                      "expects gamma of shape [" +
                          Twine(input.getShape().back()) +
                          "] and the input's element type");
  inferred.append({input, gamma, gamma});
  return success();
}

int64_t LayerNormGradOp::getFlopCount() {
  return mulSat(14, numElements(getInput().getType()));
}

//===----------------------------------------------------------------------===//
// GeluGradOp, SoftmaxGradOp
//===----------------------------------------------------------------------===//

int64_t GeluGradOp::getFlopCount() {
  return mulSat(14, numElements(getType()));
}

LogicalResult SoftmaxGradOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError("expects an input of rank >= 1");
  return success();
}

int64_t SoftmaxGradOp::getFlopCount() {
  return mulSat(4, numElements(getType()));
}

//===----------------------------------------------------------------------===//
// CausalAttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult CausalAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = inferAttentionType(
      loc, "causal_attention_grad", adaptor.getQuery(), adaptor.getKey(),
      adaptor.getValue(), adaptor.getNumHeads(), adaptor.getPositions());
  if (failed(type))
    return failure();
  if (rankedType(adaptor.getGrad()) != *type)
    return shapeError(loc, "causal_attention_grad",
                      "expects a gradient of the query's type");
  RankedTensorType key = rankedType(adaptor.getKey());
  inferred.append({*type, key, key});
  return success();
}

int64_t CausalAttentionGradOp::getFlopCount() {
  // Recompute Q K^T, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q:
  // 5 x (2 B T T C); softmax recomputation and its gradient (9 per score).
  return attentionFlops(getQuery().getType(), getKey().getType(), getNumHeads(),
                        10, 9);
}

//===----------------------------------------------------------------------===//
// Ring attention: AttentionBlockOp, AttentionMergeOp and their gradients
//===----------------------------------------------------------------------===//

/// The output type of one ring step's attention, or failure under `opName`:
/// query B x Tq x C, key and value B x Tk x C of the query's element type,
/// one i32 position per query and per key.
static FailureOr<RankedTensorType>
inferBlockType(std::optional<Location> loc, StringRef opName, Value query,
               Value key, Value value, Value queryPositions, Value keyPositions,
               int64_t heads) {
  RankedTensorType q = rankedType(query), k = rankedType(key),
                   v = rankedType(value), qp = rankedType(queryPositions),
                   kp = rankedType(keyPositions);
  if (!q || !k || !v || !qp || !kp)
    return shapeError(loc, opName, "expects ranked tensor operands");
  if (q.getRank() != 3)
    return shapeError(loc, opName,
                      "expects query of shape batch x seq x width, got rank " +
                          Twine(q.getRank()));
  if (k != v || k.getRank() != 3 || k.getElementType() != q.getElementType() ||
      k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(2) != q.getDimSize(2))
    return shapeError(loc, opName,
                      "expects key and value of one type, with the query's "
                      "batch, width and element type");
  auto positions = [&](RankedTensorType p, int64_t rows) {
    return p.getRank() == 1 && p.getDimSize(0) == rows &&
           p.getElementType().isInteger(32);
  };
  if (!positions(qp, q.getDimSize(1)) || !positions(kp, k.getDimSize(1)))
    return shapeError(loc, opName,
                      "expects one i32 position per query row and per key");
  if (heads <= 0 || q.getDimSize(2) % heads != 0)
    return shapeError(loc, opName,
                      "width " + Twine(q.getDimSize(2)) +
                          " is not divisible by " + Twine(heads) + " heads");
  return q;
}

/// A ring step's output type from its query's: f32 for 16-bit queries
/// (mixed precision: the steps' outputs are merged in fp32), else the
/// query's.
static RankedTensorType blockOutputType(RankedTensorType query) {
  Type e = query.getElementType();
  if (e.isBF16() || e.isF16())
    return query.clone(Float32Type::get(query.getContext()));
  return query;
}

/// B x Tq x H of `output`'s element type: one log-sum-exp per head.
static RankedTensorType lseType(RankedTensorType output, int64_t heads) {
  return RankedTensorType::get(
      {output.getDimSize(0), output.getDimSize(1), heads},
      output.getElementType());
}

LogicalResult
AttentionBlockOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = inferBlockType(
      loc, "attention_block", adaptor.getQuery(), adaptor.getKey(),
      adaptor.getValue(), adaptor.getQueryPositions(),
      adaptor.getKeyPositions(), adaptor.getNumHeads());
  if (failed(type))
    return failure();
  RankedTensorType out = blockOutputType(*type);
  inferred.append({out, lseType(out, adaptor.getNumHeads())});
  return success();
}

int64_t AttentionBlockOp::getFlopCount() {
  // As causal attention over Tq x Tk scores (an upper bound: a ring step
  // skips the keys its queries do not see).
  return attentionFlops(getQuery().getType(), getKey().getType(), getNumHeads(),
                        4, 5);
}

LogicalResult AttentionBlockGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = inferBlockType(
      loc, "attention_block_grad", adaptor.getQuery(), adaptor.getKey(),
      adaptor.getValue(), adaptor.getQueryPositions(),
      adaptor.getKeyPositions(), adaptor.getNumHeads());
  if (failed(type))
    return failure();
  RankedTensorType out = blockOutputType(*type);
  if (rankedType(adaptor.getGrad()) != out ||
      rankedType(adaptor.getLseGrad()) != lseType(out, adaptor.getNumHeads()))
    return shapeError(loc, "attention_block_grad",
                      "expects gradients of the output's and the "
                      "log-sum-exp's types");
  RankedTensorType key = rankedType(adaptor.getKey());
  inferred.append({*type, key, key});
  return success();
}

int64_t AttentionBlockGradOp::getFlopCount() {
  return attentionFlops(getQuery().getType(), getKey().getType(), getNumHeads(),
                        10, 9);
}

/// Checks the operands of a merge: two outputs of one type B x T x C and
/// two log-sum-exps of one type B x T x H, H dividing C.
static LogicalResult checkMerge(std::optional<Location> loc, StringRef opName,
                                Value a, Value lseA, Value b, Value lseB) {
  RankedTensorType ta = rankedType(a), tla = rankedType(lseA),
                   tb = rankedType(b), tlb = rankedType(lseB);
  if (!ta || !tla || ta != tb || tla != tlb || ta.getRank() != 3 ||
      tla.getRank() != 3 || tla.getElementType() != ta.getElementType() ||
      tla.getDimSize(0) != ta.getDimSize(0) ||
      tla.getDimSize(1) != ta.getDimSize(1) || tla.getDimSize(2) <= 0 ||
      ta.getDimSize(2) % tla.getDimSize(2) != 0)
    return shapeError(loc, opName,
                      "expects two outputs of one type B x T x C and two "
                      "log-sum-exps of one type B x T x H, H dividing C");
  return success();
}

LogicalResult
AttentionMergeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  if (failed(checkMerge(loc, "attention_merge", adaptor.getA(),
                        adaptor.getLseA(), adaptor.getB(), adaptor.getLseB())))
    return failure();
  inferred.append({adaptor.getA().getType(), adaptor.getLseA().getType()});
  return success();
}

int64_t AttentionMergeOp::getFlopCount() {
  // Two weights per head row, 3 per output element.
  return addSat(mulSat(3, numElements(getA().getType())),
                mulSat(8, numElements(getLseA().getType())));
}

LogicalResult AttentionMergeGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(checkMerge(loc, "attention_merge_grad", adaptor.getA(),
                        adaptor.getLseA(), adaptor.getB(), adaptor.getLseB())))
    return failure();
  if (adaptor.getGrad().getType() != adaptor.getA().getType() ||
      adaptor.getLseGrad().getType() != adaptor.getLseA().getType())
    return shapeError(loc, "attention_merge_grad",
                      "expects gradients of the output's and the "
                      "log-sum-exp's types");
  Type out = adaptor.getA().getType(), lse = adaptor.getLseA().getType();
  inferred.append({out, lse, out, lse});
  return success();
}

int64_t AttentionMergeGradOp::getFlopCount() {
  return addSat(mulSat(8, numElements(getA().getType())),
                mulSat(12, numElements(getLseA().getType())));
}

//===----------------------------------------------------------------------===//
// CrossEntropyGradOp
//===----------------------------------------------------------------------===//

LogicalResult
CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &inferred) {
  RankedTensorType logits = rankedType(adaptor.getLogits());
  RankedTensorType labels = rankedType(adaptor.getLabels());
  RankedTensorType grad = rankedType(adaptor.getGrad());
  if (!logits || !labels || !grad)
    return shapeError(loc, "cross_entropy_grad",
                      "expects ranked tensor operands");
  if (logits.getRank() < 1 ||
      labels.getShape() != logits.getShape().drop_back())
    return shapeError(loc, "cross_entropy_grad",
                      "expects labels shaped like the logits without their "
                      "last (vocabulary) dimension");
  if (grad.getRank() != 0 || grad.getElementType() != logits.getElementType())
    return shapeError(loc, "cross_entropy_grad",
                      "expects a scalar gradient of the logits' element type");
  inferred.push_back(logits);
  return success();
}

int64_t CrossEntropyGradOp::getFlopCount() {
  return mulSat(5, numElements(getType()));
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

/// Sums of squares (gptc.global_norm, gptc.sum_squares): at least one
/// input, two FLOPs an element.
static LogicalResult verifySquares(Operation *op) {
  if (op->getNumOperands() == 0)
    return op->emitOpError("expects at least one input");
  return success();
}

static int64_t squaresFlops(Operation *op) {
  int64_t n = 0;
  for (Type type : op->getOperandTypes())
    n = addSat(n, numElements(type));
  return mulSat(2, n);
}

LogicalResult GlobalNormOp::verify() { return verifySquares(*this); }

//===----------------------------------------------------------------------===//
// Vocabulary parallelism
//===----------------------------------------------------------------------===//

int64_t ShardOffsetOp::getFlopCount() { return 0; }

//===----------------------------------------------------------------------===//
// Gradient buckets
//===----------------------------------------------------------------------===//

LogicalResult BucketAllReduceOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  for (Value v : operands)
    inferred.push_back(v.getType());
  return success();
}

LogicalResult BucketAllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor to reduce");
  Type element =
      cast<RankedTensorType>(getInputs()[0].getType()).getElementType();
  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (cast<RankedTensorType>(v.getType()).getElementType() != element)
      return emitOpError("operand #")
             << i << " has element type "
             << cast<RankedTensorType>(v.getType()).getElementType()
             << " where the bucket's is " << element
             << " (one message has one element type)";
  llvm::SmallBitVector seen;
  for (int16_t axis : getGridAxes()) {
    if (axis < 0)
      return emitOpError("grid axis ") << axis << " is negative";
    if (seen.size() <= static_cast<unsigned>(axis))
      seen.resize(axis + 1);
    if (seen.test(axis))
      return emitOpError("grid axis ") << axis << " is repeated";
    seen.set(axis);
  }
  return success();
}

LogicalResult
BucketAllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  shard::GridOp grid =
      shard::getGridOrNull(getOperation(), getGridAttr(), symbols);
  if (!grid)
    return emitOpError("refers to '")
           << getGrid() << "', which is not a shard.grid";
  int64_t rank = grid.getRank();
  for (int16_t axis : getGridAxes())
    if (axis >= rank)
      return emitOpError("grid axis ") << axis << " is out of range for @"
                                       << getGrid() << " of rank " << rank;
  return success();
}

int64_t BucketAllReduceOp::getFlopCount() { return 0; }

/// The bucket's operands and results pair up, share one element type and
/// differ only in dimension 0 (the blocks of a dimension-0 collective).
static LogicalResult verifyBlocksBucket(Operation *op, ValueRange inputs,
                                        ValueRange results,
                                        ArrayRef<int16_t> gridAxes) {
  if (inputs.empty())
    return op->emitOpError("needs at least one tensor");
  if (inputs.size() != results.size())
    return op->emitOpError("has ") << inputs.size() << " operands but "
                                   << results.size() << " results (one each)";
  Type element = getElementTypeOrSelf(inputs[0].getType());
  for (auto [i, pair] : llvm::enumerate(llvm::zip(inputs, results))) {
    auto in = cast<RankedTensorType>(std::get<0>(pair).getType());
    auto out = cast<RankedTensorType>(std::get<1>(pair).getType());
    if (in.getElementType() != element || out.getElementType() != element)
      return op->emitOpError("tensor #")
             << i << " is not of the bucket's element type " << element
             << " (one message has one element type)";
    if (in.getRank() < 1 || in.getRank() != out.getRank() ||
        in.getShape().drop_front() != out.getShape().drop_front())
      return op->emitOpError("tensor #") << i << ": " << in << " and " << out
                                         << " must differ in dimension 0 only";
  }
  llvm::SmallBitVector seen;
  for (int16_t axis : gridAxes) {
    if (axis < 0)
      return op->emitOpError("grid axis ") << axis << " is negative";
    if (seen.size() <= static_cast<unsigned>(axis))
      seen.resize(axis + 1);
    if (seen.test(axis))
      return op->emitOpError("grid axis ") << axis << " is repeated";
    seen.set(axis);
  }
  return success();
}

/// The group's size: each result's dimension 0 is its operand's times it
/// (`gather`) or divided by it.
static LogicalResult verifyBlocksBucketGrid(Operation *op,
                                            FlatSymbolRefAttr gridName,
                                            ArrayRef<int16_t> gridAxes,
                                            ValueRange inputs,
                                            ValueRange results, bool gather,
                                            SymbolTableCollection &symbols) {
  shard::GridOp grid = shard::getGridOrNull(op, gridName, symbols);
  if (!grid)
    return op->emitOpError("refers to '")
           << gridName.getValue() << "', which is not a shard.grid";
  int64_t ranks = 1;
  for (int16_t axis : gridAxes) {
    if (axis >= grid.getRank())
      return op->emitOpError("grid axis ")
             << axis << " is out of range for " << gridName << " of rank "
             << grid.getRank();
    int64_t size = grid.getShape()[axis];
    if (ShapedType::isDynamic(size))
      return success();
    ranks *= size;
  }
  for (auto [i, pair] : llvm::enumerate(llvm::zip(inputs, results))) {
    int64_t in =
        cast<RankedTensorType>(std::get<0>(pair).getType()).getDimSize(0);
    int64_t out =
        cast<RankedTensorType>(std::get<1>(pair).getType()).getDimSize(0);
    if (gather ? out != in * ranks : in != out * ranks)
      return op->emitOpError("tensor #")
             << i << ": dimension 0 of "
             << (gather ? "the result" : "the operand") << " must be " << ranks
             << " (the group's size) times the "
             << (gather ? "operand's" : "result's");
  }
  return success();
}

LogicalResult BucketAllGatherOp::verify() {
  return verifyBlocksBucket(*this, getInputs(), getResults(), getGridAxes());
}
LogicalResult
BucketAllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyBlocksBucketGrid(*this, getGridAttr(), getGridAxes(),
                                getInputs(), getResults(), /*gather=*/true,
                                symbols);
}
int64_t BucketAllGatherOp::getFlopCount() { return 0; }

LogicalResult BucketReduceScatterOp::verify() {
  return verifyBlocksBucket(*this, getInputs(), getResults(), getGridAxes());
}
LogicalResult
BucketReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyBlocksBucketGrid(*this, getGridAttr(), getGridAxes(),
                                getInputs(), getResults(), /*gather=*/false,
                                symbols);
}
int64_t BucketReduceScatterOp::getFlopCount() { return 0; }

/// The rows of `logits` (all dimensions but the last), for the row-wise
/// vocabulary-parallel ops.
static LogicalResult rowsOf(std::optional<Location> loc, StringRef op,
                            RankedTensorType logits, RankedTensorType &rows) {
  if (!logits || logits.getRank() < 1)
    return shapeError(loc, op, "expects logits of rank >= 1");
  rows = RankedTensorType::get(logits.getShape().drop_back(),
                               logits.getElementType());
  return success();
}

LogicalResult RowMaxOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows;
  if (failed(rowsOf(loc, "row_max", rankedType(adaptor.getInput()), rows)))
    return failure();
  inferred.push_back(rows);
  return success();
}

int64_t RowMaxOp::getFlopCount() { return numElements(getInput().getType()); }

/// Checks max and labels (and more row-shaped operands) against the rows
/// of the logits.
static LogicalResult checkRows(std::optional<Location> loc, StringRef op,
                               RankedTensorType logits,
                               ArrayRef<Value> rowOperands, Value labels,
                               RankedTensorType &rows) {
  if (failed(rowsOf(loc, op, logits, rows)))
    return failure();
  for (Value v : rowOperands)
    if (rankedType(v) != rows)
      return shapeError(loc, op,
                        "expects row operands shaped like the logits without "
                        "their last (vocabulary) dimension");
  RankedTensorType l = rankedType(labels);
  if (!l || l.getShape() != rows.getShape())
    return shapeError(loc, op, "expects labels shaped like the rows");
  return success();
}

LogicalResult VocabParallelPartialsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows;
  if (failed(checkRows(loc, "vocab_parallel_partials",
                       rankedType(adaptor.getLogits()), {adaptor.getMax()},
                       adaptor.getLabels(), rows)))
    return failure();
  inferred.append({rows, rows});
  return success();
}

int64_t VocabParallelPartialsOp::getFlopCount() {
  return mulSat(3, numElements(getLogits().getType()));
}

LogicalResult VocabParallelPartialsGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows;
  if (failed(checkRows(
          loc, "vocab_parallel_partials_grad", rankedType(adaptor.getLogits()),
          {adaptor.getMax(), adaptor.getDSumExp(), adaptor.getDTarget()},
          adaptor.getLabels(), rows)))
    return failure();
  inferred.push_back(rankedType(adaptor.getLogits()));
  return success();
}

int64_t VocabParallelPartialsGradOp::getFlopCount() {
  return mulSat(4, numElements(getLogits().getType()));
}

LogicalResult VocabParallelLossOp::verify() {
  for (Value v : {getSumExp(), getTarget()})
    if (v.getType() != getMax().getType())
      return emitOpError("expects max, sum_exp and target of one type");
  if (cast<RankedTensorType>(getLabels().getType()).getShape() !=
      getMax().getType().getShape())
    return emitOpError("expects labels shaped like the rows");
  if (getLoss().getType().getRank() != 0 ||
      getLoss().getType().getElementType() !=
          getMax().getType().getElementType())
    return emitOpError("expects a scalar loss of the rows' element type");
  return success();
}

int64_t VocabParallelLossOp::getFlopCount() {
  return mulSat(4, numElements(getMax().getType()));
}

int64_t VocabParallelLossGradOp::getFlopCount() {
  return mulSat(3, numElements(getSumExp().getType()));
}

OpFoldResult GradAllReduceOp::fold(FoldAdaptor) {
  // Only its gradient differs from the identity; once differentiated (the
  // canonicalizer runs after gptc-autodiff) it is the identity.
  return getInput();
}

int64_t GradAllReduceOp::getFlopCount() { return 0; }

LogicalResult AccumulateOp::verify() {
  Block &block = getBody().front();
  int64_t n = getMicrobatches();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("expects one block argument per input, got ")
           << block.getNumArguments() << " for " << getInputs().size();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() < 1 || type.getDimSize(0) % n != 0)
      return emitOpError("expects input ")
             << i << " to stack " << n << " microbatches on dimension 0, got "
             << type;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= n;
    if (block.getArgument(i).getType() != type.clone(shape))
      return emitOpError("expects block argument ")
             << i << " of type " << type.clone(shape) << ", got "
             << block.getArgument(i).getType();
  }
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("expects the region to yield the result types");
  return success();
}

int64_t AccumulateOp::getFlopCount() {
  // The body's ops count themselves (once); a step runs them
  // `microbatches` times, plus the sums.
  int64_t n = 0;
  for (Type type : getResultTypes())
    n = addSat(n, numElements(type));
  return mulSat(n, getMicrobatches() - 1);
}

SmallVector<Block *> mlir::gptc::getStepBlocks(Operation *root) {
  SmallVector<Block *> blocks;
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<KernelOp, FusedGemmOp>(op))
      return WalkResult::skip();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        blocks.push_back(&block);
    return WalkResult::advance();
  });
  return blocks;
}

/// The FLOPs of the ops a region holds.
static int64_t regionFlops(Region &region) {
  int64_t n = 0;
  region.walk(
      [&](CostModelOpInterface op) { n = addSat(n, op.getFlopCount()); });
  return n;
}

/// A region op isolated from above (gptc.kernel, gptc.fused_gemm): one
/// block argument per operand, of its type, and the results yielded.
static LogicalResult verifyRegionSignature(Operation *op, Block &block) {
  if (block.getArgumentTypes() != op->getOperandTypes())
    return op->emitOpError("expects one block argument of each input's type");
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().getTypes() != op->getResultTypes())
    return op->emitOpError("expects the region to yield the result types");
  return success();
}

LogicalResult KernelOp::verify() {
  if (failed(verifyRegionSignature(*this, getBody().front())))
    return failure();
  if (getName().empty())
    return emitOpError("expects a kernel name");
  return success();
}

int64_t KernelOp::getFlopCount() {
  // The FLOPs of the ops it fuses.
  return regionFlops(getBody());
}

//===----------------------------------------------------------------------===//
// FusedGemmOp
//===----------------------------------------------------------------------===//

namespace {
/// Reads a fused GEMM's region op by op: each `take<Op>` consumes the next
/// op if it is an `Op` (optionally one whose operand is `from`).
struct BodyCursor {
  Block::iterator it, end;
  explicit BodyCursor(Block &block) : it(block.begin()), end(block.end()) {}
  template <typename OpTy>
  OpTy take(Value from = Value()) {
    if (it == end)
      return OpTy();
    auto op = dyn_cast<OpTy>(&*it);
    if (!op || (from && op->getOperand(0) != from))
      return OpTy();
    ++it;
    return op;
  }
  /// `v` widened exactly to f32 when it is 16-bit (a gptc.cast), else `v`.
  Value widened(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType().isF32())
      return v;
    auto c = take<CastOp>(v);
    if (!c || !getElementTypeOrSelf(c.getType()).isF32())
      return Value();
    return c.getResult();
  }
  /// `v` (f32) narrowed back to `element` when that is not f32.
  Value narrowed(Value v, Type element) {
    if (!v || element.isF32())
      return v;
    auto c = take<CastOp>(v);
    if (!c || getElementTypeOrSelf(c.getType()) != element)
      return Value();
    return c.getResult();
  }
  bool done() { return it != end && isa<YieldOp>(&*it); }
};
} // namespace

LogicalResult FusedGemmOp::verify() {
  Block &block = getBody().front();
  if (failed(verifyRegionSignature(*this, block)))
    return failure();
  auto yield = cast<YieldOp>(block.getTerminator());
  GemmEpilogue kind = getEpilogue();
  auto form = [&](const Twine &what) {
    return emitOpError("with epilogue '")
           << stringifyGemmEpilogue(kind) << "' expects " << what;
  };
  BodyCursor cursor(block);
  auto args = block.getArguments();
  SmallVector<Value> yields;
  if (kind == GemmEpilogue::GeluAux) {
    auto linear = cursor.take<LinearOp>();
    if (!linear || (args.size() != 2 && args.size() != 3) ||
        ValueRange(linear->getOperands()) != ValueRange(args))
      return form("a gptc.linear of the block arguments first");
    Value pre = linear.getResult();
    Type element = getElementTypeOrSelf(pre.getType());
    Value wide = cursor.widened(pre);
    auto gelu = wide ? cursor.take<GeluOp>(wide) : GeluOp();
    if (gelu && gelu.getExact())
      return form("the tanh GELU (the GEMM epilogues compute no exact one)");
    Value act = gelu ? cursor.narrowed(gelu.getResult(), element) : Value();
    if (!act)
      return form("gelu of the product (between exact casts to f32 and "
                  "back for 16-bit types)");
    yields = {act, pre};
  } else if (kind == GemmEpilogue::DGelu || kind == GemmEpilogue::DGeluBGrad) {
    auto matmul = cursor.take<MatmulOp>();
    if (!matmul || args.size() != 3 ||
        ValueRange(matmul->getOperands()) != args.take_front(2) ||
        matmul.getType().getRank() != 2)
      return form("a 2-D gptc.matmul of the first two block arguments first");
    Value pre = args[2];
    auto preType = cast<RankedTensorType>(pre.getType());
    Value g = matmul.getResult();
    if (g.getType() != preType)
      if (auto view = cursor.take<ReshapeOp>(g))
        g = view.getResult();
    if (g.getType() != preType)
      return form("the product in the shape of the third operand");
    Type element = preType.getElementType();
    Value preWide = cursor.widened(pre);
    Value gWide = preWide ? cursor.widened(g) : Value();
    auto grad = gWide ? cursor.take<GeluGradOp>(preWide) : GeluGradOp();
    if (grad && grad.getGrad() != gWide)
      grad = GeluGradOp();
    if (grad && grad.getExact())
      return form("the tanh GELU's gradient (the GEMM epilogues compute no "
                  "exact one)");
    Value d = grad ? cursor.narrowed(grad.getResult(), element) : Value();
    if (!d)
      return form("gelu_grad of the third operand and the product (between "
                  "exact casts to f32 and back for 16-bit types)");
    yields = {d};
    if (kind == GemmEpilogue::DGeluBGrad) {
      Value rows = d;
      if (auto view = cursor.take<ReshapeOp>(d))
        rows = view.getResult();
      auto sum = cursor.take<ReduceSumOp>(rows);
      auto rowsType = cast<RankedTensorType>(rows.getType());
      if (!sum || rowsType.getRank() < 2 ||
          rowsType.getShape().back() != preType.getShape().back() ||
          sum.getType().getRank() != 1 ||
          sum.getDimensions() != ArrayRef(llvm::to_vector(llvm::seq<int64_t>(
                                     0, rowsType.getRank() - 1))))
        return form("the gradient summed over every dimension but the last");
      yields.push_back(sum.getResult());
    }
  } else {
    assert(kind == GemmEpilogue::BGrad && "a new epilogue needs its form");
    auto matmul = cursor.take<MatmulOp>();
    if (!matmul || args.size() != 2 ||
        ValueRange(matmul->getOperands()) != ValueRange(args) ||
        !matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
        matmul.getType().getRank() != 2)
      return form("a 2-D gptc.matmul transpose_lhs of the block arguments "
                  "first");
    auto sum = cursor.take<ReduceSumOp>(args[0]);
    if (!sum || sum.getDimensions() != ArrayRef<int64_t>{0})
      return form("the first operand summed over dimension 0");
    yields = {matmul.getResult(), sum.getResult()};
  }
  if (!cursor.done() || ValueRange(yield.getValues()) != ValueRange(yields))
    return form("the region to yield " + Twine(yields.size()) +
                " value(s) of that form and nothing else");
  return success();
}

int64_t FusedGemmOp::getFlopCount() {
  // The product's and the epilogue's.
  return regionFlops(getBody());
}

int64_t YieldOp::getFlopCount() { return 0; }

LogicalResult SumSquaresOp::verify() { return verifySquares(*this); }

int64_t SumSquaresOp::getFlopCount() { return squaresFlops(*this); }

int64_t SqrtOp::getFlopCount() { return 1; }

int64_t CountTokensOp::getFlopCount() {
  return numElements(getLabels().getType());
}

int64_t GlobalNormOp::getFlopCount() { return squaresFlops(*this); }

int64_t ClipScaleOp::getFlopCount() { return getLossScale() ? 4 : 2; }

int64_t DivOp::getFlopCount() { return 1; }

int64_t FoundInfOp::getFlopCount() { return numElements(getInput().getType()); }

LogicalResult LossScaleUpdateOp::verify() {
  if (!(getGrowth().convertToDouble() >= 1))
    return emitOpError("growth must be at least 1");
  double backoff = getBackoff().convertToDouble();
  if (!(backoff > 0 && backoff < 1))
    return emitOpError("backoff must be in (0, 1)");
  if (getIntervalAttr().getInt() < 1)
    return emitOpError("interval must be at least 1");
  return success();
}

int64_t LossScaleUpdateOp::getFlopCount() { return 2; }

LogicalResult LearningRateOp::verify() {
  if (getWarmupAttr().getInt() < 0 || getTotalAttr().getInt() < 0)
    return emitOpError("warmup and total must not be negative");
  return success();
}

int64_t LearningRateOp::getFlopCount() { return 8; }

LogicalResult AdamWOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError("betas must be in [0, 1)");
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be positive");
  if (!(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("weight decay must not be negative");
  return success();
}

int64_t AdamWOp::getFlopCount() {
  return mulSat(14, numElements(getParam().getType()));
}

//===----------------------------------------------------------------------===//
// MultiAdamWOp
//===----------------------------------------------------------------------===//

/// The gradients and moments of gptc.multi_adamw have the parameters' types
/// (checked by the verifier); the assembly prints them once.
static ParseResult parseSameAsParams(OpAsmParser &parser, ArrayRef<Type> params,
                                     SmallVectorImpl<Type> &grads,
                                     SmallVectorImpl<Type> &m,
                                     SmallVectorImpl<Type> &v) {
  grads.assign(params.begin(), params.end());
  m.assign(params.begin(), params.end());
  v.assign(params.begin(), params.end());
  return success();
}

static void printSameAsParams(OpAsmPrinter &, Operation *, TypeRange, TypeRange,
                              TypeRange, TypeRange) {}

LogicalResult MultiAdamWOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location>,
                                             MultiAdamWOp::Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  for (int k = 0; k < 3; ++k)
    for (Value p : adaptor.getParams())
      inferred.push_back(p.getType());
  return success();
}

LogicalResult MultiAdamWOp::verify() {
  size_t n = getParams().size();
  if (n == 0)
    return emitOpError("updates no parameter");
  if (getGrads().size() != n || getM().size() != n || getV().size() != n ||
      getDecays().size() != n)
    return emitOpError("needs one gradient, two moments and one decay per "
                       "parameter, got ")
           << n << " parameters, " << getGrads().size() << " gradients, "
           << getM().size() << " and " << getV().size() << " moments, "
           << getDecays().size() << " decays";
  for (size_t i = 0; i < n; ++i) {
    Type t = getParams()[i].getType();
    if (getGrads()[i].getType() != t || getM()[i].getType() != t ||
        getV()[i].getType() != t)
      return emitOpError("parameter #")
             << i << " has a gradient or moment of another type";
    if (!(getDecays()[i] >= 0))
      return emitOpError("weight decay must not be negative");
  }
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError("betas must be in [0, 1)");
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be positive");
  return success();
}

int64_t MultiAdamWOp::getFlopCount() {
  int64_t flops = 0;
  for (Value p : getParams())
    flops = addSat(flops, mulSat(14, numElements(p.getType())));
  return flops;
}

#define GET_OP_CLASSES
#include "gptc/Dialect/Gptc/IR/GptcOps.cpp.inc"

Value mlir::gptc::getCastSource(Operation *op) {
  if (auto cast = dyn_cast<CastOp>(op))
    return cast.getInput();
  auto kernel = dyn_cast<KernelOp>(op);
  if (!kernel || kernel->getNumOperands() != 1 || kernel->getNumResults() != 1)
    return nullptr;
  Block &body = kernel.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()) ||
      !isa<CastOp>(body.front()) ||
      body.front().getOperand(0) != body.getArgument(0))
    return nullptr;
  return kernel->getOperand(0);
}

int64_t mlir::gptc::getTensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return -1;
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}
