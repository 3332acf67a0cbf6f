//===- GptcOps.h - gptc dialect operations -------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCOPS_H
#define GPTC_DIALECT_GPTC_IR_GPTCOPS_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcInterfaces.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "gptc/Dialect/Gptc/IR/GptcOps.h.inc"

namespace mlir {
class DialectRegistry;
namespace gptc {
/// Attaches gptc's vector-Jacobian rule to upstream `shard.all_reduce`
/// (sum), which tensor parallelism puts in the forward graph.
void registerShardAutodiffModels(DialectRegistry &registry);
} // namespace gptc
} // namespace mlir

#endif // GPTC_DIALECT_GPTC_IR_GPTCOPS_H
