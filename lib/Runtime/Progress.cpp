//===- Progress.cpp - What a training run reports --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Progress.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;

/// "1:02:03" or "2:03".
static std::string clock(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream os;
  if (s >= 3600)
    os << s / 3600 << ":" << std::setw(2) << std::setfill('0')
       << (s % 3600) / 60 << ":";
  else
    os << s / 60 << ":";
  os << std::setw(2) << std::setfill('0') << s % 60;
  return os.str();
}

Progress::Progress(std::ostream &log, bool enabled, int64_t first, int64_t stop,
                   int64_t last, int64_t tokensPerStep, int64_t logInterval,
                   bool live, bool lossScaling)
    : log(log), enabled(enabled), first(first), stop(stop), last(last),
      tokensPerStep(tokensPerStep), logInterval(logInterval), live(live),
      lossScaling(lossScaling), start(std::chrono::steady_clock::now()),
      afterFirst(start), end(start) {}

bool Progress::openTable(const std::string &path, std::string &error) {
  if (!enabled)
    return true;
  table.open(path);
  if (!table) {
    error = "cannot write '" + path + "'";
    return false;
  }
  table << "step\tloss\tgrad_norm\tlr"
        << (lossScaling ? "\tskipped\tloss_scale" : "") << "\n"
        << std::setprecision(9);
  return true;
}

void Progress::step(const StepReport &r) {
  auto now = std::chrono::steady_clock::now();
  reached = r.step + 1;
  // The first step pays for page faults and cold caches; the steady rate
  // is measured from the end of it.
  if (r.step == first)
    afterFirst = now;
  if (!enabled)
    return;
  if (table.is_open()) {
    table << r.step << "\t" << r.loss << "\t" << r.gradNorm << "\t"
          << r.learningRate;
    if (lossScaling)
      table << "\t" << r.skipped << "\t" << r.lossScale.value_or(0.0);
    table << "\n";
  }

  // Tokens/s over this run, ETA for the rest.
  double elapsed = std::chrono::duration<double>(now - start).count();
  int64_t done = r.step + 1 - first;
  double tps = elapsed > 0 ? done * tokensPerStep / elapsed : 0;
  double eta = done ? elapsed / done * (stop - r.step - 1) : 0;
  std::ostringstream line;
  line << "step " << std::setw(5) << r.step + 1 << "/" << last << " | loss "
       << std::fixed << std::setprecision(4) << r.loss << " | lr "
       << std::scientific << std::setprecision(2) << r.learningRate
       << " | norm " << std::fixed << std::setprecision(2) << r.gradNorm
       << " | " << std::setprecision(0) << tps << " tok/s | ETA " << clock(eta);
  // fp16: a skipped step says so; the scale shown is the next step's.
  if (r.skipped)
    line << (lossScaling ? " | overflow: step skipped"
                         : " | NaN/Inf gradients: step skipped (nan_policy "
                           "SKIP)");
  if (r.lossScale && (r.skipped || lossScaling))
    line << " | loss scale " << std::defaultfloat << std::setprecision(6)
         << *r.lossScale;
  bool final = r.step + 1 == stop;
  bool logNow = (logInterval > 0 && ((r.step + 1) % logInterval == 0 || final ||
                                     r.step == first)) ||
                r.skipped;
  if (live)
    log << "\r" << line.str() << (logNow ? "\n" : "") << std::flush;
  else if (logNow)
    log << line.str() << "\n" << std::flush;
}

void Progress::validation(int64_t step, double loss) {
  if (enabled)
    log << "step " << std::setw(5) << step + 1 << "/" << last
        << " | validation loss " << std::fixed << std::setprecision(4) << loss
        << "\n"
        << std::flush;
}

void Progress::finish() {
  end = std::chrono::steady_clock::now();
  // Stopped early (a signal): the live line ends here.
  if (enabled && live && reached > first && reached < stop)
    log << "\n" << std::flush;
}

void Progress::summary() {
  if (!enabled)
    return;
  double total = std::chrono::duration<double>(end - start).count();
  double steady = std::chrono::duration<double>(end - afterFirst).count();
  int64_t steps = std::max<int64_t>(reached, first) - first;
  if (steps > 0) {
    log << "gptc: " << steps << " steps in " << std::fixed
        << std::setprecision(2) << total << " s";
    if (steps > 1 && steady > 0)
      log << "; " << std::setprecision(0)
          << (steps - 1) * tokensPerStep / steady
          << " tok/s after the first step";
    log << "\n" << std::flush;
  }
}

double Progress::secondsPerStep() const {
  int64_t steps = std::max<int64_t>(reached, first) - first;
  if (steps <= 0)
    return 0;
  if (steps == 1)
    return std::chrono::duration<double>(end - start).count();
  return std::chrono::duration<double>(end - afterFirst).count() /
         static_cast<double>(steps - 1);
}
