//===- AccumulateToSCF.cpp - Gradient accumulation to a loop ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc.accumulate as an scf.for over the microbatches: each iteration
// slices its microbatch out of every stacked input (tensor.extract_slice at
// row i * rows), runs a copy of the region on the slices and adds what it
// yields to the loop-carried sums (zero-filled before the loop, summed in
// the results' type, microbatch by microbatch, as the runtime does).
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "Common.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::linalg_lowering;

namespace {
struct AccumulateToSCF final : OpRewritePattern<AccumulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AccumulateOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t micro = op.getMicrobatches();
    SmallVector<Value> inits;
    for (Type t : op.getResultTypes()) {
      auto type = cast<RankedTensorType>(t);
      inits.push_back(filledTensor(rewriter, loc, type.getShape(),
                                   cast<FloatType>(type.getElementType()),
                                   0.0));
    }
    Value lb = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, micro);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Block &body = op.getBody().front();
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, one, inits,
        [&](OpBuilder &b, Location l, Value i, ValueRange sums) {
          IRMapping map;
          for (auto [input, arg] :
               llvm::zip(op.getInputs(), body.getArguments())) {
            auto whole = cast<RankedTensorType>(input.getType());
            auto slice = cast<RankedTensorType>(arg.getType());
            int64_t rows = slice.getDimSize(0);
            Value first = arith::MulIOp::create(
                b, l, i, arith::ConstantIndexOp::create(b, l, rows));
            SmallVector<OpFoldResult> offsets(whole.getRank(),
                                              b.getIndexAttr(0));
            offsets[0] = first;
            SmallVector<OpFoldResult> sizes, strides;
            for (int64_t d : slice.getShape()) {
              sizes.push_back(b.getIndexAttr(d));
              strides.push_back(b.getIndexAttr(1));
            }
            map.map(arg, tensor::ExtractSliceOp::create(b, l, slice, input,
                                                        offsets, sizes, strides)
                             .getResult());
          }
          for (Operation &inner : body.without_terminator())
            b.clone(inner, map);
          SmallVector<Value> next;
          for (auto [sum, part] :
               llvm::zip(sums, body.getTerminator()->getOperands())) {
            // Added into the loop-carried sum itself (its destination), so
            // the loop bufferizes in place.
            auto type = cast<RankedTensorType>(sum.getType());
            AffineMap id = b.getMultiDimIdentityMap(type.getRank());
            next.push_back(
                buildGeneric(b, l, {map.lookup(part)}, {id}, {sum}, {id},
                             type.getRank(), {},
                             [&](OpBuilder &nb, Location nl, ValueRange a) {
                               linalg::YieldOp::create(
                                   nb, nl,
                                   arith::AddFOp::create(nb, nl, a[1], a[0])
                                       .getResult());
                             })
                    .getResult(0));
          }
          scf::YieldOp::create(b, l, next);
        });
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};
} // namespace

void mlir::gptc::populateGptcAccumulateToSCFPatterns(
    RewritePatternSet &patterns) {
  patterns.add<AccumulateToSCF>(patterns.getContext());
}
