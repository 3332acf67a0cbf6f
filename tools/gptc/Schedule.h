//===- Schedule.h - gptc --emit=schedule -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_SCHEDULE_H
#define GPTC_TOOLS_GPTC_SCHEDULE_H

#include "mlir/Support/LLVM.h"

namespace mlir::gptc {
class ModelDescription;

/// Plans the description's pipeline (its mesh's pipeline axis, its
/// gradient-accumulation microbatches, --pipeline-schedule and
/// --virtual-stages) and prints the stages, each stage's program with its
/// sends and receives, the bubble and the activations in flight; writes
/// the timeline as a Chrome trace and an SVG when asked.
LogicalResult printPipelineSchedule(const ModelDescription &description,
                                    raw_ostream &os);
} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_SCHEDULE_H
