//===- InitAll.cpp - Register gptc's dialects and passes ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/InitAll.h"

#include "gptc/Conversion/Passes.h"
#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Target/CPU/Passes.h"
#include "gptc/Target/CUDA/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"

void mlir::gptc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<GptcDialect, arith::ArithDialect, func::FuncDialect,
                  shard::ShardDialect, tensor::TensorDialect>();
  // What the CPU target lowers kernels through.
  registry.insert<linalg::LinalgDialect, math::MathDialect,
                  bufferization::BufferizationDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect>();
  // What the CUDA target lowers kernels through: the gpu and nvvm
  // dialects, each dialect's conversion to LLVM (convert-gpu-to-nvvm
  // collects them), and the NVPTX serialization of a gpu.module.
  registry.insert<affine::AffineDialect, gpu::GPUDialect, NVVM::NVVMDialect>();
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  registerShardAutodiffModels(registry);
}

void mlir::gptc::registerGptcDialects(DialectRegistry &registry) {
  registry.insert<GptcDialect>();
  registerShardAutodiffModels(registry);
}

void mlir::gptc::registerGptcPassesAndPipelines() {
  registerGptcPasses();
  registerGptcConversionPasses();
  registerGptcCPUPasses();
  registerGptcCUDAPasses();
  registerPipelines();
}

void mlir::gptc::registerAllPasses() {
  registerGptcPassesAndPipelines();
  // The upstream passes gptc's pipelines use; nothing else, so that
  // `gptc-opt --help` stays readable.
  registerCanonicalizerPass();
  registerCSEPass();
  registerInlinerPass();
  registerSymbolDCEPass();
  bufferization::registerOneShotBufferizePass();
  shard::registerShardingPropagation();
  shard::registerPartition();
}

void mlir::gptc::hideUnrelatedCommandLineOptions(
    llvm::cl::OptionCategory *keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    llvm::StringRef name = entry.first;
    bool gptcCategory = llvm::any_of(option->Categories, [](auto *category) {
      return category->getName().starts_with("gptc");
    });
    if (gptcCategory ||
        (keep && llvm::is_contained(option->Categories, keep)) ||
        name.starts_with("mlir-") || name.starts_with("help") ||
        name == "version" || name == "color")
      continue;
    option->setHiddenFlag(llvm::cl::ReallyHidden);
  }
}
