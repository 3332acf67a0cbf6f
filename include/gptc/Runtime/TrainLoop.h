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
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace gptc::runtime {

/// Before the first step: `dir` (`flag`'s, e.g. --dump-dir) exists or is
/// created, and a file can be written in it (written and removed); false
/// with `error` naming the path and the system's reason otherwise.
bool prepareOutputDirectory(const std::string &dir, const std::string &flag,
                            std::string &error);
/// Before the first step: the file `path` (`flag`'s, e.g. --trace) can be
/// written (opened without truncating it; a file this check creates is
/// removed again).
bool checkOutputFile(const std::string &path, const std::string &flag,
                     std::string &error);

/// --dump-dir: appends "STEP\tLOSS" (9 significant digits) to
/// DIR/validation.tsv, the file's header first (the leader's; the progress
/// line rounds to 4 decimals).
bool appendValidation(const std::string &dir, int64_t step, double loss,
                      std::string &error);

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
  // A resumed run with no step left to take says so, instead of
  // rewriting its checkpoint (the leader; its error ends every rank).
  int64_t last =
      opts.stopAfter >= 0 ? std::min(opts.stopAfter, opts.steps) : opts.steps;
  if (leader && opts.resumed && trainer.getStep() >= last) {
    error = "the checkpoint '" + opts.checkpointPath + "' is at step " +
            std::to_string(trainer.getStep()) + " and the run ends at step " +
            std::to_string(last) +
            ": nothing is left to train (--steps sets where the run ends)";
    return false;
  }
  // A fresh run does not write into another run's checkpoints.
  if (leader && !opts.resumed && !opts.checkpointPath.empty()) {
    std::string existing = existingCheckpoints(opts.checkpointPath);
    if (!existing.empty() && !opts.overwrite) {
      error = "'" + opts.checkpointPath + "' already holds checkpoints (" +
              existing +
              "): continue that run with --resume, start this one "
              "elsewhere with --checkpoint, or replace them with --overwrite";
      return false;
    }
    if (!existing.empty()) {
      if (!removeCheckpoints(opts.checkpointPath, error))
        return false;
      std::cerr << tool << ": --overwrite: removed the checkpoints at "
                << opts.checkpointPath << " (" << existing << ")\n";
    }
  }
  // Where the dumps and the trace go is writable, before any work.
  if (leader && !opts.dumpDir.empty() &&
      !prepareOutputDirectory(opts.dumpDir, "--dump-dir", error))
    return false;
  // The dumps' tables are this run's (as steps.tsv).
  if (leader && !opts.dumpDir.empty())
    std::remove((opts.dumpDir + "/validation.tsv").c_str());
  if (leader && !opts.tracePath.empty() &&
      !checkOutputFile(opts.tracePath, "--trace", error))
    return false;
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
    if (leader && !opts.dumpDir.empty() &&
        !appendValidation(opts.dumpDir, 0, val, error))
      return false;
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

/// Sets the CPU runtime's threads for this rank (cpu/Cores.h): the cores
/// of its affinity mask, shared with the other ranks of its host that
/// have the same mask, and the host's cgroup quota shared by all of its
/// ranks; OMP_NUM_THREADS, where set, decides instead. Collective over
/// `comm` (null: one process). Returns
/// a line for the leader to print: "2 threads per rank: 2 cores in the
/// affinity mask" (with the sharing), or "" on error.
std::string shareCores(Communicator *comm, std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_TRAINLOOP_H
