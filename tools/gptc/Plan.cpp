//===- Plan.cpp - gptc plan ------------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc plan MODEL.pbtxt --hardware h100-node --devices N`: the plans the
// cost model ranks first (lib/Analysis/Planner.cpp, docs/Planning.md), and
// for the best one its step, memory and every collective.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "CompileFlags.h"
#include "Onnx.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/Planner.h"
#include "gptc/Frontend/HardwareDescription.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::OptionCategory planCategory("gptc plan options");
static cl::opt<std::string> hardwareOpt(
    "hardware",
    cl::desc("gptc plan and --mesh auto: a hardware description (.pbtxt) "
             "or a preset: a100-80gb-node, h100-node, h200-node"),
    cl::value_desc("name|file"), cl::init(""), cl::cat(planCategory));
static cl::opt<int64_t>
    devicesOpt("devices",
               cl::desc("gptc plan and --mesh auto: the device count"),
               cl::init(0), cl::cat(planCategory));
static cl::opt<int> topOpt("top", cl::desc("gptc plan: plans to list"),
                           cl::init(5), cl::cat(planCategory));

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

/// Memory, in binary units.
static std::string gib(double bytes) {
  return scaled(bytes, 1024, {"KiB", "MiB", "GiB"});
}

/// Bytes sent, in decimal units as link bandwidths are.
static std::string sent(double bytes) {
  return scaled(bytes, 1000, {"kB", "MB", "GB"});
}

static std::string seconds(double s) {
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

static std::string percent(double fraction) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f%%", fraction * 100);
  return s;
}

/// A plan in words: "--mesh pp=16,tp=8, ZeRO-1, 64 microbatches of 1,
/// interleaved v2".
static std::string describePlan(const ParallelPlan &plan) {
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

/// Why no plan is left when some were considered: their least memory.
static std::string memoryRefusal(const PlanSearch &search,
                                 const HardwareSpec &hw) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "no plan fits the devices' memory ("
     << gib(double(hw.memoryBytes) * hw.usableMemory)
     << " usable): the least any of the " << search.considered
     << " plans needs is " << gib(double(search.smallestMemory))
     << " per device (" << describePlan(*search.smallest)
     << "): add devices or use larger ones";
  return s;
}

/// The hardware: a preset's name or a file.
static FailureOr<HardwareSpec> loadHardware(MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  std::string text, name = hardwareOpt;
  for (const auto &[preset, body] : hardwarePresets())
    if (preset == name) {
      text = body;
      name = "<preset " + preset + ">";
    }
  if (text.empty()) {
    std::string error;
    // A path that exists is read (a FIFO, device or directory refused, a
    // size bound); else it was meant as a preset.
    if (llvm::sys::fs::exists(name)) {
      std::unique_ptr<llvm::MemoryBuffer> file = openBoundedInput(
          name, kMaxDescriptionBytes, "hardware description", error);
      if (!file) {
        llvm::errs() << "gptc: error: --hardware: " << error << "\n";
        return failure();
      }
      sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
      SourceMgrDiagnosticHandler handler(sourceMgr, &context);
      return parseHardware(sourceMgr, &context);
    }
    std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(name, &error);
    if (!file) {
      llvm::errs() << "gptc: error: --hardware: '" << name
                   << "' is neither a preset (";
      for (const auto &[i, preset] : llvm::enumerate(hardwarePresets()))
        llvm::errs() << (i ? ", " : "") << preset.first;
      llvm::errs() << ") nor a readable file\n";
      return failure();
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  } else {
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, name), llvm::SMLoc());
  }
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  return parseHardware(sourceMgr, &context);
}

/// What the planner reads of an unplanned description that names an ONNX
/// model: the description's batch and settings, with the architecture of
/// the graph's raised blocks (`shape`, imported here unless `given`); the
/// graph fixes each microbatch (`microBatch`, its token input's rows), and
/// `pipelines` says whether its blocks were located (the stages are cut
/// between them). The cost model prices GPT-2's blocks, so the graph must
/// hold what they hold. The description gets the graph's vocabulary,
/// context and architecture.
static FailureOr<ModelConfig> onnxPlanningConfig(ModelDescription &desc,
                                                 MLIRContext &context,
                                                 const OnnxTrainingShape *given,
                                                 int64_t &microBatch,
                                                 bool &pipelines) {
  OnnxTrainingShape shape;
  if (given) {
    shape = *given;
  } else if (failed(importOnnxForTraining(desc.getOnnxModelPath(), context,
                                          shape))) {
    return failure();
  }
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

/// Drops the plans with a pipeline axis where the model cannot be cut into
/// stages.
static void keepPipelines(PlanSearch &search, bool pipelines) {
  if (!pipelines)
    llvm::erase_if(search.plans,
                   [](const auto &plan) { return plan.first.pp > 1; });
}

/// The step the plans of MODEL.onnx share: one graph-sized microbatch per
/// device.
static DescriptionOverrides planningOverrides() {
  DescriptionOverrides o;
  o.mesh = std::vector<MeshAxis>{{"dp", devicesOpt, MeshAxis::Kind::Data}};
  return o;
}

FailureOr<DescriptionOverrides> mlir::gptc::getOnnxDescriptionOverrides() {
  if (!isMeshAuto())
    return getDescriptionOverrides();
  if (hardwareOpt.empty() || devicesOpt < 1) {
    llvm::errs() << "gptc: error: --mesh auto needs --hardware (a preset or "
                    "a file) and --devices N >= 1\n";
    return failure();
  }
  DescriptionOverrides o = planningOverrides();
  if (failed(addScheduleFlags(o)))
    return failure();
  return o;
}

/// The description with the mesh and the parallel settings a plan chooses
/// left out (gptc plan and --mesh auto).
static FailureOr<ModelDescription> parseUnplanned(llvm::SourceMgr &sourceMgr,
                                                  MLIRContext &context) {
  return ModelDescription::parse(sourceMgr, &context,
                                 DescriptionOverrides::unplanned());
}

FailureOr<ModelDescription>
mlir::gptc::parseDescription(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                             const OnnxTrainingShape *onnxShape) {
  if (!isMeshAuto()) {
    FailureOr<DescriptionOverrides> overrides = getDescriptionOverrides();
    if (failed(overrides))
      return failure();
    return ModelDescription::parse(sourceMgr, &context, *overrides);
  }
  if (hardwareOpt.empty() || devicesOpt < 1) {
    llvm::errs() << "gptc: error: --mesh auto needs --hardware (a preset or "
                    "a file) and --devices N >= 1\n";
    return failure();
  }
  if (explicitParallelOptions()) {
    llvm::errs() << "gptc: error: --mesh auto chooses the ZeRO stage, "
                    "sequence parallelism, microbatches, recomputation and "
                    "pipeline schedule: drop --zero-stage, --zero-reduce, "
                    "--sequence-parallel, --grad-accum, --recompute, "
                    "--pipeline-schedule and --virtual-stages\n";
    return failure();
  }
  FailureOr<HardwareSpec> hw = loadHardware(context);
  if (failed(hw))
    return failure();
  FailureOr<ModelDescription> unplanned = parseUnplanned(sourceMgr, context);
  if (failed(unplanned))
    return failure();
  ModelConfig config = unplanned->getConfig();
  int64_t microBatch = 0;
  bool pipelines = true;
  if (!unplanned->getOnnxModelPath().empty()) {
    FailureOr<ModelConfig> onnx = onnxPlanningConfig(
        *unplanned, context, onnxShape, microBatch, pipelines);
    if (failed(onnx))
      return failure();
    config = *onnx;
  }
  std::string error;
  std::optional<PlanSearch> search =
      searchPlans(config, *hw, devicesOpt, error, microBatch);
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
    llvm::errs() << "gptc: error: --mesh auto: " << why << "\n";
    return failure();
  }
  const auto &[plan, cost] = search->plans.front();
  setPlanReducesEachMicrobatch(plan.reducesEachMicrobatch());
  DescriptionOverrides overrides;
  if (failed(overrides.setFromPlan(plan, error))) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return failure();
  }
  if (failed(addScheduleFlags(overrides)))
    return failure();
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(sourceMgr, &context, overrides);
  if (failed(desc))
    return failure();
  std::string note;
  llvm::raw_string_ostream(note)
      << "--mesh auto on " << devicesOpt.getValue() << " x " << hw->deviceName
      << ": " << describePlan(plan) << ": predicted step "
      << seconds(cost.stepSeconds) << ", MFU " << percent(cost.mfu) << ", "
      << gib(double(cost.memoryBytes))
      << " per device (gptc plan ranks the others)";
  // A remark at the description, and the same words on the module.
  emitRemark(desc->locate({})) << note;
  desc->setPlanNote(std::move(note));
  return desc;
}

/// A plan's terms: its step and memory.
static void printPlanTerms(llvm::raw_ostream &os, const PlanCost &cost) {
  os << "  step " << seconds(cost.stepSeconds) << " = compute "
     << seconds(cost.computeSeconds) << " + memory-bound "
     << seconds(cost.memorySeconds) << " + bubble "
     << seconds(cost.bubbleSeconds) << " + communication "
     << seconds(cost.commSeconds) << " exposed";
  if (cost.overlappedSeconds > 0)
    os << " (" << seconds(cost.overlappedSeconds)
       << " more hidden behind computation)";
  os << "; MFU " << llvm::format("%.1f%%", cost.mfu * 100) << "\n";
  os << "  memory per device " << gib(double(cost.memoryBytes)) << ": weights "
     << gib(double(cost.weightBytes)) << ", gradients "
     << gib(double(cost.gradBytes)) << ", optimizer "
     << gib(double(cost.optimizerBytes)) << ", activations "
     << gib(double(cost.activationBytes)) << ", logits "
     << gib(double(cost.logitBytes)) << " (" << cost.paramsPerDevice
     << " parameters)\n";
}

/// A plan's collectives, each with its link.
static void printComms(llvm::raw_ostream &os, const PlanCost &cost) {
  os << "  communication per device and step:\n";
  os << llvm::format("    %-15s %-4s %-10s %14s %8s %14s %10s %10s  %s\n",
                     "kind", "axis", "link", "G bytes", "runs", "sent bytes",
                     "time", "exposed", "for");
  for (const CommCost &x : cost.comms)
    os << llvm::format(
        "    %-15s %-4s %-10s %14lld %8lld %14.0f %10s %10s  %s\n",
        x.kind.c_str(), x.axis.c_str(),
        x.interNode ? "inter-node" : "intra-node",
        static_cast<long long>(x.bytes), static_cast<long long>(x.runs),
        x.sentBytes, seconds(x.seconds).c_str(),
        seconds(x.seconds - x.overlappedSeconds).c_str(), x.what.c_str());
}

/// The command that trains `plan`.
static void printRunCommand(llvm::raw_ostream &os, const std::string &modelPath,
                            int64_t devices, const ParallelPlan &plan) {
  os << "  to run it: mpirun -np " << devices << " gptc train " << modelPath
     << " --mesh " << plan.meshString();
  if (plan.zeroStage)
    os << " --zero-stage " << plan.zeroStage;
  if (plan.sequenceParallel)
    os << " --sequence-parallel";
  os << " --grad-accum " << plan.microbatches;
  if (plan.reducesEachMicrobatch())
    os << " --zero-reduce=microbatch";
  if (plan.pp > 1)
    os << " --pipeline-schedule=" << pipelineScheduleName(plan.schedule);
  else if (plan.recompute != Recompute::None)
    os << " --recompute=" << stringifyRecompute(plan.recompute).str();
  os << "\n";
}

/// A signed difference of seconds ("+1.2 ms", "-3.40 s").
static std::string secondsDelta(double s) {
  if (std::fabs(s) < 1e-9)
    return "0";
  return (s < 0 ? "-" : "+") + seconds(std::fabs(s));
}

/// The plan the description and the flags (--mesh, --zero-stage,
/// --grad-accum, --sequence-parallel, --recompute, --pipeline-schedule,
/// --virtual-stages) give, as gptc train would run it; `m` the
/// description's config with them.
static ParallelPlan givenPlan(const ModelDescription &desc,
                              const ModelConfig &m,
                              const PipelineOverrides &flags) {
  ParallelPlan plan;
  plan.dp = m.dataParallel;
  plan.tp = m.tensorParallel;
  plan.pp = m.pipelineParallel;
  plan.cp = m.contextParallel;
  plan.zeroStage = m.zeroStage;
  plan.sequenceParallel = m.sequenceParallel;
  plan.microbatches = std::max<int64_t>(1, m.gradAccumSteps);
  plan.microBatch =
      m.batchSize / std::max<int64_t>(1, plan.dp) / plan.microbatches;
  plan.recompute = m.recompute;
  if (plan.pp > 1) {
    // As planPipeline: the schedule, and interleaved's 2 chunks a stage
    // unless given; the stages recompute their chunks.
    plan.schedule = flags.schedule
                        ? *flags.schedule
                        : parsePipelineSchedule(m.pipelineSchedule)
                              .value_or(PipelineScheduleKind::OneFOneB);
    int64_t v = flags.virtualStages.value_or(m.virtualStages);
    plan.virtualStages = v > 0 ? v
                         : plan.schedule == PipelineScheduleKind::Interleaved
                             ? 2
                             : 1;
    plan.recompute = Recompute::Full;
  }
  // The cost model places tp innermost, then pp and dp in the mesh's order.
  int64_t dpAt = -1, ppAt = -1;
  for (auto [i, axis] : llvm::enumerate(desc.getMeshAxes())) {
    if (axis.kind == MeshAxis::Kind::Data)
      dpAt = static_cast<int64_t>(i);
    else if (axis.kind == MeshAxis::Kind::Pipeline)
      ppAt = static_cast<int64_t>(i);
  }
  plan.dataOutermost = dpAt < 0 || ppAt < 0 || dpAt < ppAt;
  return plan;
}

/// The given plan in full, beside the best: each term, and what makes the
/// difference.
static void printGivenPlan(llvm::raw_ostream &os, const ParallelPlan &plan,
                           const PlanCost &cost, const PlanSearch &search,
                           const HardwareSpec &hw, const std::string &modelPath,
                           bool tpInnermost) {
  double usable = double(hw.memoryBytes) * hw.usableMemory;
  os << "given plan: " << describePlan(plan) << "\n";
  if (!tpInnermost)
    os << "  (priced with the tensor axis innermost, within a node, as gptc "
          "plan places it; the given order puts another axis inside it)\n";
  int64_t ahead = 0;
  for (const auto &[p, c] : search.plans)
    if (ranksBefore(c, cost))
      ++ahead;
  if (!cost.fits)
    os << "  does not fit: it needs " << gib(double(cost.memoryBytes))
       << " per device, " << gib(usable) << " usable\n";
  else
    os << "  " << ahead << " of the " << search.plans.size()
       << " plans that fit rank ahead of it (faster, or within 0.5% and "
          "sending less)\n";
  printPlanTerms(os, cost);
  printComms(os, cost);
  printRunCommand(os, modelPath, plan.devices(), plan);
  if (search.plans.empty())
    return;
  const auto &[best, bestCost] = search.plans.front();
  os << "  beside plan 1 (" << describePlan(best) << "):\n";
  os << llvm::format("    %-15s %12s %12s %12s\n", "", "given", "plan 1",
                     "difference");
  struct Term {
    const char *name;
    double given, best;
  };
  Term terms[] = {{"compute", cost.computeSeconds, bestCost.computeSeconds},
                  {"memory-bound", cost.memorySeconds, bestCost.memorySeconds},
                  {"bubble", cost.bubbleSeconds, bestCost.bubbleSeconds},
                  {"communication", cost.commSeconds, bestCost.commSeconds}};
  os << llvm::format(
      "    %-15s %12s %12s %12s\n", "step", seconds(cost.stepSeconds).c_str(),
      seconds(bestCost.stepSeconds).c_str(),
      secondsDelta(cost.stepSeconds - bestCost.stepSeconds).c_str());
  for (const Term &t : terms)
    os << llvm::format("    %-15s %12s %12s %12s\n", t.name,
                       seconds(t.given).c_str(), seconds(t.best).c_str(),
                       secondsDelta(t.given - t.best).c_str());
  os << llvm::format("    %-15s %11.1f%% %11.1f%%\n", "MFU", cost.mfu * 100,
                     bestCost.mfu * 100);
  os << llvm::format("    %-15s %12s %12s\n", "memory/device",
                     gib(double(cost.memoryBytes)).c_str(),
                     gib(double(bestCost.memoryBytes)).c_str());
  os << llvm::format("    %-15s %12s %12s\n", "sent/device",
                     sent(cost.sentBytes).c_str(),
                     sent(bestCost.sentBytes).c_str());
  // The terms that differ by more than 1% of the step, largest first.
  std::vector<const Term *> order;
  for (const Term &t : terms)
    if (std::fabs(t.given - t.best) > 0.01 * bestCost.stepSeconds)
      order.push_back(&t);
  llvm::sort(order, [](const Term *a, const Term *b) {
    return std::fabs(a->given - a->best) > std::fabs(b->given - b->best);
  });
  double delta = cost.stepSeconds - bestCost.stepSeconds;
  os << "  what makes the difference: ";
  if (order.empty()) {
    os << "no term differs by more than 1% of the step (the steps differ by "
       << seconds(std::fabs(delta)) << ")\n";
    return;
  }
  os << "the given plan's step is " << seconds(std::fabs(delta))
     << (delta >= 0 ? " longer" : " shorter") << ": ";
  for (auto [i, t] : llvm::enumerate(order))
    os << (i ? ", " : "") << t->name << " " << secondsDelta(t->given - t->best);
  os << "\n";
}

int mlir::gptc::runPlan(const std::string &modelPath,
                        const DialectRegistry &registry) {
  MLIRContext context(registry);
  bool given = isMeshGiven();
  if (hardwareOpt.empty() || (devicesOpt < 1 && !given)) {
    llvm::errs() << "gptc: error: gptc plan needs --hardware (a preset or a "
                    "file) and --devices N >= 1 (or --mesh, to price that "
                    "plan), as in gptc plan models/gpt3-175b.pbtxt --hardware "
                    "h100-node --devices 1024\n";
    return 1;
  }
  if (topOpt < 1) {
    llvm::errs() << "gptc: error: --top takes a count >= 1, got " << topOpt
                 << "\n";
    return 1;
  }
  bool isOnnx = StringRef(modelPath).ends_with(".onnx");
  if (modelPath == "-" && isatty(0)) {
    llvm::errs() << "gptc: error: gptc plan needs a model description, as "
                    "in gptc plan models/gpt3-175b.pbtxt --hardware "
                    "h100-node --devices 1024\n";
    return 1;
  }
  FailureOr<HardwareSpec> hw = loadHardware(context);
  if (failed(hw))
    return 1;
  // The model as described (its mesh is what the plan replaces). An ONNX
  // model itself is described as gptc train describes it, with one
  // microbatch of the graph's per device in the step.
  std::string error;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::optional<OnnxTrainingShape> onnxShape;
  if (isOnnx) {
    onnxShape.emplace();
    if (failed(importOnnxForTraining(modelPath, context, *onnxShape)))
      return 1;
    FailureOr<std::string> text = onnxTrainingDescription(
        modelPath, *onnxShape, planningOverrides(), error);
    if (failed(text)) {
      llvm::errs() << "gptc: error: " << error << "\n";
      return 1;
    }
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(
                                     *text, modelPath + " (training settings)"),
                                 llvm::SMLoc());
  } else {
    std::unique_ptr<llvm::MemoryBuffer> file = openBoundedInput(
        modelPath, kMaxDescriptionBytes, "model description", error);
    if (!file) {
      llvm::errs() << "gptc: error: " << error << "\n";
      return 1;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  }
  FailureOr<ModelDescription> desc = parseUnplanned(sourceMgr, context);
  if (failed(desc))
    return 1;
  ModelConfig m = desc->getConfig();
  int64_t microBatch = 0;
  bool pipelines = true;
  if (!desc->getOnnxModelPath().empty()) {
    FailureOr<ModelConfig> onnx =
        onnxPlanningConfig(*desc, context, onnxShape ? &*onnxShape : nullptr,
                           microBatch, pipelines);
    if (failed(onnx))
      return 1;
    m = *onnx;
  }

  // --mesh (and the other parallel flags): that plan, priced.
  int64_t devices = devicesOpt;
  std::optional<std::pair<ParallelPlan, PlanCost>> givenCost;
  bool tpInnermost = true;
  if (given) {
    FailureOr<DescriptionOverrides> overrides = getDescriptionOverrides();
    if (failed(overrides))
      return 1;
    // A source manager of its own: the flags' text is a buffer of it.
    llvm::SourceMgr givenMgr;
    const llvm::MemoryBuffer *text =
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
    givenMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text->getBuffer(),
                                             text->getBufferIdentifier()),
        llvm::SMLoc());
    SourceMgrDiagnosticHandler givenHandler(givenMgr, &context);
    FailureOr<ModelDescription> gd =
        ModelDescription::parse(givenMgr, &context, *overrides);
    if (failed(gd))
      return 1;
    ModelConfig g = gd->getConfig();
    if (!gd->getOnnxModelPath().empty()) {
      int64_t graphBatch = 0;
      bool cut = true;
      FailureOr<ModelConfig> onnx = onnxPlanningConfig(
          *gd, context, onnxShape ? &*onnxShape : nullptr, graphBatch, cut);
      if (failed(onnx))
        return 1;
      g = *onnx;
    }
    FailureOr<CompileOptions> flags = getCompileOptions();
    if (failed(flags))
      return 1;
    ParallelPlan plan = givenPlan(*gd, g, flags->pipeline);
    plan.reduceOncePerStep = !flags->zeroReduceEachMicrobatch;
    int64_t meshDevices = plan.devices();
    if (devices > 0 && devices != meshDevices) {
      llvm::errs() << "gptc: error: --mesh " << plan.meshString() << " has "
                   << meshDevices << " devices, --devices says " << devices
                   << "\n";
      return 1;
    }
    devices = meshDevices;
    if (std::string why = checkPlan(g, plan, *hw); !why.empty()) {
      llvm::errs() << "gptc: error: gptc plan cannot price --mesh "
                   << plan.meshString() << ": " << why << "\n";
      return 1;
    }
    ArrayRef<MeshAxis> axes = gd->getMeshAxes();
    tpInnermost = g.tensorParallel == 1 ||
                  (!axes.empty() && axes.back().kind == MeshAxis::Kind::Tensor);
    std::optional<ModelSize> size = computeModelSize(g);
    if (!size) {
      llvm::errs() << "gptc: error: cannot size " << desc->getName()
                   << " on --mesh " << plan.meshString() << "\n";
      return 1;
    }
    givenCost = {plan, evaluatePlan(g, *size, plan, *hw)};
  }

  auto start = std::chrono::steady_clock::now();
  std::optional<PlanSearch> search =
      searchPlans(m, *hw, devices, error, microBatch);
  if (search)
    keepPipelines(*search, pipelines);
  double planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!search) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  llvm::raw_ostream &os = llvm::outs();
  int64_t nodes = (devices + hw->devicesPerNode - 1) / hw->devicesPerNode;
  const char *precision = m.precision == Precision::BF16   ? "bf16"
                          : m.precision == Precision::FP16 ? "fp16"
                                                           : "fp32";
  os << "gptc plan: " << desc->getName() << " (batch " << m.batchSize
     << " x seq " << m.seqLen << ", " << precision << ") on " << devices
     << " x " << hw->deviceName << " (" << hw->name << ": "
     << hw->devicesPerNode << " per node, " << nodes << " node"
     << (nodes > 1 ? "s" : "") << ")\n";
  if (microBatch > 0)
    os << "onnx model: " << desc->getOnnxModelPath() << " (" << m.numLayers
       << " raised blocks of width " << m.modelDim << ", " << m.numHeads
       << " heads; its microbatches hold the graph's " << microBatch
       << " sequences)\n";
  os << "considered " << search->considered << " plans in "
     << llvm::format("%.3f", planSeconds) << " s; " << search->plans.size()
     << " fit in " << gib(double(hw->memoryBytes) * hw->usableMemory)
     << " per device (" << llvm::format("%.0f", hw->usableMemory * 100)
     << "% of " << gib(double(hw->memoryBytes)) << ")\n";
  if (givenCost)
    printGivenPlan(os, givenCost->first, givenCost->second, *search, *hw,
                   modelPath, tpInnermost);
  if (search->plans.empty()) {
    // Name what left no plan: the meshes' rules where none was considered,
    // else the memory, with the rules that removed the others.
    std::string rules;
    for (const std::string &why : search->excluded)
      rules += "\n  " + why;
    if (search->considered == 0)
      llvm::errs() << "gptc: error: no mesh of " << devices
                   << " devices can run " << desc->getName() << ":" << rules
                   << "\n";
    else
      llvm::errs() << "gptc: error: " << memoryRefusal(*search, *hw)
                   << (rules.empty() ? "" : "; meshes not considered:") << rules
                   << "\n";
    return 1;
  }
  os << llvm::format("%3s  %-20s %4s %3s %14s %-20s %10s %6s %11s %11s\n", "#",
                     "mesh", "zero", "sp", "microbatches", "schedule", "step",
                     "MFU", "memory", "sent");
  int shown = 0;
  for (const auto &[plan, cost] : search->plans) {
    if (shown++ == topOpt)
      break;
    // Microbatches per replica x sequences in each.
    std::string micro = std::to_string(plan.microbatches) + " x " +
                        std::to_string(plan.microBatch) +
                        (plan.microBatch == 1 ? " seq" : " seqs");
    std::string sched =
        plan.pp == 1 ? (plan.recompute == Recompute::None
                            ? std::string("-")
                            : std::string("recompute ") +
                                  stringifyRecompute(plan.recompute).str())
                     : std::string(pipelineScheduleName(plan.schedule)) +
                           (plan.virtualStages > 1
                                ? " v" + std::to_string(plan.virtualStages)
                                : "");
    os << llvm::format("%3d  %-20s %4d %3s %14s %-20s %10s %5.1f%% %11s "
                       "%11s\n",
                       shown, plan.meshString().c_str(), plan.zeroStage,
                       plan.sequenceParallel ? "on" : "-", micro.c_str(),
                       sched.c_str(), seconds(cost.stepSeconds).c_str(),
                       cost.mfu * 100, gib(double(cost.memoryBytes)).c_str(),
                       sent(double(cost.sentBytes)).c_str());
  }

  // The chosen plan in full, and why not data parallelism alone.
  const auto &[plan, cost] = search->plans.front();
  os << "\nplan 1: --mesh " << plan.meshString() << " (tp innermost, "
     << (plan.dataOutermost ? "then pp, then dp" : "then dp, then pp")
     << "), ZeRO-" << plan.zeroStage
     << (plan.sequenceParallel ? ", sequence parallel" : "") << ", "
     << plan.microbatches << " microbatch"
     << (plan.microbatches > 1 ? "es" : "") << " of " << plan.microBatch
     << " per replica";
  if (plan.pp > 1)
    os << ", " << pipelineScheduleName(plan.schedule)
       << ", each stage recomputing its chunks' forwards";
  else if (plan.recompute != Recompute::None)
    os << ", recompute " << stringifyRecompute(plan.recompute).str();
  os << "\n";
  printPlanTerms(os, cost);
  if (plan.tp > 1 || plan.pp > 1) {
    bool dpFits = double(search->dataParallelMemory) <=
                  double(hw->memoryBytes) * hw->usableMemory;
    if (!dpFits)
      os << "  why not data parallel alone: it needs at least "
         << gib(double(search->dataParallelMemory))
         << " per device (with ZeRO-3)\n";
    else if (m.batchSize % devices)
      os << "  why not data parallel alone: the batch (" << m.batchSize
         << ") does not split over " << devices << " replicas\n";
    else
      os << "  data parallel alone fits but is slower (its all-reduce of "
            "every gradient crosses the slowest link)\n";
  }
  printComms(os, cost);
  printRunCommand(os, modelPath, devices, plan);
  return 0;
}
