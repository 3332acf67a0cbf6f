//===- KernelSharing.cpp - Kernels with the same body ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/KernelSharing.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// A hash of what makes two kernels' functions the same: the operand types
/// and, op by op, names, attributes and result types (locations aside).
/// Equal bodies hash equal; OperationEquivalence decides.
llvm::hash_code hashKernel(KernelOp kernel) {
  return llvm::hash_combine(
      llvm::hash_combine_range(kernel.getOperandTypes().begin(),
                               kernel.getOperandTypes().end()),
      hashOpsOf(kernel.getBody()));
}

bool sameKernel(KernelOp a, KernelOp b) {
  return a.getOperandTypes() == b.getOperandTypes() &&
         a.getResultTypes() == b.getResultTypes() &&
         OperationEquivalence::isRegionEquivalentTo(
             &a.getBody(), &b.getBody(), OperationEquivalence::IgnoreLocations);
}
} // namespace

llvm::hash_code mlir::gptc::hashOpsOf(Region &region) {
  llvm::hash_code h(0);
  region.walk([&](Operation *op) {
    h = llvm::hash_combine(h, OperationEquivalence::computeHash(
                                  op, OperationEquivalence::ignoreHashValue,
                                  OperationEquivalence::ignoreHashValue,
                                  OperationEquivalence::IgnoreLocations));
  });
  return h;
}

llvm::StringMap<std::string>
mlir::gptc::kernelFunctionNames(ModuleOp module,
                                ArrayRef<StringRef> functionNames) {
  llvm::StringMap<std::string> functions;
  // The first kernel of each body, by hash (equal hashes compared).
  llvm::DenseMap<llvm::hash_code, SmallVector<KernelOp, 1>> first;
  auto visit = [&](KernelOp kernel) {
    SmallVector<KernelOp, 1> &same = first[hashKernel(kernel)];
    auto it = llvm::find_if(
        same, [&](KernelOp other) { return sameKernel(other, kernel); });
    if (it != same.end()) {
      functions[kernel.getName()] = it->getName().str();
      return;
    }
    same.push_back(kernel);
    functions[kernel.getName()] = kernel.getName().str();
  };
  for (Operation &op : module.getBody()->getOperations()) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (!func)
      continue;
    if (!functionNames.empty() &&
        !llvm::is_contained(functionNames, func.getSymName()))
      continue;
    func.walk(visit);
  }
  return functions;
}
