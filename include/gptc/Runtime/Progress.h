//===- Progress.h - What a training run reports ----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The trainer's output on rank 0: one line per step (live on a terminal,
// every `logInterval` steps otherwise, and always for a skipped step), the
// validation losses, `steps.tsv` for reference checks, and the summary at
// the end (the rate after the first step, where the step's time went).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PROGRESS_H
#define GPTC_RUNTIME_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

namespace gptc::runtime {

/// What one optimizer step reports.
struct StepReport {
  int64_t step = 0; ///< 0-based
  double loss = 0, gradNorm = 0, learningRate = 0;
  /// fp16: the step's gradients overflowed and the update was skipped.
  bool skipped = false;
  /// fp16: the loss scale the next step uses.
  std::optional<double> lossScale;
};

class Progress {
public:
  /// A run of steps [first, stop) of a schedule of `last` steps, each of
  /// `tokensPerStep` tokens; `lossScaling`: the steps report fp16's loss
  /// scale. Prints nothing unless `enabled` (rank 0).
  Progress(std::ostream &log, bool enabled, int64_t first, int64_t stop,
           int64_t last, int64_t tokensPerStep, int64_t logInterval, bool live,
           bool lossScaling);

  /// Writes every step's loss, gradient norm and learning rate to `path`
  /// (with loss scaling, also whether it was skipped and the scale).
  bool openTable(const std::string &path, std::string &error);
  void step(const StepReport &report);
  void validation(int64_t step, double loss);
  /// The steps are done: stops the clock.
  void finish();
  /// "N steps in S s; R tok/s after the first step".
  void summary();
  /// The wall time of a step after the first (of the only one, when there
  /// was one).
  double secondsPerStep() const;

private:
  std::ostream &log;
  bool enabled;
  int64_t first, stop, last, tokensPerStep, logInterval;
  /// One past the last step reported (the steps run: reached - first).
  int64_t reached = 0;
  bool live, lossScaling;
  std::ofstream table;
  std::chrono::steady_clock::time_point start, afterFirst, end;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PROGRESS_H
