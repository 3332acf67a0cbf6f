//===- Preemption.cpp - Stopping a run with a checkpoint --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Preemption.h"

#include <atomic>
#include <csignal>
#include <initializer_list>

using namespace gptc::runtime;

namespace {
std::atomic<int> requested{0};

extern "C" void onStopSignal(int sig) {
  int none = 0;
  if (requested.compare_exchange_strong(none, sig))
    return;
  // A second signal: the default action (the process ends by it).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
} // namespace

void gptc::runtime::installPreemptionHandlers() {
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  // Blocking calls (MPI's, reads) resume after the handler: the loop looks
  // at the request between steps.
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1})
    sigaction(sig, &action, nullptr);
}

int gptc::runtime::preemptionSignal() { return requested.load(); }

const char *gptc::runtime::signalName(int sig) {
  switch (sig) {
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGUSR1:
    return "SIGUSR1";
  default:
    return "a signal";
  }
}
