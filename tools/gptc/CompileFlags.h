//===- CompileFlags.h - gptc's flags for the compiler driver ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_COMPILEFLAGS_H
#define GPTC_TOOLS_GPTC_COMPILEFLAGS_H

#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/ModelSpec.h"

#include "llvm/Support/CommandLine.h"

#include <string>

namespace mlir::gptc {

/// cl's parser for an option of named values whose error names them
/// ("for the --zero-reduce option: takes 'step' or 'microbatch', got
/// 'bogus'") instead of LLVM's "Cannot find option named 'bogus'!".
template <typename T>
class NamedValueParser : public llvm::cl::parser<T> {
public:
  using llvm::cl::parser<T>::parser;
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef arg,
             T &value) {
    unsigned n = this->getNumOptions();
    for (unsigned i = 0; i < n; ++i)
      if (this->getOption(i) == arg) {
        value = this->Values[i].V.getValue();
        return false;
      }
    std::string names;
    for (unsigned i = 0; i < n; ++i)
      names += std::string(i == 0       ? ""
                           : i + 1 == n ? " or "
                                        : ", ") +
               "'" + this->getOption(i).str() + "'";
    return option.error("takes " + names + ", got '" + arg + "'");
  }
};

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

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_COMPILEFLAGS_H
