//===- GptcPlugin.cpp - gptc as an mlir-opt plugin -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One shared object that is both a dialect plugin and a pass plugin, as
// MLIR's standalone example builds them:
//
//   mlir-opt --load-dialect-plugin=GptcPlugin.so \
//            --load-pass-plugin=GptcPlugin.so \
//            --pass-pipeline='builtin.module(gptc-frontend-pipeline)' m.mlir
//
// It registers the gptc dialect (and its external models of upstream ops)
// and gptc's own passes and pipelines; the upstream dialects and passes are
// mlir-opt's. Both link the same libMLIR.so, so types and TypeIDs agree.
//
//===----------------------------------------------------------------------===//

#include "gptc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

using namespace mlir;

extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Gptc", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            mlir::gptc::registerGptcDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "GptcPasses", LLVM_VERSION_STRING,
          []() { mlir::gptc::registerGptcPassesAndPipelines(); }};
}
