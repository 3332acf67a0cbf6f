//===- Schedule.h - gptc --emit=schedule -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_SCHEDULE_H
#define GPTC_TOOLS_GPTC_SCHEDULE_H

#include "gptc/Driver/Driver.h"

#include "mlir/Support/LLVM.h"

#include <vector>

namespace mlir::gptc {
class ModelDescription;

/// The description's pipeline as `options` ask (--pipeline-schedule,
/// --virtual-stages, --pipeline-layers): its partition and each stage's
/// program, checked to finish, the bubble and the activations in flight.
LogicalResult printPipelineSchedule(const ModelDescription &description,
                                    const CompileOptions &options,
                                    raw_ostream &os);
} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_SCHEDULE_H
