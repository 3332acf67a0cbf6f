//===- LossToLinalg.cpp - Embedding and the loss to linalg -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The ops at the two ends of the model, where integer ids meet floats:
// - embedding: a parallel generic over the result whose body reads the
//   table row of its id (tensor.extract); with an offset, ids outside the
//   block give 0; ids that count positions (gptc.iota) read the table's
//   first rows as a broadcast;
// - embedding_grad: the scatter-add as a reduction over the positions
//   (result[v, c] = sum_i [ids[i] == v] grad[i, c]), a reference
//   formulation (V times the work of a scatter, which the runtime does);
// - cross_entropy and its gradient: per row the maximum and the sum of
//   shifted exponentials, the label's logit as a masked sum over the
//   vocabulary (no gather), ignored labels counting nowhere, the sum
//   divided by the count of kept labels or by the normalizer.
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

/// `id` (any integer type) as an i64.
static Value toI64(OpBuilder &b, Location loc, Value id) {
  Type i64 = b.getI64Type();
  if (id.getType() == i64)
    return id;
  if (id.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, i64, id);
  return arith::ExtSIOp::create(b, loc, i64, id);
}

/// The scalar of a rank-0 tensor.
static Value scalarOf(OpBuilder &b, Location loc, Value t) {
  return tensor::ExtractOp::create(b, loc, t, ValueRange{});
}

namespace {
struct EmbeddingToLinalg final : OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult broadcastPositions(EmbeddingOp op,
                                   PatternRewriter &rewriter) const;
  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    auto table = cast<RankedTensorType>(op.getTable().getType());
    int64_t rank = type.getRank();
    if (succeeded(broadcastPositions(op, rewriter)))
      return success();
    Value offset;
    if (op.getOffset())
      offset = toI64(rewriter, loc, scalarOf(rewriter, loc, op.getOffset()));
    Value out =
        emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
    auto generic = buildGeneric(
        rewriter, loc, {op.getIds()}, {dropDims(ctx, rank, {rank - 1})}, {out},
        {rewriter.getMultiDimIdentityMap(rank)}, rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value row = toI64(b, l, args[0]);
          Value zero = arith::ConstantOp::create(
              b, l, type.getElementType(),
              b.getFloatAttr(type.getElementType(), 0.0));
          Value inBlock = arith::ConstantOp::create(b, l, b.getBoolAttr(true));
          if (offset) {
            row = arith::SubIOp::create(b, l, row, offset);
            Value lo = arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::sge, row,
                arith::ConstantOp::create(b, l, b.getI64IntegerAttr(0)));
            Value hi = arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::slt, row,
                arith::ConstantOp::create(
                    b, l, b.getI64IntegerAttr(table.getDimSize(0))));
            inBlock = arith::AndIOp::create(b, l, lo, hi);
            // Read row 0 for ids outside the block; the select drops it.
            row = arith::SelectOp::create(
                b, l, inBlock, row,
                arith::ConstantOp::create(b, l, b.getI64IntegerAttr(0)));
          }
          Value r = arith::IndexCastOp::create(b, l, b.getIndexType(), row);
          Value c = linalg::IndexOp::create(b, l, rank - 1);
          Value v =
              tensor::ExtractOp::create(b, l, op.getTable(), ValueRange{r, c});
          linalg::YieldOp::create(
              b, l,
              arith::SelectOp::create(b, l, inBlock, v, zero).getResult());
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// Without an offset, ids that count along a dimension d (gptc.iota, the
/// positions) read table row i_d: the table's first rows broadcast over
/// the other dimensions, an affine read instead of a gather (so that a
/// consumer fused with it still has an operand that spans the columns).
LogicalResult
EmbeddingToLinalg::broadcastPositions(EmbeddingOp op,
                                      PatternRewriter &rewriter) const {
  auto iota = op.getIds().getDefiningOp<IotaOp>();
  auto type = cast<RankedTensorType>(op.getType());
  auto table = cast<RankedTensorType>(op.getTable().getType());
  if (!iota || op.getOffset() || !type.hasStaticShape() ||
      !table.hasStaticShape())
    return failure();
  int64_t rank = type.getRank();
  int64_t dim = static_cast<int64_t>(iota.getDimension());
  int64_t positions = type.getDimSize(dim);
  if (positions > table.getDimSize(0))
    return failure();
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Value rows = op.getTable();
  if (positions < table.getDimSize(0)) {
    SmallVector<OpFoldResult> offsets(2, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes{rewriter.getIndexAttr(positions),
                                    rewriter.getIndexAttr(table.getDimSize(1))};
    SmallVector<OpFoldResult> strides(2, rewriter.getIndexAttr(1));
    rows = tensor::ExtractSliceOp::create(rewriter, loc, rows, offsets, sizes,
                                          strides);
  }
  AffineMap read = AffineMap::get(
      rank, 0, {getAffineDimExpr(dim, ctx), getAffineDimExpr(rank - 1, ctx)},
      ctx);
  Value out =
      emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
  auto generic = buildGeneric(rewriter, loc, {rows}, {read}, {out},
                              {rewriter.getMultiDimIdentityMap(rank)}, rank, {},
                              [&](OpBuilder &b, Location l, ValueRange args) {
                                linalg::YieldOp::create(b, l, args[0]);
                              });
  rewriter.replaceOp(op, generic.getResults());
  return success();
}

/// Loops (v, c, i...): result[v, c] += [ids[i...] == v + offset] grad[i..., c].
struct EmbeddingGradToLinalg final : OpRewritePattern<EmbeddingGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    auto ids = cast<RankedTensorType>(op.getIds().getType());
    FloatType acc = accumulatorType(type.getElementType());
    int64_t positions = ids.getRank(), rank = 2 + positions;
    SmallVector<AffineExpr> idExprs, gradExprs;
    for (int64_t d = 0; d < positions; ++d) {
      idExprs.push_back(getAffineDimExpr(2 + d, ctx));
      gradExprs.push_back(getAffineDimExpr(2 + d, ctx));
    }
    gradExprs.push_back(getAffineDimExpr(1, ctx));
    AffineMap idMap = AffineMap::get(rank, 0, idExprs, ctx);
    AffineMap gradMap = AffineMap::get(rank, 0, gradExprs, ctx);
    AffineMap outMap = AffineMap::get(
        rank, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
    Value offset;
    if (op.getOffset())
      offset = toI64(rewriter, loc, scalarOf(rewriter, loc, op.getOffset()));
    SmallVector<int64_t> reduced;
    for (int64_t d = 2; d < rank; ++d)
      reduced.push_back(d);
    Value init = filledTensor(rewriter, loc, type.getShape(), acc, 0.0);
    Value sum =
        buildGeneric(
            rewriter, loc, {op.getIds(), op.getGrad()}, {idMap, gradMap},
            {init}, {outMap}, rank, reduced,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value v = toI64(b, l, linalg::IndexOp::create(b, l, 0));
              if (offset)
                v = arith::AddIOp::create(b, l, v, offset);
              Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                                toI64(b, l, args[0]), v);
              Value g = convertFloat(b, l, args[1], acc);
              Value zero = arith::ConstantOp::create(b, l, acc,
                                                     b.getFloatAttr(acc, 0.0));
              Value add = arith::SelectOp::create(b, l, hit, g, zero);
              linalg::YieldOp::create(
                  b, l, arith::AddFOp::create(b, l, args[2], add).getResult());
            })
            .getResult(0);
    sum = roundTensor(rewriter, loc, sum, type.getElementType());
    rewriter.replaceOp(op, sum);
    return success();
  }
};

/// The per-row statistics both cross-entropy ops need, over logits of
/// rank r (rows: the first r - 1 dimensions): the maximum, the sum of
/// exp(x - max) and the label's logit, each a tensor of the rows' shape.
struct RowStats {
  Value max, sumExp, target;
};

RowStats crossEntropyRows(OpBuilder &b, Location loc, Value logits,
                          Value labels, FloatType acc) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t rank = type.getRank();
  ArrayRef<int64_t> rows = type.getShape().drop_back();
  AffineMap elem = b.getMultiDimIdentityMap(rank);
  AffineMap row = dropDims(ctx, rank, {rank - 1});
  RowStats s;
  Value maxInit =
      filledTensor(b, loc, rows, acc, -std::numeric_limits<double>::infinity());
  s.max = buildGeneric(
              b, loc, {logits}, {elem}, {maxInit}, {row}, rank, {rank - 1},
              [&](OpBuilder &nb, Location l, ValueRange args) {
                Value x = convertFloat(nb, l, args[0], acc);
                linalg::YieldOp::create(
                    nb, l,
                    arith::MaximumFOp::create(nb, l, x, args[1]).getResult());
              })
              .getResult(0);
  // The sum of shifted exponentials and the label's logit in one pass.
  Value sumInit = filledTensor(b, loc, rows, acc, 0.0);
  Value targetInit = filledTensor(b, loc, rows, acc, 0.0);
  auto pass = buildGeneric(
      b, loc, {logits, labels, s.max}, {elem, row, row}, {sumInit, targetInit},
      {row, row}, rank, {rank - 1},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = convertFloat(nb, l, args[0], acc);
        Value e = math::ExpOp::create(nb, l,
                                      arith::SubFOp::create(nb, l, x, args[2]));
        Value v = toI64(nb, l, linalg::IndexOp::create(nb, l, rank - 1));
        Value hit = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq,
                                          toI64(nb, l, args[1]), v);
        Value zero =
            arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, 0.0));
        Value t = arith::SelectOp::create(nb, l, hit, x, zero);
        linalg::YieldOp::create(
            nb, l,
            ValueRange{arith::AddFOp::create(nb, l, args[3], e),
                       arith::AddFOp::create(nb, l, args[4], t)});
      });
  s.sumExp = pass.getResult(0);
  s.target = pass.getResult(1);
  return s;
}

/// Whether `label` (an integer) is kept: not the ignored label.
Value isKept(OpBuilder &b, Location l, Value label,
             std::optional<int64_t> ignore) {
  if (!ignore)
    return arith::ConstantOp::create(b, l, b.getBoolAttr(true));
  return arith::CmpIOp::create(
      b, l, arith::CmpIPredicate::ne, toI64(b, l, label),
      arith::ConstantOp::create(b, l, b.getI64IntegerAttr(*ignore)));
}

/// The divisor of the summed loss: the normalizer when given, else the
/// number of kept labels (a rank-0 tensor of `acc`).
Value divisor(OpBuilder &b, Location loc, Value labels, Value normalizer,
              std::optional<int64_t> ignore, FloatType acc) {
  if (normalizer) {
    Value n = convertFloat(b, loc, scalarOf(b, loc, normalizer), acc);
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, acc), ValueRange{n});
  }
  return reduceAll(
      b, loc, {labels}, acc, 0.0,
      [&](OpBuilder &nb, Location l, ValueRange in, Value count) -> Value {
        Value one =
            arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, 1.0));
        Value zero =
            arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, 0.0));
        Value add = arith::SelectOp::create(nb, l, isKept(nb, l, in[0], ignore),
                                            one, zero);
        return arith::AddFOp::create(nb, l, count, add);
      });
}

/// The mean cross-entropy from the rows' statistics: the sum over kept
/// rows of log(sum_exp) + max - target, over the number of kept labels or
/// the normalizer; 0 when nothing is kept (as the runtime). Shared by
/// cross_entropy and vocab_parallel_loss.
Value meanLoss(OpBuilder &b, Location loc, Value labels, Value max,
               Value sumExp, Value target, Value normalizer,
               std::optional<int64_t> ignore, FloatType acc,
               Type resultElement) {
  MLIRContext *ctx = b.getContext();
  Value total = reduceAll(
      b, loc, {labels, max, sumExp, target}, acc, 0.0,
      [&](OpBuilder &nb, Location l, ValueRange in, Value sum) -> Value {
        Value loss = arith::SubFOp::create(
            nb, l,
            arith::AddFOp::create(
                nb, l,
                math::LogOp::create(nb, l, convertFloat(nb, l, in[2], acc)),
                convertFloat(nb, l, in[1], acc)),
            convertFloat(nb, l, in[3], acc));
        Value zero =
            arith::ConstantOp::create(nb, l, acc, nb.getFloatAttr(acc, 0.0));
        Value add = arith::SelectOp::create(nb, l, isKept(nb, l, in[0], ignore),
                                            loss, zero);
        return arith::AddFOp::create(nb, l, sum, add);
      });
  Value n = divisor(b, loc, labels, normalizer, ignore, acc);
  AffineMap scalar = AffineMap::get(0, 0, {}, ctx);
  return buildGeneric(b, loc, {total, n}, {scalar, scalar},
                      {emptyTensor(b, loc, {}, resultElement)}, {scalar}, 0, {},
                      [&](OpBuilder &nb, Location l, ValueRange args) {
                        Value zero = arith::ConstantOp::create(
                            nb, l, acc, nb.getFloatAttr(acc, 0.0));
                        Value positive = arith::CmpFOp::create(
                            nb, l, arith::CmpFPredicate::OGT, args[1], zero);
                        Value v = arith::SelectOp::create(
                            nb, l, positive,
                            arith::DivFOp::create(nb, l, args[0], args[1]),
                            zero);
                        linalg::YieldOp::create(
                            nb, l, convertFloat(nb, l, v, resultElement));
                      })
      .getResult(0);
}

struct CrossEntropyToLinalg final : OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(
        cast<RankedTensorType>(op.getLogits().getType()).getElementType());
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    RowStats s =
        crossEntropyRows(rewriter, loc, op.getLogits(), op.getLabels(), acc);
    rewriter.replaceOp(op, meanLoss(rewriter, loc, op.getLabels(), s.max,
                                    s.sumExp, s.target, op.getNormalizer(),
                                    ignore, acc, type.getElementType()));
    return success();
  }
};

/// d logits = grad (softmax(logits) - onehot(label)) / n on kept rows.
struct CrossEntropyGradToLinalg final : OpRewritePattern<CrossEntropyGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(type.getElementType());
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    RowStats s =
        crossEntropyRows(rewriter, loc, op.getLogits(), op.getLabels(), acc);
    Value n =
        divisor(rewriter, loc, op.getLabels(), op.getNormalizer(), ignore, acc);
    int64_t rank = type.getRank();
    AffineMap elem = rewriter.getMultiDimIdentityMap(rank);
    AffineMap row = dropDims(ctx, rank, {rank - 1});
    AffineMap none = AffineMap::get(rank, 0, {}, ctx);
    Value out =
        emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
    auto d = buildGeneric(
        rewriter, loc,
        {op.getLogits(), op.getLabels(), s.max, s.sumExp, op.getGrad(), n},
        {elem, row, row, row, none, none}, {out}, {elem}, rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = convertFloat(b, l, args[0], acc);
          Value p = arith::DivFOp::create(
              b, l,
              math::ExpOp::create(b, l,
                                  arith::SubFOp::create(b, l, x, args[2])),
              args[3]);
          Value v = toI64(b, l, linalg::IndexOp::create(b, l, rank - 1));
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            toI64(b, l, args[1]), v);
          Value one =
              arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, 1.0));
          Value zero =
              arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, 0.0));
          Value diff = arith::SubFOp::create(
              b, l, p, arith::SelectOp::create(b, l, hit, one, zero));
          Value scale = arith::DivFOp::create(
              b, l, convertFloat(b, l, args[4], acc), args[5]);
          Value g = arith::MulFOp::create(b, l, diff, scale);
          Value keep = arith::AndIOp::create(
              b, l, isKept(b, l, args[1], ignore),
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, args[5],
                                    zero));
          Value r = arith::SelectOp::create(b, l, keep, g, zero);
          linalg::YieldOp::create(b, l,
                                  convertFloat(b, l, r, type.getElementType()));
        });
    rewriter.replaceOp(op, d.getResults());
    return success();
  }
};

/// The maximum of each row (the last dimension).
struct RowMaxToLinalg final : OpRewritePattern<RowMaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RowMaxOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto input = cast<RankedTensorType>(op.getInput().getType());
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(input.getElementType());
    int64_t rank = input.getRank();
    Value init = filledTensor(rewriter, loc, type.getShape(), acc,
                              -std::numeric_limits<double>::infinity());
    Value max =
        buildGeneric(rewriter, loc, {op.getInput()},
                     {rewriter.getMultiDimIdentityMap(rank)}, {init},
                     {dropDims(op.getContext(), rank, {rank - 1})}, rank,
                     {rank - 1},
                     [&](OpBuilder &b, Location l, ValueRange args) {
                       linalg::YieldOp::create(
                           b, l,
                           arith::MaximumFOp::create(
                               b, l, convertFloat(b, l, args[0], acc), args[1])
                               .getResult());
                     })
            .getResult(0);
    rewriter.replaceOp(op,
                       roundTensor(rewriter, loc, max, type.getElementType()));
    return success();
  }
};

/// The global vocabulary id of column `j` of this rank's block, and
/// whether it is a real id (below `vocab_size`, when set).
std::pair<Value, Value> blockId(OpBuilder &b, Location l, int64_t column,
                                Value offset,
                                std::optional<int64_t> vocabSize) {
  Value id = arith::AddIOp::create(
      b, l, toI64(b, l, linalg::IndexOp::create(b, l, column)), offset);
  Value real = arith::ConstantOp::create(b, l, b.getBoolAttr(true));
  if (vocabSize)
    real = arith::CmpIOp::create(
        b, l, arith::CmpIPredicate::slt, id,
        arith::ConstantOp::create(b, l, b.getI64IntegerAttr(*vocabSize)));
  return {id, real};
}

/// sum_exp and target of this rank's vocabulary block, per row.
struct VocabPartialsToLinalg final : OpRewritePattern<VocabParallelPartialsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabParallelPartialsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto logits = cast<RankedTensorType>(op.getLogits().getType());
    FloatType acc = accumulatorType(logits.getElementType());
    int64_t rank = logits.getRank();
    AffineMap elem = rewriter.getMultiDimIdentityMap(rank);
    AffineMap row = dropDims(ctx, rank, {rank - 1});
    ArrayRef<int64_t> rows = logits.getShape().drop_back();
    Value offset =
        toI64(rewriter, loc, scalarOf(rewriter, loc, op.getOffset()));
    std::optional<int64_t> vocabSize = op.getVocabSize();
    auto pass = buildGeneric(
        rewriter, loc, {op.getLogits(), op.getMax(), op.getLabels()},
        {elem, row, row},
        {filledTensor(rewriter, loc, rows, acc, 0.0),
         filledTensor(rewriter, loc, rows, acc, 0.0)},
        {row, row}, rank, {rank - 1},
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [id, real] = blockId(b, l, rank - 1, offset, vocabSize);
          Value x = convertFloat(b, l, args[0], acc);
          Value zero =
              arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, 0.0));
          Value e = math::ExpOp::create(
              b, l,
              arith::SubFOp::create(b, l, x, convertFloat(b, l, args[1], acc)));
          e = arith::SelectOp::create(b, l, real, e, zero);
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            toI64(b, l, args[2]), id);
          Value t = arith::SelectOp::create(b, l, hit, x, zero);
          linalg::YieldOp::create(
              b, l,
              ValueRange{arith::AddFOp::create(b, l, args[3], e),
                         arith::AddFOp::create(b, l, args[4], t)});
        });
    rewriter.replaceOp(
        op, {roundTensor(rewriter, loc, pass.getResult(0),
                         op.getSumExp().getType().getElementType()),
             roundTensor(rewriter, loc, pass.getResult(1),
                         op.getTarget().getType().getElementType())});
    return success();
  }
};

/// exp(logits - max) d_sum_exp + [label is the column] d_target; 0 for
/// padding ids.
struct VocabPartialsGradToLinalg final
    : OpRewritePattern<VocabParallelPartialsGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabParallelPartialsGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(type.getElementType());
    int64_t rank = type.getRank();
    AffineMap elem = rewriter.getMultiDimIdentityMap(rank);
    AffineMap row = dropDims(ctx, rank, {rank - 1});
    Value offset =
        toI64(rewriter, loc, scalarOf(rewriter, loc, op.getOffset()));
    std::optional<int64_t> vocabSize = op.getVocabSize();
    Value out =
        emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
    auto d = buildGeneric(
        rewriter, loc,
        {op.getLogits(), op.getMax(), op.getLabels(), op.getDSumExp(),
         op.getDTarget()},
        {elem, row, row, row, row}, {out}, {elem}, rank, {},
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [id, real] = blockId(b, l, rank - 1, offset, vocabSize);
          Value zero =
              arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, 0.0));
          Value e = math::ExpOp::create(
              b, l,
              arith::SubFOp::create(b, l, convertFloat(b, l, args[0], acc),
                                    convertFloat(b, l, args[1], acc)));
          Value g =
              arith::MulFOp::create(b, l, e, convertFloat(b, l, args[3], acc));
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            toI64(b, l, args[2]), id);
          g = arith::AddFOp::create(
              b, l, g,
              arith::SelectOp::create(b, l, hit,
                                      convertFloat(b, l, args[4], acc), zero));
          g = arith::SelectOp::create(b, l, real, g, zero);
          linalg::YieldOp::create(b, l,
                                  convertFloat(b, l, g, type.getElementType()));
        });
    rewriter.replaceOp(op, d.getResults());
    return success();
  }
};

/// The loss from the all-reduced partials, as gptc.cross_entropy.
struct VocabLossToLinalg final : OpRewritePattern<VocabParallelLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabParallelLossOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    FloatType acc = accumulatorType(op.getMax().getType().getElementType());
    rewriter.replaceOp(op, meanLoss(rewriter, loc, op.getLabels(), op.getMax(),
                                    op.getSumExp(), op.getTarget(),
                                    op.getNormalizer(), op.getIgnoreIndex(),
                                    acc, type.getElementType()));
    return success();
  }
};

/// d_sum_exp = grad / (n sum_exp), d_target = -grad / n on kept rows.
struct VocabLossGradToLinalg final : OpRewritePattern<VocabParallelLossGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabParallelLossGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto rowsType = cast<RankedTensorType>(op.getSumExp().getType());
    FloatType acc = accumulatorType(rowsType.getElementType());
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    int64_t rank = rowsType.getRank();
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap none = AffineMap::get(rank, 0, {}, ctx);
    Value n =
        divisor(rewriter, loc, op.getLabels(), op.getNormalizer(), ignore, acc);
    auto dType = cast<RankedTensorType>(op.getDSumExp().getType());
    auto tType = cast<RankedTensorType>(op.getDTarget().getType());
    auto d = buildGeneric(
        rewriter, loc, {op.getSumExp(), op.getLabels(), op.getGrad(), n},
        {id, id, none, none},
        {emptyTensor(rewriter, loc, dType.getShape(), dType.getElementType()),
         emptyTensor(rewriter, loc, tType.getShape(), tType.getElementType())},
        {id, id}, rank, {}, [&](OpBuilder &b, Location l, ValueRange args) {
          Value zero =
              arith::ConstantOp::create(b, l, acc, b.getFloatAttr(acc, 0.0));
          Value grad = convertFloat(b, l, args[2], acc);
          Value keep = arith::AndIOp::create(
              b, l, isKept(b, l, args[1], ignore),
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, args[3],
                                    zero));
          Value dse = arith::DivFOp::create(
              b, l, grad,
              arith::MulFOp::create(b, l, args[3],
                                    convertFloat(b, l, args[0], acc)));
          Value dt = arith::NegFOp::create(
              b, l, arith::DivFOp::create(b, l, grad, args[3]));
          dse = arith::SelectOp::create(b, l, keep, dse, zero);
          dt = arith::SelectOp::create(b, l, keep, dt, zero);
          linalg::YieldOp::create(
              b, l,
              ValueRange{convertFloat(b, l, dse, dType.getElementType()),
                         convertFloat(b, l, dt, tType.getElementType())});
        });
    rewriter.replaceOp(op, d.getResults());
    return success();
  }
};

/// The identity in the forward pass (its gradient is an all-reduce).
struct GradAllReduceToIdentity final : OpRewritePattern<GradAllReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradAllReduceOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcLossToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<EmbeddingToLinalg, EmbeddingGradToLinalg, CrossEntropyToLinalg,
               CrossEntropyGradToLinalg, RowMaxToLinalg, VocabPartialsToLinalg,
               VocabPartialsGradToLinalg, VocabLossToLinalg,
               VocabLossGradToLinalg, GradAllReduceToIdentity>(
      patterns.getContext());
}
