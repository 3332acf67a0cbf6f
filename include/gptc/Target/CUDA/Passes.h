//===- Passes.h - gptc CUDA code generation --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA target: the passes and the pipeline that turn the kernel
// functions gptc-outline-kernels builds (the same ones the CPU target
// compiles) into GPU kernels for NVIDIA GPUs, through MLIR's gpu and nvvm
// dialects and LLVM's NVPTX back end, and the launch sequence of each.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CUDA_PASSES_H
#define GPTC_TARGET_CUDA_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
namespace gptc {

#define GEN_PASS_DECL
#include "gptc/Target/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gptc/Target/CUDA/Passes.h.inc"

/// The name of the one gpu.module the kernels end up in.
constexpr llvm::StringLiteral kGpuKernelModuleName = "gptc_kernels";

/// Options of `gptc-gpu-kernel-lowering-pipeline`.
struct GpuKernelLoweringPipelineOptions
    : public PassPipelineOptions<GpuKernelLoweringPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture (sm_90: H100, H200)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (sm_90 needs PTX ISA 8.0: +ptx80)"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<unsigned> optLevel{
      *this, "opt-level", llvm::cl::desc("NVPTX optimization level, 0-3"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What the kernels become: isa (PTX text), bin (a cubin, "
                     "through the toolkit's ptxas), fatbin, or none (stop "
                     "at the NVVM dialect)"),
      llvm::cl::init("isa")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit (ptxas, libdevice); empty: CUDA_HOME, "
                     "then /usr/local/cuda"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block of an elementwise launch"),
      llvm::cl::init(256)};
  PassOptions::Option<int64_t> elementsPerThread{
      *this, "elements-per-thread",
      llvm::cl::desc("Iterations per thread of a large elementwise launch"),
      llvm::cl::init(4)};
  PassOptions::Option<int64_t> warpsPerBlock{
      *this, "warps-per-block",
      llvm::cl::desc("Rows (warps of 32 threads) per block of a row "
                     "reduction"),
      llvm::cl::init(8)};
  PassOptions::Option<int64_t> rowRegisters{
      *this, "row-registers",
      llvm::cl::desc("Columns a lane of a fused row nest holds in "
                     "registers (gptc-gpu-map-reductions), at most 128; 0: "
                     "every phase loops over the row"),
      llvm::cl::init(32)};
};

/// The GPU kernel lowering pipeline, on a module of kernel functions (what
/// gptc-outline-kernels builds): gptc -> linalg, elementwise fusion, the
/// kernel ABI without a row range, bufferization, parallel loops mapped
/// onto blocks and threads, gpu.launch, outlining into one gpu.module,
/// NVVM, and the module serialized as `format` says. The host functions
/// that remain hold each kernel's launch sequence. Registered as
/// `gptc-gpu-kernel-lowering-pipeline`.
void buildGpuKernelLoweringPipeline(
    OpPassManager &pm, const GpuKernelLoweringPipelineOptions &options);

/// The pipeline in two parts: up to the kernels' loops mapped onto blocks
/// and threads (each top-level `gpu.launch` or mapped `scf.parallel` of a
/// host function one launch, in order, their loops as the mapping built
/// them), then the rest. compileModuleKernelsForCuda reads what each
/// launch does with its buffers in between.
void buildGpuMappingStage(OpPassManager &pm,
                          const GpuKernelLoweringPipelineOptions &options);
void buildGpuOutlineStage(OpPassManager &pm,
                          const GpuKernelLoweringPipelineOptions &options);

/// The CUDA toolkit the pipeline uses when `toolkit` is empty: CUDA_HOME,
/// else /usr/local/cuda; empty if neither holds nvvm/libdevice.
std::string defaultCudaToolkit();

} // namespace gptc
} // namespace mlir

#endif // GPTC_TARGET_CUDA_PASSES_H
