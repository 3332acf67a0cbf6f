//===- Preemption.cpp - Stopping a run with a checkpoint --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Preemption.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <initializer_list>
#include <pthread.h>
#include <thread>

using namespace gptc::runtime;

namespace {
std::atomic<int> requested{0};
/// routeStopSignals's thread runs; installPreemptionHandlers arms it.
std::atomic<bool> routed{false}, armed{false};

sigset_t stopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1})
    sigaddset(&set, sig);
  return set;
}

/// Ends the process as `sig`'s default action does (from the routing
/// thread, where it is blocked).
[[noreturn]] void endBy(int sig) {
  std::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
  // (A signal whose default is to end the process does not return.)
  std::_Exit(128 + sig);
}

/// The routing thread: each stop signal, on this thread's own stack.
void takeStopSignals() {
  sigset_t set = stopSignals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
      continue;
    int none = 0;
    if (armed.load() && requested.compare_exchange_strong(none, sig))
      continue;
    endBy(sig);
  }
}

extern "C" void onStopSignal(int sig) {
  int none = 0;
  if (requested.compare_exchange_strong(none, sig))
    return;
  // A second signal: the default action (the process ends by it).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
} // namespace

void gptc::runtime::routeStopSignals() {
  if (routed.load())
    return;
  sigset_t set = stopSignals();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
    return;
  std::thread(takeStopSignals).detach();
  routed = true;
}

void gptc::runtime::installPreemptionHandlers() {
  if (routed.load()) {
    armed = true;
    return;
  }
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
