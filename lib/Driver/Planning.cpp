//===- Planning.cpp - Hardware, --mesh auto and the plan's words -*- C++
//-*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Driver/Planning.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/InputFile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::gptc;

/// `value` in the largest of `units` (base^1, base^2, base^3) that shows a
/// figure of at least 0.1, so a small model's plan is not "0.0 GiB".
static std::string scaled(double value, double base,
                          const std::array<const char *, 3> &units) {
  int i = 2;
  while (i > 0 && value < 0.1 * std::pow(base, i + 1))
    --i;
  std::string s;
  llvm::raw_string_ostream(s)
      << llvm::format("%.1f %s", value / std::pow(base, i + 1), units[i]);
  return s;
}

std::string mlir::gptc::formatMemory(double bytes) {
  return scaled(bytes, 1024, {"KiB", "MiB", "GiB"});
}

std::string mlir::gptc::formatSent(double bytes) {
  return scaled(bytes, 1000, {"kB", "MB", "GB"});
}

std::string mlir::gptc::formatSeconds(double s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (s < 1e-12)
    os << "0";
  else if (s >= 1)
    os << llvm::format("%.2f s", s);
  else if (s >= 1e-3)
    os << llvm::format("%.1f ms", s * 1e3);
  else
    os << llvm::format("%.1f us", s * 1e6);
  return out;
}

std::string mlir::gptc::formatPercent(double fraction) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f%%", fraction * 100);
  return s;
}

std::string mlir::gptc::describePlan(const ParallelPlan &plan) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "--mesh " << plan.meshString() << ", ZeRO-" << plan.zeroStage
     << (plan.sequenceParallel ? ", sequence parallel" : "") << ", "
     << plan.microbatches << " microbatch"
     << (plan.microbatches > 1 ? "es" : "") << " of " << plan.microBatch
     << (plan.reducesEachMicrobatch() ? " (reduce-scattered each)" : "");
  if (plan.pp > 1)
    os << ", " << pipelineScheduleName(plan.schedule)
       << (plan.virtualStages > 1 ? " v" + std::to_string(plan.virtualStages)
                                  : std::string());
  else if (plan.recompute != Recompute::None)
    os << ", recompute " << stringifyRecompute(plan.recompute).str();
  return s;
}

std::string mlir::gptc::memoryRefusal(const PlanSearch &search,
                                      const HardwareSpec &hw) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "no plan fits the devices' memory ("
     << formatMemory(double(hw.memoryBytes) * hw.usableMemory)
     << " usable): the least any of the " << search.considered
     << " plans needs is " << formatMemory(double(search.smallestMemory))
     << " per device (" << describePlan(*search.smallest)
     << "): add devices or use larger ones";
  return s;
}

FailureOr<HardwareSpec> mlir::gptc::loadHardware(StringRef name,
                                                 MLIRContext &context,
                                                 llvm::raw_ostream &diagnostics,
                                                 std::string &error) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnostics);
  for (const auto &[preset, body] : hardwarePresets())
    if (preset == name) {
      sourceMgr.AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBufferCopy(body, "<preset " + preset + ">"),
          llvm::SMLoc());
      return parseHardware(sourceMgr, &context);
    }
  // A path that exists is read (a FIFO, device or directory refused, a
  // size bound); else it was meant as a preset.
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (llvm::sys::fs::exists(name)) {
    file = openBoundedInput(name, kMaxDescriptionBytes, "hardware description",
                            error);
    if (!file)
      return failure();
  } else {
    std::string ignored;
    file = openInputFile(name, &ignored);
    if (!file) {
      llvm::raw_string_ostream os(error);
      os << "'" << name << "' is neither a preset (";
      for (const auto &[i, preset] : llvm::enumerate(hardwarePresets()))
        os << (i ? ", " : "") << preset.first;
      os << ") nor a readable file";
      return failure();
    }
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseHardware(sourceMgr, &context);
}

FailureOr<ModelConfig>
mlir::gptc::onnxPlanningConfig(ModelDescription &desc, MLIRContext &context,
                               const OnnxTrainingShape *given,
                               const OnnxImportOptions &onnx,
                               int64_t &microBatch, bool &pipelines) {
  OnnxTrainingShape shape;
  if (given) {
    shape = *given;
  } else if (failed(importOnnxFileForTraining(desc.getOnnxModelPath(), &context,
                                              onnx, shape))) {
    return failure();
  }
  // The cost model prices GPT-2's blocks, so the graph must hold what
  // they hold.
  Location at = desc.locate({{"onnx_model"}});
  if (shape.numLayers == 0)
    return emitError(at) << "the planner (gptc plan, --mesh auto) prices an "
                            "ONNX model by its raised transformer blocks, and "
                            "none of this graph's was raised (docs/Onnx.md, "
                            "\"What training raises\")";
  ModelConfig m = desc.getConfig();
  if (m.seqLen != shape.seqLen)
    return emitError(desc.locate({{"training"}, {"seq_len"}}))
           << "seq_len is " << m.seqLen
           << ", but the ONNX graph's token input holds sequences of "
           << shape.seqLen;
  if (m.batchSize % shape.batch)
    return emitError(desc.locate({{"training"}, {"batch_size"}}))
           << "the ONNX graph takes microbatches of " << shape.batch
           << " sequences, which do not divide batch_size (" << m.batchSize
           << ")";
  desc.setImportedModel(shape.vocab, shape.seqLen);
  desc.setImportedArchitecture(shape.numLayers, shape.numHeads, shape.modelDim,
                               shape.mlpDim, shape.tiedEmbeddings, shape.bias);
  m = desc.getConfig();
  std::optional<ModelSize> size = computeModelSize(m);
  if (!size || size->totalParams != shape.numParams)
    return emitError(at) << "cannot price this ONNX model as a GPT: its "
                            "raised blocks ("
                         << m.numLayers << " layers, width " << m.modelDim
                         << ") make a GPT-2 of "
                         << (size ? size->totalParams : 0)
                         << " parameters, and the graph holds "
                         << shape.numParams;
  microBatch = shape.batch;
  pipelines = shape.locatedLayers > 0;
  return m;
}

void mlir::gptc::keepPipelines(PlanSearch &search, bool pipelines) {
  if (!pipelines)
    llvm::erase_if(search.plans,
                   [](const auto &plan) { return plan.first.pp > 1; });
}

/// `schedule`'s learning-rate settings on `o`.
static void addSchedule(DescriptionOverrides &o,
                        const DescriptionOverrides &schedule) {
  o.lr = schedule.lr;
  o.warmupSteps = schedule.warmupSteps;
  o.lrDecay = schedule.lrDecay;
  o.minLrRatio = schedule.minLrRatio;
}

DescriptionOverrides
mlir::gptc::onnxPlanningOverrides(int64_t devices,
                                  const DescriptionOverrides &schedule) {
  DescriptionOverrides o;
  o.mesh = std::vector<MeshAxis>{{"dp", devices, MeshAxis::Kind::Data}};
  addSchedule(o, schedule);
  return o;
}

FailureOr<ModelDescription> mlir::gptc::planDescription(
    llvm::SourceMgr &sourceMgr, MLIRContext &context, const AutoMesh &mesh,
    const DescriptionOverrides &schedule, const OnnxTrainingShape *onnxShape,
    const OnnxImportOptions &onnx, CompileOptions &options,
    llvm::raw_ostream &diagnostics, std::string &error) {
  FailureOr<HardwareSpec> hw =
      loadHardware(mesh.hardware, context, diagnostics, error);
  if (failed(hw)) {
    if (!error.empty())
      error = "--hardware: " + error;
    return failure();
  }
  FailureOr<ModelDescription> unplanned = ModelDescription::parse(
      sourceMgr, &context, DescriptionOverrides::unplanned());
  if (failed(unplanned))
    return failure();
  ModelConfig config = unplanned->getConfig();
  int64_t microBatch = 0;
  bool pipelines = true;
  if (!unplanned->getOnnxModelPath().empty()) {
    FailureOr<ModelConfig> planned = onnxPlanningConfig(
        *unplanned, context, onnxShape, onnx, microBatch, pipelines);
    if (failed(planned))
      return failure();
    config = *planned;
  }
  std::optional<PlanSearch> search =
      searchPlans(config, *hw, mesh.devices, error, microBatch);
  if (search)
    keepPipelines(*search, pipelines);
  if (!search || search->plans.empty()) {
    std::string why = !search                   ? error
                      : search->considered == 0 ? "no mesh of these devices "
                                                  "can run the model"
                                                : memoryRefusal(*search, *hw);
    if (search)
      for (const std::string &rule : search->excluded)
        why += "\n  " + rule;
    error = "--mesh auto: " + why;
    return failure();
  }
  const auto &[plan, cost] = search->plans.front();
  options.zeroReduceEachMicrobatch = plan.reducesEachMicrobatch();
  DescriptionOverrides overrides;
  if (failed(overrides.setFromPlan(plan, error)))
    return failure();
  addSchedule(overrides, schedule);
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(sourceMgr, &context, overrides);
  if (failed(desc))
    return failure();
  std::string note;
  llvm::raw_string_ostream(note)
      << "--mesh auto on " << mesh.devices << " x " << hw->deviceName << ": "
      << describePlan(plan) << ": predicted step "
      << formatSeconds(cost.stepSeconds) << ", MFU " << formatPercent(cost.mfu)
      << ", " << formatMemory(double(cost.memoryBytes))
      << " per device (gptc plan ranks the others)";
  // A remark at the description, and the same words on the module.
  emitRemark(desc->locate({})) << note;
  desc->setPlanNote(std::move(note));
  return desc;
}
