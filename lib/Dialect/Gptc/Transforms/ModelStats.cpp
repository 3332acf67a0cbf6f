//===- ModelStats.cpp - Report parameter and FLOP counts ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A thin pass over `computeModelStats`: remarks and, optionally, attributes.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCMODELSTATSPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
struct GptcModelStatsPass final
    : mlir::gptc::impl::GptcModelStatsPassBase<GptcModelStatsPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    ModelStats stats = computeModelStats(func);
    // Functions without parameters are not models; leave them alone.
    if (stats.numParamTensors == 0)
      return markAllAnalysesPreserved();

    if (remarks) {
      InFlightDiagnostic remark = func.emitRemark();
      remark << "gptc.model: " << stats.numParams << " parameters in "
             << stats.numParamTensors << " tensors; forward "
             << stats.forwardFlops << " FLOPs";
      if (stats.tokens)
        remark << " for " << stats.tokens << " tokens";
      if (stats.uncountedOps)
        remark << " (" << stats.uncountedOps << " ops without a FLOP count)";
    }
    if (annotate) {
      Builder b(func.getContext());
      func->setAttr(kNumParamsAttrName, b.getI64IntegerAttr(stats.numParams));
      func->setAttr(kForwardFlopsAttrName,
                    b.getI64IntegerAttr(stats.forwardFlops));
      func->setAttr(kTokensAttrName, b.getI64IntegerAttr(stats.tokens));
    } else {
      markAllAnalysesPreserved();
    }
  }
};
} // namespace
