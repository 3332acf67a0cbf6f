//===- Schedule.h - gptc --emit=schedule -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_SCHEDULE_H
#define GPTC_TOOLS_GPTC_SCHEDULE_H

#include "gptc/Analysis/PipelineSchedule.h"

#include "mlir/Support/LLVM.h"

#include <vector>

namespace mlir::gptc {
class ModelDescription;

/// The description's pipeline as --pipeline-schedule and --virtual-stages
/// ask: its partition and each stage's program, checked to finish.
struct PipelinePlanning {
  PipelineScheduleKind kind;
  int64_t virtualStages, microbatches;
  PipelinePartition partition;
  std::vector<std::vector<PipelineOp>> programs;
};
FailureOr<PipelinePlanning> planPipeline(const ModelDescription &description);

/// Whether --pipeline-schedule, --virtual-stages or --pipeline-layers was
/// given.
bool pipelineOptionsGiven();

/// Plans the description's pipeline (its mesh's pipeline axis, its
/// gradient-accumulation microbatches, --pipeline-schedule and
/// --virtual-stages) and prints the stages, each stage's program with its
/// sends and receives, the bubble and the activations in flight; writes
/// the timeline as a Chrome trace and an SVG when asked.
LogicalResult printPipelineSchedule(const ModelDescription &description,
                                    raw_ostream &os);
} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_SCHEDULE_H
