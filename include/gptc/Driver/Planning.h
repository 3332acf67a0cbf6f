//===- Planning.h - Hardware, --mesh auto and the plan's words --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The planner as the driver's callers use it: a hardware description read
// once (a preset or a file), a description planned for a device count
// (`--mesh auto`, the C API's mesh "auto": the plan's mesh, ZeRO stage,
// microbatches, schedule and recomputation as description overrides, its
// compiler choices in the CompileOptions; no global), and a plan in the
// words `gptc plan` prints.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DRIVER_PLANNING_H
#define GPTC_DRIVER_PLANNING_H

#include "gptc/Analysis/Planner.h"
#include "gptc/Frontend/HardwareDescription.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Frontend/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::gptc {
struct CompileOptions;

/// The hardware `name` names: a preset (hardwarePresets) or a description
/// file. A file's located errors go to `diagnostics`; anything else (no
/// such preset or file) is `error`.
FailureOr<HardwareSpec> loadHardware(StringRef name, MLIRContext &context,
                                     llvm::raw_ostream &diagnostics,
                                     std::string &error);

/// What to plan for: the hardware (a preset or a file) and the devices.
struct AutoMesh {
  std::string hardware;
  int64_t devices = 0;
};

/// What the planner reads of an unplanned description that names an ONNX
/// model: the description's batch and settings, with the architecture of
/// the graph's raised blocks (`given`, or imported here with `onnx`); the
/// graph fixes each microbatch (`microBatch`, its token input's rows), and
/// `pipelines` says whether its blocks were located (the stages are cut
/// between them). The description gets the graph's vocabulary, context and
/// architecture.
FailureOr<ModelConfig> onnxPlanningConfig(ModelDescription &desc,
                                          MLIRContext &context,
                                          const OnnxTrainingShape *given,
                                          const OnnxImportOptions &onnx,
                                          int64_t &microBatch, bool &pipelines);

/// Drops the plans with a pipeline axis where the model cannot be cut into
/// stages.
void keepPipelines(PlanSearch &search, bool pipelines);

/// The step the plans of MODEL.onnx share before planning: one graph-sized
/// microbatch per device, with `schedule`'s learning-rate settings.
DescriptionOverrides
onnxPlanningOverrides(int64_t devices, const DescriptionOverrides &schedule);

/// The description in `sourceMgr` planned for `mesh` (its best plan): the
/// plan's parallel settings replace the description's, `schedule`'s
/// learning-rate settings apply, and the plan's compiler choices go into
/// `options` (reduce-scatter each microbatch). A remark at the description
/// says which plan, and the description keeps the same words (its plan
/// note). A failure that has no location in the description (no plan
/// fits, a hardware file that is missing) is `error`; located ones are
/// diagnostics.
FailureOr<ModelDescription>
planDescription(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                const AutoMesh &mesh, const DescriptionOverrides &schedule,
                const OnnxTrainingShape *onnxShape,
                const OnnxImportOptions &onnx, CompileOptions &options,
                llvm::raw_ostream &diagnostics, std::string &error);

/// A plan in words: "--mesh pp=16,tp=8, ZeRO-1, 64 microbatches of 1,
/// interleaved v2".
std::string describePlan(const ParallelPlan &plan);
/// Why no plan is left when some were considered: their least memory.
std::string memoryRefusal(const PlanSearch &search, const HardwareSpec &hw);
/// Memory in binary units ("1.5 GiB"), bytes sent in decimal ones ("1.5
/// GB"), seconds ("12.3 ms"), a fraction as a percentage ("41.2%").
std::string formatMemory(double bytes);
std::string formatSent(double bytes);
std::string formatSeconds(double seconds);
std::string formatPercent(double fraction);

} // namespace mlir::gptc

#endif // GPTC_DRIVER_PLANNING_H
