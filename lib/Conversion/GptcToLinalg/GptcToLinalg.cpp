//===- GptcToLinalg.cpp - The convert-gptc-to-linalg pass ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Applies every op family's patterns greedily; a partial lowering unless
// `full` is set, since the CPU target compiles kernels of the ops that
// have lowerings and runs the others through library calls.
//
//===----------------------------------------------------------------------===//

#include "gptc/Conversion/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_CONVERTGPTCTOLINALGPASS
#include "gptc/Conversion/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
struct ConvertGptcToLinalgPass final
    : mlir::gptc::impl::ConvertGptcToLinalgPassBase<ConvertGptcToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    RewritePatternSet patterns(&getContext());
    populateGptcElementwiseToLinalgPatterns(patterns);
    populateGptcDataMovementToLinalgPatterns(patterns);
    populateGptcContractionToLinalgPatterns(patterns);
    populateGptcNormalizationToLinalgPatterns(patterns);
    populateGptcLossToLinalgPatterns(patterns);
    populateGptcOptimizerToLinalgPatterns(patterns);
    populateGptcAttentionToLinalgPatterns(patterns);
    populateGptcAccumulateToSCFPatterns(patterns);
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();
    if (!full)
      return;
    WalkResult result = func.walk([&](Operation *op) {
      // A generated kernel's region is lowered with its kernel (the CPU
      // target outlines it first).
      if (isa<KernelOp, YieldOp>(op))
        return WalkResult::advance();
      if (op->getName().getDialectNamespace() !=
          GptcDialect::getDialectNamespace())
        return WalkResult::advance();
      op->emitOpError("has no lowering to linalg");
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
