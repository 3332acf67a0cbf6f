//===- VerifyModel.cpp - Check the model calling convention ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// States, in one place, the convention every later pass relies on:
//
//   func.func @forward(<params: float tensors, gptc.param = "name">...,
//                      %tokens {gptc.input = #gptc.input<tokens>},
//                      %labels {gptc.input = #gptc.input<labels>}) ->
//                      tensor<f32>
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCVERIFYMODELPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

/// Checks `func` against the convention; reports every violation.
static LogicalResult verifyForward(func::FuncOp func) {
  bool ok = true;
  llvm::StringMap<unsigned> paramNames;
  bool seenTokens = false, seenLabels = false;
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto param = func.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    auto input = func.getArgAttrOfType<InputAttr>(i, kInputAttrName);
    Location loc = arg.getLoc();
    if (param && input) {
      ok = false;
      emitError(loc) << "argument #" << i
                     << " is marked both as a parameter and as an input";
      continue;
    }
    if (param) {
      if (seenTokens || seenLabels) {
        ok = false;
        emitError(loc) << "parameter '" << param.getValue()
                       << "' follows the data inputs";
      }
      auto [it, inserted] = paramNames.try_emplace(param.getValue(), i);
      if (!inserted) {
        ok = false;
        emitError(loc) << "parameter name '" << param.getValue()
                       << "' is used by arguments #" << it->second << " and #"
                       << i;
      }
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !isa<FloatType>(type.getElementType())) {
        ok = false;
        emitError(loc) << "parameter '" << param.getValue()
                       << "' must be a floating-point tensor";
      }
      continue;
    }
    if (input && (input.getKind() == InputKind::Tokens ||
                  input.getKind() == InputKind::Labels)) {
      bool &seen =
          input.getKind() == InputKind::Tokens ? seenTokens : seenLabels;
      if (seen) {
        ok = false;
        emitError(loc) << "more than one '" << input.str() << "' input";
      }
      seen = true;
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !type.getElementType().isSignlessInteger()) {
        ok = false;
        emitError(loc) << "input '" << input.str()
                       << "' must be an integer tensor";
      }
      continue;
    }
    ok = false;
    emitError(loc) << "argument #" << i
                   << " is neither a parameter (gptc.param) nor a 'tokens' "
                      "or 'labels' input (gptc.input)";
  }
  if (!seenTokens || !seenLabels) {
    ok = false;
    func.emitOpError("expects a 'tokens' and a 'labels' input");
  }
  FunctionType type = func.getFunctionType();
  auto loss = type.getNumResults() == 1
                  ? dyn_cast<RankedTensorType>(type.getResult(0))
                  : RankedTensorType();
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType())) {
    ok = false;
    func.emitOpError("must return exactly one scalar floating-point loss");
  }
  return success(ok);
}

namespace {
struct GptcVerifyModelPass final
    : mlir::gptc::impl::GptcVerifyModelPassBase<GptcVerifyModelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("a gptc model module needs a 'func.func @forward'");
      return signalPassFailure();
    }
    if (failed(verifyForward(forward)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
