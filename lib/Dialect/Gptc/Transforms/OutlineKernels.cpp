//===- OutlineKernels.cpp - gptc.kernel regions to functions ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Builds the module the CPU target compiles: one function per kernel, in
// a nested `builtin.module @gptc_kernels` so that the program's passes
// (anchored on the top-level functions) never see them.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/KernelSharing.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCOUTLINEKERNELSPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
struct GptcOutlineKernelsPass final
    : mlir::gptc::impl::GptcOutlineKernelsPassBase<GptcOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A module outlined before is outlined anew.
    if (Operation *old = SymbolTable::lookupSymbolIn(module, "gptc_kernels"))
      old->erase();
    SmallVector<KernelOp> kernels;
    module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto nested = ModuleOp::create(b, module.getLoc(), "gptc_kernels");
    b.setInsertionPointToEnd(nested.getBody());
    llvm::StringSet<> names;
    for (KernelOp kernel : kernels)
      if (!names.insert(kernel.getName()).second) {
        kernel.emitOpError("has the name of another kernel: ")
            << kernel.getName();
        return signalPassFailure();
      }
    llvm::StringMap<std::string> functions;
    if (share)
      functions = kernelFunctionNames(module);
    for (KernelOp kernel : kernels) {
      auto shared = functions.find(kernel.getName());
      if (shared != functions.end() && shared->second != kernel.getName())
        continue;
      // Same arguments, same body, gptc.yield becomes func.return.
      Block &body = kernel.getBody().front();
      auto type =
          b.getFunctionType(body.getArgumentTypes(), kernel.getResultTypes());
      auto func =
          func::FuncOp::create(b, kernel.getLoc(), kernel.getName(), type);
      IRMapping map;
      kernel.getBody().cloneInto(&func.getBody(), map);
      Block &entry = func.getBody().front();
      auto yield = cast<YieldOp>(entry.getTerminator());
      OpBuilder r(yield);
      func::ReturnOp::create(r, yield.getLoc(), yield.getValues());
      yield.erase();
    }
  }
};
} // namespace

FailureOr<OwningOpRef<ModuleOp>>
mlir::gptc::outlineKernelModule(ModuleOp module) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  PassManager outline(module.getContext());
  GptcOutlineKernelsPassOptions options;
  options.share = true;
  outline.addPass(createGptcOutlineKernelsPass(options));
  if (failed(outline.run(*copy)))
    return failure();
  auto nested = dyn_cast_or_null<ModuleOp>(
      SymbolTable::lookupSymbolIn(*copy, "gptc_kernels"));
  if (!nested)
    return emitError(module.getLoc()) << "outlining produced no kernel module";
  OwningOpRef<ModuleOp> kernels(cast<ModuleOp>(nested->clone()));
  kernels->setSymNameAttr(nullptr);
  return kernels;
}
