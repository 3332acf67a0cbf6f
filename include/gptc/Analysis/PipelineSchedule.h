//===- PipelineSchedule.h - Pipeline stages and their schedules -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Pipeline parallelism's plan, independent of the IR: the layers cut into
// chunks (stage s holds chunks s, s + p, ...: one per stage, or v virtual
// stages each for interleaving) balanced by their forward FLOPs with the
// embedding on the first and the head and loss on the last; each stage's
// program as an ordered list of computations and the sends and receives
// between them (GPipe, 1F1B, interleaved 1F1B over m microbatches); and a
// simulation of those programs that times them, finds the bubble and the
// activations each stage holds, and rejects programs that can deadlock.
// `gptc --emit=schedule` prints it (docs/Pipeline.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_PIPELINESCHEDULE_H
#define GPTC_ANALYSIS_PIPELINESCHEDULE_H

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gptc {

enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// "gpipe", "1f1b", "interleaved", "zb-h1"; nullopt for another name.
std::optional<PipelineScheduleKind> parsePipelineSchedule(const std::string &s);
const char *pipelineScheduleName(PipelineScheduleKind kind);

/// Whether `kind` runs each chunk's backward as two computations: the
/// gradient of its input (B, which the previous stage waits for) and the
/// gradients of its parameters (W, which waits for nobody) -- the
/// zero-bubble schedules.
bool splitsBackward(PipelineScheduleKind kind);

/// The layers cut into `chunks.size()` contiguous chunks; chunk c runs on
/// stage c % stages.
struct PipelinePartition {
  int64_t stages = 1, virtualStages = 1, layers = 0;
  /// Per chunk: its first layer and one past its last.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  /// Per chunk: forward FLOPs per token (layers, plus the embedding on
  /// chunk 0 and the final norm, head and loss on the last).
  std::vector<double> forwardCost;
};

/// Cuts `layers` layers of `layerCost` forward FLOPs each into stages x
/// virtualStages chunks, the embedding (`firstCost`) before the first and
/// the head (`lastCost`) after the last, minimizing the largest chunk's
/// cost (ties: earlier chunks take fewer layers). Uneven counts are
/// allowed; every chunk gets a layer. Fails with `error` when there are
/// more chunks than layers.
std::optional<PipelinePartition>
partitionPipeline(int64_t layers, int64_t stages, int64_t virtualStages,
                  double layerCost, double firstCost, double lastCost,
                  std::string &error);

/// One operation of a stage's program.
struct PipelineOp {
  /// BackwardInput and BackwardWeight: the two halves of a Backward under
  /// a zero-bubble schedule (splitsBackward).
  enum Kind {
    Forward,
    Backward,
    Send,
    Recv,
    BackwardInput,
    BackwardWeight
  } kind;
  /// A computation (not a message).
  bool computes() const { return kind != Send && kind != Recv; }
  int64_t microbatch = 0, chunk = 0;
  /// Send/Recv: the other stage and whether the message is the activation
  /// (forward) or its gradient (backward).
  int64_t peer = -1;
  bool gradient = false;
};

/// Each stage's program for `microbatches` microbatches under `kind`
/// (interleaved needs partition.virtualStages > 1 and microbatches a
/// multiple of the stages). Sends follow the computation that produces
/// them; receives precede the one that consumes them.
///
/// zb-h1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, the
/// handcrafted ZB-H1): 1F1B's order of forwards and input-gradient
/// backwards B, and each stage s defers its weight-gradient backwards W by
/// s microbatches (none on the first stage, p - 1 on the last), so the W
/// the last stages owe fill the cooldown that 1F1B leaves idle. With equal
/// F, B and W the bubble is (p - 1) of 3m + p - 1 units against 1F1B's
/// 3(p - 1) of 3m + 3(p - 1); every stage holds at most p microbatches'
/// activations (1F1B's first stage's peak).
std::optional<std::vector<std::vector<PipelineOp>>>
buildPipelinePrograms(const PipelinePartition &partition, int64_t microbatches,
                      PipelineScheduleKind kind, std::string &error);

/// A simulated run: each stage executes its program in order; a send does
/// not wait (the message is buffered), a receive waits for its message.
struct PipelineTimeline {
  struct Interval {
    int64_t stage;
    PipelineOp op; // Forward or Backward
    double start, end;
  };
  std::vector<Interval> intervals;
  double makespan = 0;
  /// 1 - busy time / (stages x makespan).
  double bubbleFraction = 0;
  /// Per stage: the most microbatches whose forward ran and backward did
  /// not (a split backward: whose W did not), in units of a whole stage's
  /// activations (a chunk counts 1/v).
  std::vector<double> peakInFlight;
  /// Every message: from and to which stage, the Send op, when it was sent
  /// and when its receiver took it.
  struct Message {
    int64_t from, to;
    PipelineOp op;
    double sent, received;
  };
  std::vector<Message> messages;
};

/// Where a deadlocked simulation stopped: the stage whose receive starts
/// the reported wait chain and that receive's index in its program.
struct PipelineStall {
  int64_t stage = -1;
  size_t index = 0;
};

/// Simulates `programs` with forward costs per chunk (`forwardCost`) and
/// backward costs twice those (a split backward's B and W once each). Fails
/// with `error` describing the wait cycle when the programs deadlock, or naming
/// a receive whose message no stage sends (and, with `stall`, where).
std::optional<PipelineTimeline>
simulatePipeline(const std::vector<std::vector<PipelineOp>> &programs,
                 const std::vector<double> &forwardCost, int64_t virtualStages,
                 std::string &error, PipelineStall *stall = nullptr);

/// "F3.1", "B0", "W0", "send act 2 -> 1", "recv grad 0 <- 2": an op as the
/// report prints it (the chunk after a dot when there are virtual stages).
std::string describePipelineOp(const PipelineOp &op, bool chunks);

/// The timeline as a Chrome trace (JSON, opens in Perfetto or
/// chrome://tracing): one track per stage, one slice per computation,
/// times in microseconds of `unitSeconds` per cost unit.
void writePipelineTraceJson(const PipelineTimeline &t, int64_t stages,
                            bool chunks, double unitSeconds, std::ostream &os);

/// The timeline as an SVG picture: a row per stage, forwards, backwards
/// (input gradients) and weight gradients in three colors, labeled with
/// their microbatch.
void writePipelineSvg(const PipelineTimeline &t, int64_t stages, bool chunks,
                      const std::string &title, std::ostream &os);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_PIPELINESCHEDULE_H
