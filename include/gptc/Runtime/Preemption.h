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
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PREEMPTION_H
#define GPTC_RUNTIME_PREEMPTION_H

namespace gptc::runtime {

/// gptc train's (and gptc-runtime's) exit status after a signal stopped
/// the run with a checkpoint: EX_TEMPFAIL, "try again" (--resume).
constexpr int kPreemptedExitCode = 75;

/// Catches SIGTERM, SIGINT and SIGUSR1 from now on (the first of them is
/// recorded; a second restores the default action and re-raises).
void installPreemptionHandlers();

/// The signal that asked the run to stop, or 0.
int preemptionSignal();

/// "SIGTERM", "SIGINT", "SIGUSR1" (or "signal N").
const char *signalName(int signal);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PREEMPTION_H
