//===- Preemption.h - Stopping a run with a checkpoint ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What a cluster sends before it takes the machines back: SIGTERM (SLURM at
// its time limit or on preemption, Kubernetes, `kill`), SIGINT (Ctrl-C, an
// mpirun forwarding it) and SIGUSR1 (SLURM's `--signal=USR1@120`). The
// first asks the training loop to finish the step it is in and checkpoint;
// every rank stops after the same step (TrainingRun::train agrees on it),
// and gptc train exits with kPreemptedExitCode. A second signal ends the
// process at once, as the signal's default would.
//
// Where the signal arrives matters. A handler runs on the stack of
// whichever thread the kernel picks, and oneDNN's JIT GEMM kernels (2.6,
// Debian's; fixed upstream in 3.12, oneDNN#4845/#4855) point rsp into a
// heap workspace while they run: a signal frame pushed there corrupts the
// heap, and a dp=2 run stopped under load crashed 1 time in 3-6 inside
// causalAttentionGrad's GEMM. So the executables route these signals to a
// thread of their own (routeStopSignals, first thing in main): every other
// thread, the OpenMP pool's included, is created with them blocked, and
// that thread takes each one with sigwait, on its own stack.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PREEMPTION_H
#define GPTC_RUNTIME_PREEMPTION_H

namespace gptc::runtime {

/// gptc train's (and gptc-runtime's) exit status after a signal stopped
/// the run with a checkpoint: EX_TEMPFAIL, "try again" (--resume).
constexpr int kPreemptedExitCode = 75;

/// Blocks SIGTERM, SIGINT and SIGUSR1 in this thread (and so in every
/// thread it creates from now on) and starts the thread that takes them:
/// until installPreemptionHandlers, each ends the process as its default
/// action would. Call it first thing in main, before any other thread
/// exists (a thread that already runs would still take the signals).
void routeStopSignals();

/// From now on the first SIGTERM, SIGINT or SIGUSR1 is recorded (a second
/// ends the process by its default action): taken by routeStopSignals's
/// thread where it runs, else by a handler on whichever thread the kernel
/// picks.
void installPreemptionHandlers();

/// The signal that asked the run to stop, or 0.
int preemptionSignal();

/// "SIGTERM", "SIGINT", "SIGUSR1" (or "signal N").
const char *signalName(int signal);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PREEMPTION_H
