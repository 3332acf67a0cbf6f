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

/// The blocks of `root`'s regions whose ops run as the program's own
/// steps, outermost first: the function's and those of regions run per
/// microbatch (gptc.accumulate), never those of a gptc.kernel or a
/// gptc.fused_gemm, whose ops run inside one generated kernel or library
/// call.
SmallVector<Block *> getStepBlocks(Operation *root);

/// What `op` casts when it is a gptc.cast, or a gptc.kernel whose only op
/// casts its one operand (how gptc-form-kernels leaves a lone cast); null
/// otherwise.
Value getCastSource(Operation *op);

/// Bytes of a statically shaped tensor of integers or floats (elements
/// rounded up to whole bytes), or -1 for any other type.
int64_t getTensorBytes(Type type);
} // namespace gptc
} // namespace mlir

#endif // GPTC_DIALECT_GPTC_IR_GPTCOPS_H
