//===- Pipeline.cpp - Kernel functions to NVVM and PTX ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA target's lowering pipeline. It starts from the same kernel
// functions as the CPU target (gptc-outline-kernels), so both targets run
// the same kernel groups; it differs after bufferization: the loops are
// parallel loops mapped onto blocks and threads, each becomes a
// gpu.launch, the launches' bodies are outlined into one gpu.module, and
// that module goes through NVVM and LLVM's NVPTX back end to PTX (and,
// with the toolkit's ptxas, to a cubin for sm_90).
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/Passes.h"

#include "gptc/Target/CPU/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::gptc;

std::string mlir::gptc::defaultCudaToolkit() {
  auto hasLibDevice = [](llvm::StringRef root) {
    llvm::SmallString<128> path(root);
    llvm::sys::path::append(path, "nvvm", "libdevice");
    return !root.empty() && llvm::sys::fs::is_directory(path);
  };
  if (const char *home = std::getenv("CUDA_HOME"))
    if (hasLibDevice(home))
      return home;
  if (hasLibDevice("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

void mlir::gptc::buildGpuKernelLoweringPipeline(
    OpPassManager &pm, const GpuKernelLoweringPipelineOptions &options) {
  buildGpuMappingStage(pm, options);
  buildGpuOutlineStage(pm, options);
}

void mlir::gptc::buildGpuMappingStage(
    OpPassManager &pm, const GpuKernelLoweringPipelineOptions &options) {
  // 1. Tensors: as on the CPU (gptc -> linalg, chains fused), then
  //    destination passing without a row range.
  buildKernelTensorStage(pm, /*rowRange=*/false);
  // 2. Buffers.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createOneShotBufferizePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // 3. Parallel loops on blocks and threads, then launches.
  OpPassManager &loops = pm.nest<func::FuncOp>();
  GptcGpuMapReductionsPassOptions reductions;
  reductions.warpsPerBlock = options.warpsPerBlock;
  reductions.rowRegisters = options.rowRegisters;
  loops.addPass(createGptcGpuMapReductionsPass(reductions));
  loops.addPass(createConvertLinalgToParallelLoopsPass());
  // A view a kernel reads (the position table's first rows) folds into
  // the loads' indices: launches take whole buffers.
  loops.addPass(memref::createFoldMemRefAliasOpsPass());
  GptcGpuMapKernelPassOptions mapping;
  mapping.blockSize = options.blockSize;
  mapping.elementsPerThread = options.elementsPerThread;
  loops.addPass(createGptcGpuMapKernelPass(mapping));
}

void mlir::gptc::buildGpuOutlineStage(
    OpPassManager &pm, const GpuKernelLoweringPipelineOptions &options) {
  pm.addPass(createConvertParallelLoopToGpuPass());
  // Constant grid and block sizes before outlining, so that every kernel
  // carries its known block size (LLVM then knows the thread ids' range).
  pm.addPass(createCanonicalizerPass());
  pm.nest<func::FuncOp>().addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createGptcGpuMergeModulesPass());
  // Each distinct body once: the layers' kernels launch the same code.
  pm.addPass(createGptcGpuShareFunctionsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // 4. The kernels to NVVM: 16-bit floats computed in f32 (loaded and
  //    stored as bf16/f16, each operation rounded as on the CPU), bare
  //    pointers for buffers.
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createGptcGpuLowerReductionsPass());
  device.addPass(createGptcGpuKernelArgAttrsPass());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  emulate.targetTypeStr = "f32";
  device.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  device.addPass(createLowerAffinePass());
  device.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  // 5. PTX (or a cubin through ptxas), with libdevice for math functions.
  if (options.format == "none")
    return;
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = options.toolkit.empty() ? defaultCudaToolkit()
                                               : std::string(options.toolkit);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
