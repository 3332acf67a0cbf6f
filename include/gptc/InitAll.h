//===- InitAll.h - Register gptc's dialects and passes --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_INITALL_H
#define GPTC_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::gptc {

/// Registers gptc's dialect and the upstream dialects gptc's IR uses
/// (func, arith, tensor, shard).
void registerAllDialects(DialectRegistry &registry);

/// Registers gptc's passes, its named pipelines and the curated upstream
/// passes it uses (canonicalize, cse, inline, symbol-dce,
/// sharding-propagation, shard-partition).
void registerAllPasses();

} // namespace mlir::gptc

#endif // GPTC_INITALL_H
