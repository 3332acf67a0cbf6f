//===- Trace.h - A run's timeline as a Chrome trace ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc train --trace FILE`: every step, every kernel of the step (with its
// op and location), evaluations and checkpoints, timed on the host's
// monotonic clock, written in Chrome's trace event format (opens in
// Perfetto or chrome://tracing; the same format as --emit=schedule's
// planned timeline). One process per track group (`pid` = rank), so the
// files of an MPI run's ranks share one clock and merge by concatenation.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_TRACE_H
#define GPTC_RUNTIME_TRACE_H

#include <chrono>
#include <string>
#include <vector>

namespace gptc::runtime {

/// `s` as the inside of a JSON string (quotes, backslashes and control
/// characters escaped).
std::string jsonEscape(const std::string &s);

class TraceRecorder {
public:
  explicit TraceRecorder(int pid) : pid(pid) {}
  /// Microseconds on the monotonic clock (shared by the processes of a
  /// machine).
  static double now() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  /// A slice [start, end) on track `tid` (0: the step, 1: its kernels, 2:
  /// a pipeline stage's computations and waits).
  void slice(std::string name, const char *category, double start, double end,
             int tid, std::string location = "");
  size_t size() const { return events.size(); }
  /// Writes the trace; false with `error` when the file cannot be written.
  bool write(const std::string &path, std::string &error) const;

private:
  struct Event {
    std::string name, location;
    const char *category;
    double start, end;
    int tid;
  };
  int pid;
  std::vector<Event> events;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_TRACE_H
