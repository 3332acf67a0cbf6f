//===- CompileKernels.h - A module's kernels for NVIDIA GPUs ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA target's driver entry: the kernels of a compiled training step
// lowered for a GPU, as one binary (PTX text or a cubin) holding every GPU
// function, and for each gptc kernel the sequence of launches that
// computes it. This is what a GPU runtime loads (cuModuleLoadData) and
// replays (cuLaunchKernel) in place of the CPU's shared object.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CUDA_COMPILEKERNELS_H
#define GPTC_TARGET_CUDA_COMPILEKERNELS_H

#include "gptc/Runtime/program.pb.h"
#include "gptc/Target/CUDA/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::gptc {

/// One launch of a GPU function.
struct CudaLaunch {
  /// The GPU function's name in the binary.
  std::string function;
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  /// The buffers passed, as bare device pointers in this order: index i <
  /// the kernel's operand count + result count names the kernel's operands
  /// then its results, as the artifact lists them; a larger index names
  /// temporary i - (operands + results).
  std::vector<int64_t> args;
  /// For each of `args`, how many times the launch sweeps it: the loops
  /// of the GPU function that load or store it, one for accesses outside
  /// any loop (a row nest reads its row once per phase; every other
  /// launch, once). Empty: once each.
  std::vector<int64_t> passes;
};

/// How one gptc kernel runs on the GPU.
struct CudaKernelPlan {
  std::string name;
  int64_t numOperands = 0, numResults = 0;
  /// Bytes of each temporary a launch passes to a later one.
  std::vector<int64_t> temporaryBytes;
  /// Bytes of each operand, then of each result (empty when unknown).
  std::vector<int64_t> bufferBytes;
  std::vector<CudaLaunch> launches;
  /// The module's kernels that run this one's code (itself first): kernels
  /// with the same body share one (KernelSharing.h).
  std::vector<std::string> users;
};

/// What a module's GPU image is: PTX text (assembly), a cubin (binary), a
/// fatbin, or the virtual device's shared object for this CPU (host).
enum class CudaImageFormat { Assembly, Binary, Fatbin, Host };
/// "assembly", "bin", "fatbin" or "host".
StringRef stringifyCudaImageFormat(CudaImageFormat format);
/// The image a `GpuKernelLoweringPipelineOptions::format` asks for ("isa",
/// "bin", "fatbin" or "host"), if any.
std::optional<CudaImageFormat> cudaImageFormatOf(StringRef option);

/// Every kernel of a module, for one GPU architecture.
struct CudaKernels {
  CudaImageFormat format = CudaImageFormat::Assembly;
  /// The binary of all GPU functions; empty when the module has none.
  std::string image;
  std::vector<CudaKernelPlan> kernels;
};

/// The module's kernels (gptc.kernel ops) for the GPU: gptc-outline-kernels,
/// gptc-gpu-kernel-lowering-pipeline with `options`, then the launch
/// sequence read from each kernel's host function. The module itself is
/// not changed. `configure`, where given, sets up each pass manager of the
/// way (the tools' --mlir-timing and --mlir-print-ir-* flags).
FailureOr<CudaKernels> compileModuleKernelsForCuda(
    ModuleOp module, const GpuKernelLoweringPipelineOptions &options,
    function_ref<LogicalResult(PassManager &)> configure = {});

/// Reads the launch plans and the binary from a module the pipeline has
/// lowered (host functions of constants, allocations and gpu.launch_func;
/// one gpu.binary). Fails with a diagnostic at whatever it cannot express.
FailureOr<CudaKernels> readCudaLaunchPlans(ModuleOp lowered);

/// Prints the plans as `--emit=cuda` does: one line per kernel, one per
/// launch; then the traffic: the bytes the launches sweep (each argument
/// counted whole for each pass of each launch over it, an upper bound of
/// what they read and write), the same with each launch's repeated
/// passes served from cache (a row nest's rows are small enough to stay
/// in L1 or L2 between its phases; a vocabulary row is not), against the
/// kernels' operands and results once (the least a kernel can move), in
/// all and for the kernels with the most excess.
void printCudaLaunchPlans(const CudaKernels &kernels, raw_ostream &os);

/// The artifact for a GPU: exportProgram of `functions`, then the kernels
/// compiled with `options` into `program.cuda` (every COMPILED kernel's
/// symbol has its plan there). The module's kernels must have been formed
/// for the GPU (gptc-form-kernels{target=cuda}).
LogicalResult compileProgramForCuda(
    ModuleOp module, ArrayRef<StringRef> functions,
    ::gptc::program::Program &program,
    const GpuKernelLoweringPipelineOptions &options,
    function_ref<LogicalResult(PassManager &)> configure = {});

} // namespace mlir::gptc

#endif // GPTC_TARGET_CUDA_COMPILEKERNELS_H
