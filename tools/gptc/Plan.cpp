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
#include "gptc/Driver/Planning.h"
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

/// The hardware --hardware names (gptc plan's errors in its voice).
static FailureOr<HardwareSpec> loadHardwareFlag(MLIRContext &context) {
  std::string error;
  FailureOr<HardwareSpec> hw =
      mlir::gptc::loadHardware(hardwareOpt, context, llvm::errs(), error);
  if (failed(hw) && !error.empty())
    llvm::errs() << "gptc: error: --hardware: " << error << "\n";
  return hw;
}

/// The ONNX import flags, for planning (their errors printed).
static FailureOr<OnnxImportOptions> onnxFlags() {
  OnnxImportOptions options;
  if (!getOnnxImportOptions(options))
    return failure();
  return options;
}

FailureOr<DescriptionOverrides> mlir::gptc::getOnnxDescriptionOverrides() {
  if (!isMeshAuto())
    return getDescriptionOverrides();
  if (hardwareOpt.empty() || devicesOpt < 1) {
    llvm::errs() << "gptc: error: --mesh auto needs --hardware (a preset or "
                    "a file) and --devices N >= 1\n";
    return failure();
  }
  DescriptionOverrides schedule;
  if (failed(addScheduleFlags(schedule)))
    return failure();
  return onnxPlanningOverrides(devicesOpt, schedule);
}

FailureOr<std::optional<AutoMesh>> mlir::gptc::autoMeshFlags() {
  if (!isMeshAuto())
    return std::optional<AutoMesh>();
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
  return std::optional<AutoMesh>(AutoMesh{hardwareOpt, devicesOpt});
}

FailureOr<ModelDescription>
mlir::gptc::parseDescription(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                             CompileOptions &options,
                             const OnnxTrainingShape *onnxShape) {
  FailureOr<std::optional<AutoMesh>> mesh = autoMeshFlags();
  if (failed(mesh))
    return failure();
  if (!*mesh) {
    FailureOr<DescriptionOverrides> overrides = getDescriptionOverrides();
    if (failed(overrides))
      return failure();
    return ModelDescription::parse(sourceMgr, &context, *overrides);
  }
  DescriptionOverrides schedule;
  FailureOr<OnnxImportOptions> onnx = onnxFlags();
  if (failed(addScheduleFlags(schedule)) || failed(onnx))
    return failure();
  std::string error;
  FailureOr<ModelDescription> desc =
      planDescription(sourceMgr, context, **mesh, schedule, onnxShape, *onnx,
                      options, llvm::errs(), error);
  if (failed(desc) && !error.empty())
    llvm::errs() << "gptc: error: " << error << "\n";
  return desc;
}

/// A plan's terms: its step and memory.
static void printPlanTerms(llvm::raw_ostream &os, const PlanCost &cost) {
  os << "  step " << formatSeconds(cost.stepSeconds) << " = compute "
     << formatSeconds(cost.computeSeconds) << " + memory-bound "
     << formatSeconds(cost.memorySeconds) << " + bubble "
     << formatSeconds(cost.bubbleSeconds) << " + communication "
     << formatSeconds(cost.commSeconds) << " exposed";
  if (cost.overlappedSeconds > 0)
    os << " (" << formatSeconds(cost.overlappedSeconds)
       << " more hidden behind computation)";
  os << "; MFU " << llvm::format("%.1f%%", cost.mfu * 100) << "\n";
  os << "  memory per device " << formatMemory(double(cost.memoryBytes))
     << ": weights " << formatMemory(double(cost.weightBytes)) << ", gradients "
     << formatMemory(double(cost.gradBytes)) << ", optimizer "
     << formatMemory(double(cost.optimizerBytes)) << ", activations "
     << formatMemory(double(cost.activationBytes)) << ", logits "
     << formatMemory(double(cost.logitBytes)) << " (" << cost.paramsPerDevice
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
        x.sentBytes, formatSeconds(x.seconds).c_str(),
        formatSeconds(x.seconds - x.overlappedSeconds).c_str(), x.what.c_str());
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
  return (s < 0 ? "-" : "+") + formatSeconds(std::fabs(s));
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
    plan.schedule = flags.schedule.value_or(m.pipelineSchedule);
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
    os << "  does not fit: it needs " << formatMemory(double(cost.memoryBytes))
       << " per device, " << formatMemory(usable) << " usable\n";
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
      "    %-15s %12s %12s %12s\n", "step",
      formatSeconds(cost.stepSeconds).c_str(),
      formatSeconds(bestCost.stepSeconds).c_str(),
      secondsDelta(cost.stepSeconds - bestCost.stepSeconds).c_str());
  for (const Term &t : terms)
    os << llvm::format(
        "    %-15s %12s %12s %12s\n", t.name, formatSeconds(t.given).c_str(),
        formatSeconds(t.best).c_str(), secondsDelta(t.given - t.best).c_str());
  os << llvm::format("    %-15s %11.1f%% %11.1f%%\n", "MFU", cost.mfu * 100,
                     bestCost.mfu * 100);
  os << llvm::format("    %-15s %12s %12s\n", "memory/device",
                     formatMemory(double(cost.memoryBytes)).c_str(),
                     formatMemory(double(bestCost.memoryBytes)).c_str());
  os << llvm::format("    %-15s %12s %12s\n", "sent/device",
                     formatSent(cost.sentBytes).c_str(),
                     formatSent(bestCost.sentBytes).c_str());
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
       << formatSeconds(std::fabs(delta)) << ")\n";
    return;
  }
  os << "the given plan's step is " << formatSeconds(std::fabs(delta))
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
  FailureOr<HardwareSpec> hw = loadHardwareFlag(context);
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
        modelPath, *onnxShape, onnxPlanningOverrides(devicesOpt, {}), error);
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
  FailureOr<ModelDescription> desc = ModelDescription::parse(
      sourceMgr, &context, DescriptionOverrides::unplanned());
  FailureOr<OnnxImportOptions> onnxOptions = onnxFlags();
  if (failed(desc) || failed(onnxOptions))
    return 1;
  ModelConfig m = desc->getConfig();
  int64_t microBatch = 0;
  bool pipelines = true;
  if (!desc->getOnnxModelPath().empty()) {
    FailureOr<ModelConfig> onnx =
        onnxPlanningConfig(*desc, context, onnxShape ? &*onnxShape : nullptr,
                           *onnxOptions, microBatch, pipelines);
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
      FailureOr<ModelConfig> onnx =
          onnxPlanningConfig(*gd, context, onnxShape ? &*onnxShape : nullptr,
                             *onnxOptions, graphBatch, cut);
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
     << " fit in " << formatMemory(double(hw->memoryBytes) * hw->usableMemory)
     << " per device (" << llvm::format("%.0f", hw->usableMemory * 100)
     << "% of " << formatMemory(double(hw->memoryBytes)) << ")\n";
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
                       sched.c_str(), formatSeconds(cost.stepSeconds).c_str(),
                       cost.mfu * 100,
                       formatMemory(double(cost.memoryBytes)).c_str(),
                       formatSent(double(cost.sentBytes)).c_str());
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
         << formatMemory(double(search->dataParallelMemory))
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
