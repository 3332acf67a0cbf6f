//===- ModelStats.cpp - Parameter and FLOP counts from the IR -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/ModelStats.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/BuiltinTypes.h"

#include <limits>

using namespace mlir;
using namespace mlir::gptc;

static int64_t addSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max()
                                          : r;
}

static int64_t elementCount(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  int64_t n = 1;
  for (int64_t d : shaped.getShape())
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

ModelStats mlir::gptc::computeModelStats(FunctionOpInterface func) {
  ModelStats stats;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    Type type = func.getArgumentTypes()[i];
    if (func.getArgAttr(i, kParamAttrName)) {
      ++stats.numParamTensors;
      stats.numParams = addSat(stats.numParams, elementCount(type));
    }
    auto input = func.getArgAttrOfType<InputAttr>(i, kInputAttrName);
    if (input && input.getKind() == InputKind::Tokens)
      stats.tokens = elementCount(type);
  }
  func.walk([&](Operation *op) {
    if (auto costed = dyn_cast<CostModelOpInterface>(op))
      stats.forwardFlops = addSat(stats.forwardFlops, costed.getFlopCount());
    else if (op->getDialect() && isa<GptcDialect>(op->getDialect()))
      ++stats.uncountedOps;
  });
  return stats;
}
