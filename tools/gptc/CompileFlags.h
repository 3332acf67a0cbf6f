//===- CompileFlags.h - gptc's flags for the compiler driver ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_COMPILEFLAGS_H
#define GPTC_TOOLS_GPTC_COMPILEFLAGS_H

#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/ModelSpec.h"

namespace llvm::cl {
class OptionCategory;
} // namespace llvm::cl

namespace mlir::gptc {

/// "gptc options": the category gptc's --help shows first.
llvm::cl::OptionCategory &gptcOptionCategory();
/// "gptc train options": gptc train's (and --steps, which --emit=artifact
/// takes too).
llvm::cl::OptionCategory &trainOptionCategory();
/// "gptc pipeline options": the pipeline's schedule and its pictures.
llvm::cl::OptionCategory &pipelineOptionCategory();

/// The compilation the command line asks for (--device, --cuda-chip,
/// --bucket-mb, --gemm-epilogues, --zero-reduce, the pipeline's flags);
/// an error is printed ("gptc: error: ...").
FailureOr<CompileOptions> getCompileOptions();

/// The settings the command line gives in place of the description's: the
/// mesh and parallel ones (--mesh, --zero-stage, --grad-accum,
/// --sequence-parallel, --recompute) and the learning rate's.
FailureOr<DescriptionOverrides> getDescriptionOverrides();
/// Adds the learning-rate flags (--lr, --warmup-steps, --lr-decay,
/// --min-lr-ratio) to `overrides` (what a plan chose, under --mesh auto).
LogicalResult addScheduleFlags(DescriptionOverrides &overrides);
/// --mesh auto: gptc plan's first plan.
bool isMeshAuto();
/// A --mesh other than auto was given (gptc plan prices that plan).
bool isMeshGiven();
/// Whether any parallel or pipeline setting besides --mesh was given.
bool explicitParallelOptions();
/// --steps, where given: the schedule's length, compiled into the step.
std::optional<int64_t> stepsFlag();
/// Set by --mesh auto when its plan reduce-scatters every microbatch.
void setPlanReducesEachMicrobatch(bool each);

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_COMPILEFLAGS_H
