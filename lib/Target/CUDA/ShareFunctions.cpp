//===- ShareFunctions.cpp - One GPU function per distinct body -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-gpu-share-functions; see include/gptc/Target/CUDA/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/Passes.h"

#include "gptc/Analysis/KernelSharing.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCGPUSHAREFUNCTIONSPASS
#include "gptc/Target/CUDA/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;

namespace {
/// The function's attributes but its name: what, with the body, makes two
/// functions the same code.
DictionaryAttr attributesButName(gpu::GPUFuncOp func) {
  NamedAttrList attrs(func->getAttrDictionary());
  attrs.erase(SymbolTable::getSymbolAttrName());
  return attrs.getDictionary(func.getContext());
}

/// A hash of the attributes and, op by op, of the body (locations and
/// value identities aside). Equal functions hash equal; sameFunction
/// decides.
llvm::hash_code hashFunction(gpu::GPUFuncOp func) {
  return llvm::hash_combine(attributesButName(func),
                            gptc::hashOpsOf(func.getBody()));
}

bool sameFunction(gpu::GPUFuncOp a, gpu::GPUFuncOp b) {
  return attributesButName(a) == attributesButName(b) &&
         OperationEquivalence::isRegionEquivalentTo(
             &a.getBody(), &b.getBody(), OperationEquivalence::IgnoreLocations);
}

struct GptcGpuShareFunctionsPass final
    : mlir::gptc::impl::GptcGpuShareFunctionsPassBase<
          GptcGpuShareFunctionsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Functions something other than a launch names: kept as they are.
    llvm::DenseSet<std::pair<StringAttr, StringAttr>> pinned;
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&module.getBodyRegion())) {
      for (const SymbolTable::SymbolUse &use : *uses) {
        SymbolRefAttr ref = use.getSymbolRef();
        if (isa<gpu::LaunchFuncOp>(use.getUser()) ||
            ref.getNestedReferences().size() != 1)
          continue;
        pinned.insert({ref.getRootReference(), ref.getLeafReference()});
      }
    }
    // (module, erased function) -> the function kept for it.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> keptFor;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
      StringAttr moduleName = gpuModule.getNameAttr();
      llvm::DenseMap<llvm::hash_code, SmallVector<gpu::GPUFuncOp, 1>> first;
      for (auto func : llvm::make_early_inc_range(
               gpuModule.getBody()->getOps<gpu::GPUFuncOp>())) {
        if (pinned.contains({moduleName, func.getNameAttr()}))
          continue;
        SmallVector<gpu::GPUFuncOp, 1> &same = first[hashFunction(func)];
        auto it = llvm::find_if(same, [&](gpu::GPUFuncOp kept) {
          return sameFunction(kept, func);
        });
        if (it == same.end()) {
          same.push_back(func);
          continue;
        }
        keptFor[{moduleName, func.getNameAttr()}] = it->getNameAttr();
        func.erase();
      }
    }
    if (keptFor.empty())
      return;
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          keptFor.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == keptFor.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          launch.getKernelModuleName(), {FlatSymbolRefAttr::get(it->second)}));
    });
  }
};
} // namespace
