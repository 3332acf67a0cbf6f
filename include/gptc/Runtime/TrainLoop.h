//===- TrainLoop.h - A trainer once set up ----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The steps gptc train and gptc-runtime take with either trainer (Trainer,
// PipelineTrainer) once it is created and initialized or resumed, and how
// the processes of one node share its cores.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_TRAINLOOP_H
#define GPTC_RUNTIME_TRAINLOOP_H

#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Dataset.h"
#include "gptc/Runtime/Preemption.h"
#include "gptc/Runtime/Trainer.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace gptc::runtime {

/// A validation pass before the first step (where the options ask for
/// one), the steps, the final checkpoint; the leader prints, its lines
/// prefixed with `tool` ("gptc", "gptc-runtime"). With opts.stopOnSignal a
/// SIGTERM, SIGINT or SIGUSR1 stops the steps early (every rank after the
/// same one) and the checkpoint holds the steps done:
/// trainer.getStoppedBySignal() says so (the caller exits with
/// kPreemptedExitCode).
inline bool trainAndSave(TrainingRun &trainer, const TrainOptions &opts,
                         const Dataset &data, bool leader,
                         const std::string &tool, std::string &error) {
  if (opts.stopOnSignal)
    installPreemptionHandlers();
  // A file-size limit (ulimit -f) fails a checkpoint's write with EFBIG,
  // reported, the previous checkpoint left as it was, instead of killing
  // the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // Where the checkpoints go is writable and has room, before any work.
  if (leader && !opts.checkpointPath.empty()) {
    std::string warning;
    int64_t bytes = trainer.numParameters() * 12 + (int64_t(1) << 20);
    if (!checkCheckpointDirectory(opts.checkpointPath, bytes, error, warning))
      return false;
    if (!warning.empty())
      std::cerr << tool << ": warning: " << warning << "\n";
  }
  if (opts.evalInterval > 0 && trainer.getStep() == 0) {
    double val;
    if (!trainer.evaluate(data, val, error))
      return false;
    if (leader)
      std::cerr << "step     0/" << opts.steps << " | validation loss "
                << std::fixed << val << std::endl;
  }
  if (!trainer.train(data, std::cerr, error))
    return false;
  if (!trainer.saveCheckpoint(opts.checkpointPath, trainer.getStep(), error)) {
    error += trainer.lastGoodCheckpoint(opts.checkpointPath);
    return false;
  }
  if (leader && trainer.getStoppedBySignal())
    std::cerr << tool << ": " << signalName(trainer.getStoppedBySignal())
              << ": stopped after step " << trainer.getStep() << " of "
              << opts.steps << "; continue with --resume\n";
  if (leader)
    std::cerr << tool << ": wrote " << opts.checkpointPath << " (step "
              << trainer.getStep() << ")\n";
  return true;
}

/// Processes on one node share its cores (unless the user chose with
/// OMP_NUM_THREADS).
inline void shareCores(const Communicator &comm) {
  if (comm.size() < 2 || std::getenv("OMP_NUM_THREADS"))
    return;
  int local = comm.size();
  if (const char *n = std::getenv("MPI_LOCALNRANKS"))
    local = std::max(1, std::atoi(n));
  cpu::setNumThreads(std::max(
      1, static_cast<int>(std::thread::hardware_concurrency()) / local));
}

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_TRAINLOOP_H
