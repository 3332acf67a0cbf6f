//===- GptcInterfaces.h - gptc op interfaces -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_H
#define GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_H

#include "mlir/IR/OpDefinition.h"

#include "gptc/Dialect/Gptc/IR/GptcInterfaces.h.inc"

#endif // GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_H
