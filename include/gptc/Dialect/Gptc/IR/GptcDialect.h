//===- GptcDialect.h - gptc dialect --------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H
#define GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Dialect.h"

#include "gptc/Dialect/Gptc/IR/GptcOpsDialect.h.inc"

#endif // GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H
