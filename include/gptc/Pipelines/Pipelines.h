//===- Pipelines.h - gptc's named pass pipelines --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The driver builds its pass pipelines with these functions, and gptc-opt
// registers the same functions under names, so that
// `gptc-opt -p 'builtin.module(gptc-frontend-pipeline)'` reproduces exactly
// what `gptc --emit=mlir` runs after import.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_PIPELINES_PIPELINES_H
#define GPTC_PIPELINES_PIPELINES_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::gptc {

/// Options of the frontend pipeline.
struct FrontendPipelineOptions
    : public PassPipelineOptions<FrontendPipelineOptions> {
  PassOptions::Option<bool> verifyModel{
      *this, "verify-model",
      llvm::cl::desc("Check the model calling convention (gptc-verify-model)"),
      llvm::cl::init(true)};
};

/// Checks and cleans up an imported forward graph: gptc-verify-model,
/// canonicalize, cse.
void buildFrontendPipeline(OpPassManager &pm,
                           const FrontendPipelineOptions &options);

/// Options of the training pipeline.
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  PassOptions::Option<bool> kernels{
      *this, "kernels",
      llvm::cl::desc("Group the ops code generation lowers into gptc.kernel "
                     "regions (gptc-form-kernels); off, every op runs as "
                     "its reference kernel in the runtime"),
      llvm::cl::init(true)};
  PassOptions::Option<KernelTarget> kernelTarget{
      *this, "kernel-target",
      llvm::cl::desc("The code generation the kernels are formed for "
                     "(gptc-form-kernels{target=...})"),
      llvm::cl::init(KernelTarget::Cpu),
      llvm::cl::values(
          clEnumValN(KernelTarget::Cpu, "cpu", "elementwise chains"),
          clEnumValN(KernelTarget::Cuda, "cuda",
                     "every op the GPU target maps"))};
  PassOptions::Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest gradient bucket in bytes "
                     "(gptc-bucket-all-reduces); 0: no buckets"),
      llvm::cl::init(26214400)};
  PassOptions::Option<bool> zeroReduceEachMicrobatch{
      *this, "zero-reduce-each-microbatch",
      llvm::cl::desc("ZeRO 2/3 with accumulation: reduce-scatter every "
                     "microbatch's gradients (gptc-data-parallel"
                     "{reduce-each-microbatch})"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> gemmEpilogues{
      *this, "gemm-epilogues",
      llvm::cl::desc("Fold GELU, its gradient and bias gradients into the "
                     "GEMM calls next to them (gptc-fuse-gemm-epilogues; "
                     "gptc turns it on for the GPU)"),
      llvm::cl::init(false)};
};

/// The sharded, differentiated step of an imported model
/// (`@forward_backward`): gptc-verify-model, gptc-sharding-propagation,
/// gptc-tensor-parallel, gptc-mixed-precision, gptc-autodiff.
void buildDifferentiationPipeline(OpPassManager &pm);

/// Builds the training step from an imported model: gptc-verify-model,
/// gptc-sharding-propagation, gptc-tensor-parallel, gptc-mixed-precision,
/// gptc-autodiff, gptc-recompute, gptc-optimizer, gptc-data-parallel,
/// canonicalize, cse, gptc-fuse-optimizer, gptc-fuse-gemm-epilogues,
/// gptc-form-kernels, gptc-bucket-all-reduces, gptc-plan-buffers.
void buildTrainPipeline(OpPassManager &pm,
                        const TrainPipelineOptions &options = {});

/// Registers the named pipelines with the global pass registry.
void registerPipelines();

} // namespace mlir::gptc

#endif // GPTC_PIPELINES_PIPELINES_H
