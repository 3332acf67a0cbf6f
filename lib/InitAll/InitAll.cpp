//===- InitAll.cpp - Register gptc's dialects and passes ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/InitAll.h"

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"

void mlir::gptc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<GptcDialect, arith::ArithDialect, func::FuncDialect,
                  shard::ShardDialect, tensor::TensorDialect>();
  registerShardAutodiffModels(registry);
}

void mlir::gptc::registerAllPasses() {
  // gptc's own passes and pipelines.
  registerGptcPasses();
  registerPipelines();
  // The upstream passes gptc's pipelines use; nothing else, so that
  // `gptc-opt --help` stays readable.
  registerCanonicalizerPass();
  registerCSEPass();
  registerInlinerPass();
  registerSymbolDCEPass();
  shard::registerShardingPropagation();
  shard::registerPartition();
}

void mlir::gptc::hideUnrelatedCommandLineOptions(llvm::cl::OptionCategory *keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    llvm::StringRef name = entry.first;
    bool gptcCategory = llvm::any_of(option->Categories, [](auto *category) {
      return category->getName().starts_with("gptc");
    });
    if (gptcCategory || (keep && llvm::is_contained(option->Categories, keep)) ||
        name.starts_with("mlir-") || name.starts_with("help") ||
        name == "version" || name == "color")
      continue;
    option->setHiddenFlag(llvm::cl::ReallyHidden);
  }
}
