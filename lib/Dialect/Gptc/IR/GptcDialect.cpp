//===- GptcDialect.cpp - gptc dialect registration ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

using namespace mlir;
using namespace mlir::gptc;

#include "gptc/Dialect/Gptc/IR/GptcOpsDialect.cpp.inc"

void GptcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "gptc/Dialect/Gptc/IR/GptcOps.cpp.inc"
      >();
}

Operation *GptcDialect::materializeConstant(OpBuilder &builder,
                                            Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
