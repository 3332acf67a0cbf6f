//===- Driver.h - gptc's compiler driver ------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The compiler as one library call, as `iree-compile` and `mlir-opt` are one
// call into their drivers: a model description and its training module, one
// typed CompileOptions, and out comes the runtime's program (the artifact),
// for one program per device and for pipeline meshes alike. `gptc` (its
// --emit kinds and `gptc train`), the C API and the Python binding are
// callers; none of them writes a pass pipeline of its own.
//
//   description --(importModel / buildTrainingModule)--> module
//     --(compileTraining: the train pipeline, or the pipeline-parallel
//        split, autodiff per chunk and schedule)--> lowered module
//     --(code: CPU kernel library, GPU image, or the graph alone)-->
//   program::Program --(setTrainSettings, writeArtifact)--> artifact
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DRIVER_DRIVER_H
#define GPTC_DRIVER_DRIVER_H

#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Runtime/Device.h"
#include "gptc/Runtime/program.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/Twine.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
class PassManager;
} // namespace mlir

namespace mlir::gptc {
class ModelDescription;
struct TrainPipelineOptions;
struct GpuKernelLoweringPipelineOptions;

/// What runs the step (the runtime's type: gptc-runtime and the backends
/// use the same).
using DeviceKind = ::gptc::runtime::DeviceKind;

/// "cpu", "cuda", "virtual-cuda"; nullopt for anything else.
std::optional<DeviceKind> parseDeviceKind(StringRef name);
StringRef stringifyDeviceKind(DeviceKind kind);

/// The pipeline's settings a caller gives in place of the description's
/// (gptc's --pipeline-schedule, --virtual-stages, --pipeline-layers).
struct PipelineOverrides {
  std::optional<PipelineScheduleKind> schedule;
  std::optional<int64_t> virtualStages;
  std::optional<std::vector<int64_t>> layers;
  bool any() const { return schedule || virtualStages || layers; }
};

/// Every setting of a compilation that the description does not hold.
struct CompileOptions {
  DeviceKind device = DeviceKind::CPU;
  /// The GPU architecture of the image (DeviceKind::CUDA).
  std::string chip = "sm_90";
  /// Columns a lane of a GPU row nest holds in registers (0-128).
  int64_t rowRegisters = 32;
  /// Fused kernels from code generation; false: every op runs as the
  /// runtime's reference kernel (the CPU only).
  bool codegen = true;
  /// GELU, its gradient and bias gradients folded into the GEMMs; unset:
  /// on for the GPU, off for the CPU.
  std::optional<bool> gemmEpilogues;
  /// Consecutive all-reduces combined up to this many bytes; 0: none.
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// ZeRO 2/3 with accumulation: reduce-scatter every microbatch.
  bool zeroReduceEachMicrobatch = false;
  PipelineOverrides pipeline;
  /// How an error in these options (not in the description) is reported;
  /// unset: as an error at an unknown location. gptc prints "gptc: error:".
  std::function<void(const Twine &)> optionError;
  /// Applied to every pass manager the driver runs (a tool's IR printing,
  /// timing and crash reproducer flags); unset: nothing.
  std::function<LogicalResult(PassManager &)> configurePassManager;

  bool cuda() const { return device != DeviceKind::CPU; }
  bool epilogues() const { return gemmEpilogues.value_or(cuda()); }
  /// Checks the ranges; `error` names the option as gptc's flag does.
  LogicalResult verify(std::string &error) const;
  /// gptc-train-pipeline's options for these settings.
  void fillTrainPipeline(TrainPipelineOptions &out) const;
  /// gptc-gpu-kernel-lowering's options for these settings.
  void fillGpuLowering(GpuKernelLoweringPipelineOptions &out) const;
};

/// What the program carries besides its graph.
enum class ProgramCode {
  /// Compiled code: the CPU's kernel library or the GPU's image (what
  /// runs; --emit=artifact).
  Compiled,
  /// The graph and its launch plans alone (what --emit=program and the
  /// reports read; faster).
  Exported,
  /// No program: the lowered module alone (a pipeline's program is still
  /// exported, since its plan is read off it).
  None,
};

/// A pipeline mesh's plan: the schedule, the chunks' layers and each
/// stage's program of forward, backward, send and receive steps.
struct PipelinePlanning {
  PipelineScheduleKind kind;
  int64_t virtualStages, microbatches;
  PipelinePartition partition;
  std::vector<std::vector<PipelineOp>> programs;
};

/// Plans the pipeline of `desc` (a mesh with a pipeline axis), its schedule
/// checked to finish.
FailureOr<PipelinePlanning> planPipeline(const ModelDescription &desc,
                                         const CompileOptions &options);

/// What a pipeline mesh does not train yet, refused at the mesh.
LogicalResult checkPipelineSupported(const ModelDescription &desc,
                                     const CompileOptions &options);

/// Runs `build`'s passes on `module`, the pass manager configured by
/// options.configurePassManager.
LogicalResult runPasses(ModuleOp module, const CompileOptions &options,
                        function_ref<void(OpPassManager &)> build);

/// One program per device: gptc-train-pipeline on the training module
/// (@forward to @forward and @train_step).
LogicalResult lowerTrainingStep(ModuleOp module, const CompileOptions &options);

/// The functions `names` of a lowered module into `program`, with the code
/// `code` asks for (for options.device).
LogicalResult emitProgram(ModuleOp module, ArrayRef<StringRef> names,
                          const CompileOptions &options, ProgramCode code,
                          ::gptc::program::Program &program);

/// A pipeline mesh: @forward cut into chunks, each chunk's backward, the
/// kernels and buffers as for one program, each stage's schedule; then the
/// program with its PipelinePlan (docs/Pipeline.md).
LogicalResult compilePipeline(const ModelDescription &desc, ModuleOp module,
                              const CompileOptions &options, ProgramCode code,
                              ::gptc::program::Program &program);

/// The training module of `desc` into the runtime's program: the pipeline
/// path for a mesh with a pipeline axis, one program (@forward and
/// @train_step) otherwise.
LogicalResult compileTraining(const ModelDescription &desc, ModuleOp module,
                              const CompileOptions &options, ProgramCode code,
                              ::gptc::program::Program &program);

/// The description's training settings the artifact carries for the
/// runtime (what the compiled step does not hold); `text` is the
/// description itself (checkpoints record it).
void setTrainSettings(const ModelDescription &desc, StringRef text,
                      ::gptc::program::Program &program);

/// The artifact's bytes to `os`.
LogicalResult writeArtifact(const ::gptc::program::Program &program,
                            Location loc, raw_ostream &os);

} // namespace mlir::gptc

#endif // GPTC_DRIVER_DRIVER_H
