//===- Schedule.cpp - gptc --emit=schedule ---------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The report of a pipeline's plan. Stage costs are forward FLOPs per token
// (a layer: 2 x its parameters + 4 T C for attention; the last stage adds
// the head's 2 V C), backwards twice their forwards, sends free. The
// bubble is printed twice: for equal stages (the schedule's own, (p-1) /
// (m+p-1) for GPipe and 1F1B) and for this partition's FLOPs.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Frontend/ModelSpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <sstream>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::OptionCategory scheduleCategory(
    "gptc pipeline options (meshes with a pp axis: gptc train, --emit=*)");
static cl::opt<std::string> scheduleOpt(
    "pipeline-schedule",
    cl::desc("Pipeline schedule: gpipe, 1f1b or interleaved (default: the "
             "description's pipeline_schedule, else 1f1b)"),
    cl::init("1f1b"), cl::cat(scheduleCategory));
static cl::opt<int64_t> virtualStagesOpt(
    "virtual-stages",
    cl::desc("Chunks per stage for the interleaved schedule (default: the "
             "description's virtual_stages, else 2 there, 1 otherwise)"),
    cl::init(0), cl::cat(scheduleCategory));
static cl::list<int64_t> layersOpt(
    "pipeline-layers",
    cl::desc("Layers of each chunk in order, e.g. 4,4,3,1 (default: the "
             "description's pipeline_layers, else balanced by FLOPs)"),
    cl::CommaSeparated, cl::cat(scheduleCategory));
static cl::opt<std::string>
    traceOpt("schedule-trace",
             cl::desc("Write the schedule's timeline as a Chrome trace "
                      "(JSON; opens in Perfetto)"),
             cl::value_desc("file"), cl::init(""), cl::cat(scheduleCategory));
static cl::opt<std::string>
    svgOpt("schedule-svg", cl::desc("Write the timeline as an SVG picture"),
           cl::value_desc("file"), cl::init(""), cl::cat(scheduleCategory));

bool mlir::gptc::pipelineOptionsGiven() {
  return scheduleOpt.getNumOccurrences() ||
         virtualStagesOpt.getNumOccurrences() || layersOpt.getNumOccurrences();
}

FailureOr<PipelinePlanning>
mlir::gptc::planPipeline(const ModelDescription &desc) {
  Location meshLoc = desc.locate({{"mesh"}});
  const ModelConfig &m = desc.getConfig();
  // The command line replaces the description's settings.
  bool cliSchedule = scheduleOpt.getNumOccurrences() > 0;
  std::optional<PipelineScheduleKind> kind =
      parsePipelineSchedule(cliSchedule ? scheduleOpt : m.pipelineSchedule);
  if (!kind) {
    llvm::errs() << "gptc: error: --pipeline-schedule takes gpipe, 1f1b or "
                    "interleaved, got '"
                 << scheduleOpt << "'\n";
    return failure();
  }
  int64_t v = virtualStagesOpt;
  if (v < 0 || (v == 0 && virtualStagesOpt.getNumOccurrences())) {
    llvm::errs() << "gptc: error: --virtual-stages takes a count >= 1, got "
                 << v << "\n";
    return failure();
  }
  // The description's virtual stages go with its schedule.
  if (v == 0 && !(cliSchedule && *kind != PipelineScheduleKind::Interleaved))
    v = m.virtualStages;
  if (v == 0)
    v = *kind == PipelineScheduleKind::Interleaved ? 2 : 1;
  if (v > 1 && *kind != PipelineScheduleKind::Interleaved) {
    llvm::errs() << "gptc: error: --virtual-stages is for the interleaved "
                    "schedule, not "
                 << pipelineScheduleName(*kind) << "\n";
    return failure();
  }
  int64_t p = m.pipelineParallel, micro = m.gradAccumSteps;
  if (p < 2)
    return emitError(meshLoc)
           << "--emit=schedule plans a pipeline: the mesh needs a pipeline "
              "axis of size 2 or more (e.g. --mesh pp=4)";
  // Every microbatch the same size on every data-parallel rank.
  if (m.batchSize % (m.dataParallel * micro) != 0)
    return emitError(desc.locate({{"training"}, {"batch_size"}}))
           << "a pipeline needs equal microbatches: batch_size (" << m.batchSize
           << ") is not a multiple of data-parallel size x "
           << "microbatches (" << m.dataParallel << " x " << micro << ")";
  std::optional<ModelSize> size = computeModelSize(m);
  if (!size)
    return emitError(meshLoc) << "cannot size this model";
  double C = static_cast<double>(m.modelDim), T = static_cast<double>(m.seqLen);
  double layerCost = 2.0 * size->layerParams + 4.0 * T * C;
  double headCost = 2.0 * m.vocabSize * C;
  std::string error;
  std::optional<PipelinePartition> partition;
  std::vector<int64_t> layers(layersOpt.begin(), layersOpt.end());
  bool cliLayers = layersOpt.getNumOccurrences() > 0;
  if (!cliLayers)
    layers = m.pipelineLayers;
  if (layers.empty()) {
    partition =
        partitionPipeline(m.numLayers, p, v, layerCost, 0.0, headCost, error);
    if (!partition)
      return emitError(meshLoc) << error;
  } else {
    // Fixed by the user: each chunk's layers, checked against the model.
    auto fail = [&](const Twine &message) -> LogicalResult {
      if (cliLayers) {
        llvm::errs() << "gptc: error: --pipeline-layers: " << message << "\n";
        return failure();
      }
      return emitError(desc.locate({{"parallel"}, {"pipeline_layers"}}))
             << message;
    };
    int64_t sum = 0;
    for (int64_t l : layers) {
      if (l < 1)
        return fail("every pipeline chunk needs a layer, got " + Twine(l));
      sum += l;
    }
    if (static_cast<int64_t>(layers.size()) != p * v)
      return fail(Twine(layers.size()) + " chunks given; the pipeline has " +
                  Twine(p) + " stages x " + Twine(v) +
                  " virtual stages = " + Twine(p * v));
    if (sum != m.numLayers)
      return fail("the chunks hold " + Twine(sum) + " layers; the model has " +
                  Twine(m.numLayers));
    PipelinePartition fixed;
    fixed.stages = p;
    fixed.virtualStages = v;
    fixed.layers = m.numLayers;
    int64_t first = 0;
    for (size_t c = 0; c < layers.size(); ++c) {
      fixed.chunks.push_back({first, first + layers[c]});
      first += layers[c];
      fixed.forwardCost.push_back(static_cast<double>(layers[c]) * layerCost +
                                  (c + 1 == layers.size() ? headCost : 0.0));
    }
    partition = std::move(fixed);
  }
  auto programs = buildPipelinePrograms(*partition, micro, *kind, error);
  if (!programs)
    return emitError(meshLoc) << error;
  // A schedule that cannot finish is refused here, whatever runs it.
  std::vector<double> equal(partition->forwardCost.size(), 1.0);
  if (!simulatePipeline(*programs, equal, v, error))
    return emitError(meshLoc) << error;
  return PipelinePlanning{*kind, v, micro, std::move(*partition),
                          std::move(*programs)};
}

LogicalResult mlir::gptc::printPipelineSchedule(const ModelDescription &desc,
                                                raw_ostream &os) {
  Location meshLoc = desc.locate({{"mesh"}});
  MLIRContext *ctx = meshLoc.getContext();
  const ModelConfig &m = desc.getConfig();
  FailureOr<PipelinePlanning> plan = planPipeline(desc);
  if (failed(plan))
    return failure();
  std::string error;
  PipelineScheduleKind *kind = &plan->kind;
  int64_t v = plan->virtualStages, p = m.pipelineParallel,
          micro = plan->microbatches;
  const PipelinePartition *partition = &plan->partition;
  auto *programs = &plan->programs;
  // Equal stages (each chunk 1/v of a stage) and this partition's FLOPs,
  // in units of the largest chunk.
  std::vector<double> equal(partition->forwardCost.size(),
                            1.0 / static_cast<double>(v));
  double largest = 0;
  for (double c : partition->forwardCost)
    largest = std::max(largest, c);
  std::vector<double> flops;
  for (double c : partition->forwardCost)
    flops.push_back(c / largest);
  auto ideal = simulatePipeline(*programs, equal, v, error);
  if (!ideal)
    return emitError(meshLoc) << error;
  auto real = simulatePipeline(*programs, flops, v, error);
  if (!real)
    return emitError(meshLoc) << error;

  bool chunks = v > 1;
  os << "pipeline: " << p << " stages";
  if (chunks)
    os << " x " << v << " virtual stages";
  os << ", " << pipelineScheduleName(*kind) << ", " << micro
     << " microbatches of " << m.batchSize / (m.dataParallel * micro)
     << " sequences\n";
  for (int64_t s = 0; s < p; ++s) {
    os << "stage " << s << ":";
    double cost = 0;
    for (size_t c = s; c < partition->chunks.size(); c += p) {
      auto [a, b] = partition->chunks[c];
      if (chunks)
        os << " chunk " << c;
      os << " layers " << a << "-" << b - 1;
      if (c == 0)
        os << " + embedding";
      if (c + 1 == partition->chunks.size())
        os << " + final norm, head, loss";
      cost += partition->forwardCost[c];
      if (c + p < partition->chunks.size())
        os << ";";
    }
    if (cost >= 1e9)
      os << " (" << llvm::format("%.3g", cost / 1e9)
         << " GFLOP/token forward)\n";
    else
      os << " (" << llvm::format("%.3g", cost / 1e6)
         << " MFLOP/token forward)\n";
  }
  int64_t q = p - 1;
  os << "bubble fraction: " << llvm::format("%.4f", ideal->bubbleFraction)
     << " with equal stages";
  if (*kind != PipelineScheduleKind::Interleaved)
    os << " ((p-1)/(m+p-1) = " << q << "/" << micro + q << ")";
  os << "; " << llvm::format("%.4f", real->bubbleFraction)
     << " with this partition's FLOPs\n";
  os << "activations in flight (peak, microbatches):";
  for (int64_t s = 0; s < p; ++s)
    os << " stage " << s << " " << llvm::format("%g", ideal->peakInFlight[s])
       << (s + 1 < p ? "," : "\n");
  os << "programs (sends after the computation that produces them, receives "
        "before the one that needs them):\n";
  for (int64_t s = 0; s < p; ++s) {
    os << "  stage " << s << ":";
    for (auto [i, op] : llvm::enumerate((*programs)[s]))
      os << (i ? ", " : " ") << describePipelineOp(op, chunks);
    os << "\n";
  }
  std::string title =
      std::to_string(p) + " stages, " + pipelineScheduleName(*kind) + ", " +
      std::to_string(micro) + " microbatches" +
      (chunks ? ", " + std::to_string(v) + " virtual stages" : std::string());
  auto write = [&](const std::string &path, auto &&fn) -> LogicalResult {
    std::ofstream out(path);
    if (!out)
      return emitError(UnknownLoc::get(ctx)) << "cannot write '" << path << "'";
    fn(out);
    return success();
  };
  // One time unit: the largest chunk's forward, as FLOPs at 1 TFLOP/s per
  // token of a microbatch (a picture's scale, not a prediction).
  double unit = largest * (m.batchSize / (m.dataParallel * micro)) *
                static_cast<double>(m.seqLen) / 1e12;
  if (!traceOpt.empty() && failed(write(traceOpt, [&](std::ostream &out) {
        writePipelineTraceJson(*real, p, chunks, unit, out);
      })))
    return failure();
  if (!svgOpt.empty() && failed(write(svgOpt, [&](std::ostream &out) {
        writePipelineSvg(*ideal, p, chunks, title, out);
      })))
    return failure();
  return success();
}
