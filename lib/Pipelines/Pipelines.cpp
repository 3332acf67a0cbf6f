//===- Pipelines.cpp - gptc's named pass pipelines ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Pipelines/Pipelines.h"

#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Target/CPU/Passes.h"
#include "gptc/Target/CUDA/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::gptc;

void mlir::gptc::buildFrontendPipeline(OpPassManager &pm,
                                       const FrontendPipelineOptions &options) {
  if (options.verifyModel)
    pm.addPass(createGptcVerifyModelPass());
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
}

void mlir::gptc::buildDifferentiationPipeline(OpPassManager &pm) {
  pm.addPass(createGptcVerifyModelPass());
  pm.addPass(createGptcShardingPropagationPass());
  pm.addPass(createGptcTensorParallelPass());
  pm.addPass(createGptcContextParallelPass());
  pm.addPass(createGptcMixedPrecisionPass());
  pm.addPass(createGptcAutodiffPass());
}

void mlir::gptc::buildTrainPipeline(OpPassManager &pm,
                                    const TrainPipelineOptions &options) {
  buildDifferentiationPipeline(pm);
  pm.addPass(createGptcRecomputePass());
  pm.addPass(createGptcOptimizerPass());
  GptcDataParallelPassOptions dataOptions;
  dataOptions.reduceEachMicrobatch = options.zeroReduceEachMicrobatch;
  pm.addPass(createGptcDataParallelPass(dataOptions));
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
  func.addPass(createGptcHoistInvariantsPass());
  func.addPass(createGptcFuseOptimizerPass());
  if (options.gemmEpilogues)
    func.addPass(createGptcFuseGemmEpiloguesPass());
  if (options.kernels) {
    GptcFormKernelsPassOptions formOptions;
    formOptions.target = options.kernelTarget;
    func.addPass(createGptcFormKernelsPass(formOptions));
  }
  GptcBucketAllReducesPassOptions bucketOptions;
  bucketOptions.bucketBytes = options.bucketBytes;
  func.addPass(createGptcBucketAllReducesPass(bucketOptions));
  func.addPass(createGptcPlanBuffersPass());
}

void mlir::gptc::registerPipelines() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "gptc-train-pipeline",
      "Build @forward_backward and @train_step from an imported model",
      buildTrainPipeline);
  PassPipelineRegistration<>(
      "gptc-kernel-lowering-pipeline",
      "Lower a module of kernel functions to LLVM dialect with the CPU "
      "runtime's entry points",
      buildKernelLoweringPipeline);
  PassPipelineRegistration<GpuKernelLoweringPipelineOptions>(
      "gptc-gpu-kernel-lowering-pipeline",
      "Lower a module of kernel functions to GPU kernels for NVIDIA GPUs "
      "(PTX or a cubin) and the launch sequence of each",
      buildGpuKernelLoweringPipeline);
  PassPipelineRegistration<FrontendPipelineOptions>(
      "gptc-frontend-pipeline",
      "Check and clean up an imported gptc forward graph",
      buildFrontendPipeline);
}
