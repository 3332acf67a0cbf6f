//===- KernelSharing.h - Kernels with the same body -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every layer of a model gets its own gptc.kernel ops, most of them the
// same computation on the same shapes and types as the other layers'. The
// targets compile one function per distinct body and every kernel with
// that body runs it, so compile time does not grow with depth.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_KERNELSHARING_H
#define GPTC_ANALYSIS_KERNELSHARING_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::gptc {

/// For each gptc.kernel of `module`'s functions named in `functions` (all
/// when empty), by name, the kernel whose function it runs: the first in
/// module order with the same body (operand, result and value types, ops
/// and their attributes; locations aside), or itself. A target that
/// compiles those functions' kernels with gptc-outline-kernels{share}
/// compiles exactly the kernels this names.
llvm::StringMap<std::string>
kernelFunctionNames(ModuleOp module, ArrayRef<StringRef> functions = {});

/// A hash of `region`'s ops, op by op: names, attributes and result types,
/// locations and value identities aside. Regions that
/// OperationEquivalence::isRegionEquivalentTo calls equal (ignoring
/// locations) hash equal; the targets' sharing of equal bodies buckets by
/// it.
llvm::hash_code hashOpsOf(Region &region);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_KERNELSHARING_H
