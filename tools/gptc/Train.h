//===- Train.h - gptc train and gptc sample --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_TRAIN_H
#define GPTC_TOOLS_GPTC_TRAIN_H

#include "gptc/Frontend/ModelSpec.h"

#include "gptc/Runtime/program.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir::gptc {

/// `gptc train MODEL.pbtxt`: compiles the training step and runs it.
/// The --mesh, --zero-stage and --grad-accum options (errors printed).
FailureOr<ParallelOverrides> getParallelOverrides();
/// `--mesh auto`, and whether any option it would choose was given.
bool isMeshAuto();
bool explicitParallelOptions();

/// `--device` and `--cuda-chip`: where the step runs.
/// The CUDA image's format for `device`: a cubin, or the virtual device's
/// host code.
inline const char *cudaImageFormat(bool virtualDevice) {
  return virtualDevice ? "host" : "bin";
}
struct DeviceChoice {
  /// The CUDA path: a GPU, or (`virtualDevice`, --device virtual-cuda) the
  /// virtual CUDA device (the GPU runtime on CPU stand-ins of CUDA,
  /// cuBLASLt and NCCL; its image the kernels as host code).
  bool cuda = false;
  bool virtualDevice = false;
  std::string chip;
  /// --cuda-row-registers: columns a lane of a row nest holds in registers.
  int64_t rowRegisters = 32;
};
FailureOr<DeviceChoice> getDeviceChoice();
/// `--bucket-mb` in bytes: the largest gradient bucket
/// (gptc-bucket-all-reduces); 0 turns buckets off.
FailureOr<int64_t> getBucketBytes();
/// --gemm-epilogues: whether GEMMs take the elementwise work next to them;
/// by default on the GPU (`cuda`) only.
bool gemmEpilogues(bool cuda);
/// `--zero-reduce=microbatch`: ZeRO 2/3 with accumulation reduce-scatter
/// every microbatch's gradients (default `step`: once per step).
bool zeroReduceEachMicrobatch();
/// --mesh auto: the chosen plan's `--zero-reduce`.
void setPlanReducesEachMicrobatch(bool each);

/// A pipeline mesh's compilation (docs/Pipeline.md): @forward cut into
/// chunks with their backwards, each stage's program as @stage<s>, and the
/// artifact with its PipelinePlan read from those programs. `codegen`:
/// fused kernels (gptc train's --codegen); `kernelLibrary`: their machine
/// code in the artifact (what runs; the reports need only the IR);
/// `device`: the kernels' target (with `cuda`, GPU kernels, GEMM
/// epilogues as --gemm-epilogues says, and the CUDA image for
/// `device.chip`).
LogicalResult compilePipeline(const ModelDescription &desc, ModuleOp module,
                              bool codegen, ::gptc::program::Program &program,
                              bool kernelLibrary = true,
                              const DeviceChoice &device = {});

int runTrain(const std::string &modelPath, const DialectRegistry &registry);

/// `gptc sample CHECKPOINT`: recompiles the checkpoint's model for sampling
/// and prints generated text.
int runSample(const std::string &checkpointPath,
              const DialectRegistry &registry);

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_TRAIN_H
