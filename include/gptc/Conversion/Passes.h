//===- Passes.h - gptc conversion passes -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_CONVERSION_PASSES_H
#define GPTC_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace gptc {

#define GEN_PASS_DECL
#include "gptc/Conversion/Passes.h.inc"

/// Elementwise ops (add, gelu, gelu_grad, cast) to linalg.generic.
void populateGptcElementwiseToLinalgPatterns(RewritePatternSet &patterns);
/// constant, iota, reshape, transpose, split, concat, broadcast and
/// reduce_sum to arith, tensor and linalg.
void populateGptcDataMovementToLinalgPatterns(RewritePatternSet &patterns);
/// matmul and linear to linalg.matmul / linalg.batch_matmul.
void populateGptcContractionToLinalgPatterns(RewritePatternSet &patterns);
/// layer_norm, softmax and their gradients to row reductions
/// (linalg.generic).
void populateGptcNormalizationToLinalgPatterns(RewritePatternSet &patterns);
/// embedding, embedding_grad, cross_entropy and cross_entropy_grad.
void populateGptcLossToLinalgPatterns(RewritePatternSet &patterns);
/// The norm, schedule, clipping, loss scaling, token count and AdamW ops.
void populateGptcOptimizerToLinalgPatterns(RewritePatternSet &patterns);
/// causal_attention and its gradient (the reference lowering: the scores
/// as a B x H x T x T tensor).
void populateGptcAttentionToLinalgPatterns(RewritePatternSet &patterns);
/// gptc.accumulate to an scf.for over the microbatches.
void populateGptcAccumulateToSCFPatterns(RewritePatternSet &patterns);

/// Whether gptc-form-kernels may put `op` into a generated kernel: an op
/// with a lowering to linalg whose every result row depends only on the
/// same rows of its operands (the kernel ABI splits dimension 0 over the
/// threads). Today the elementwise family; the other lowered families stay
/// library calls on the CPU.
bool hasLinalgLowering(Operation *op);

#define GEN_PASS_REGISTRATION
#include "gptc/Conversion/Passes.h.inc"

} // namespace gptc
} // namespace mlir

#endif // GPTC_CONVERSION_PASSES_H
