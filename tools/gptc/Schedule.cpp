//===- Schedule.cpp - gptc --emit=schedule ---------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The report of a pipeline's plan. Stage costs are forward FLOPs per token
// (a layer: 2 x its parameters + 4 T C for attention; the last stage adds
// the head's 2 V C), backwards twice their forwards (a zero-bubble
// schedule's input and weight halves once each), sends free. The bubble is
// printed twice: for equal stages (the schedule's own, (p-1) / (m+p-1) for
// GPipe and 1F1B, (p-1) / (3m+p-1) for ZB-H1) and for this partition's
// FLOPs; a zero-bubble schedule's beside 1F1B's for the same microbatches.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include "CompileFlags.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Frontend/ModelSpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <optional>
#include <sstream>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::opt<std::string>
    traceOpt("schedule-trace",
             cl::desc("Write the schedule's timeline as a Chrome trace "
                      "(JSON; opens in Perfetto)"),
             cl::value_desc("file"), cl::init(""),
             cl::cat(pipelineOptionCategory()));
static cl::opt<std::string>
    svgOpt("schedule-svg", cl::desc("Write the timeline as an SVG picture"),
           cl::value_desc("file"), cl::init(""),
           cl::cat(pipelineOptionCategory()));

LogicalResult mlir::gptc::printPipelineSchedule(const ModelDescription &desc,
                                                const CompileOptions &options,
                                                raw_ostream &os) {
  Location meshLoc = desc.locate({{"mesh"}});
  MLIRContext *ctx = meshLoc.getContext();
  const ModelConfig &m = desc.getConfig();
  FailureOr<PipelinePlanning> plan = planPipeline(desc, options);
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
  // A zero-bubble schedule's bubble beside 1F1B's at the same microbatches
  // and partition.
  std::optional<PipelineTimeline> base, baseReal;
  if (splitsBackward(*kind)) {
    auto baseline = buildPipelinePrograms(
        *partition, micro, PipelineScheduleKind::OneFOneB, error);
    if (!baseline)
      return emitError(meshLoc) << error;
    base = simulatePipeline(*baseline, equal, v, error);
    baseReal = simulatePipeline(*baseline, flops, v, error);
    if (!base || !baseReal)
      return emitError(meshLoc) << error;
  }
  int64_t q = p - 1;
  os << "bubble fraction: " << llvm::format("%.4f", ideal->bubbleFraction)
     << " with equal stages";
  if (*kind == PipelineScheduleKind::GPipe ||
      *kind == PipelineScheduleKind::OneFOneB)
    os << " ((p-1)/(m+p-1) = " << q << "/" << micro + q << ")";
  // ZB-H1 with m >= p: F, B and W one unit each, (p-1) idle units a stage.
  if (*kind == PipelineScheduleKind::ZeroBubbleH1 && micro >= p)
    os << " ((p-1)/(3m+p-1) = " << q << "/" << 3 * micro + q << ")";
  if (base)
    os << ", 1f1b's " << llvm::format("%.4f", base->bubbleFraction);
  os << "; " << llvm::format("%.4f", real->bubbleFraction)
     << " with this partition's FLOPs";
  if (baseReal)
    os << ", 1f1b's " << llvm::format("%.4f", baseReal->bubbleFraction);
  os << "\n";
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
