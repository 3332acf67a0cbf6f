//===- Session.h - Processes, backend, trainer of a run ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `gptc train`, `gptc-runtime` and the C API do between an artifact
// and its first step, in one place (RunSession): start the processes of
// the mesh (MPI) and share the cores among them, open the data, pick the
// backend each process runs on (the CPU's, the residency checker around
// it, or the GPU its rank on the node picks), make the trainer the
// artifact asks for (one program per device, or a pipeline's stages),
// resume or initialize it, train and save. What it has to say goes to a
// RunObserver: the tools print it in their own voice, the C API collects
// it. It links the CUDA runtime where the build has it, so it sits above
// both backends; it needs no compiler (gptc-runtime links it alone). The
// compiler's half, description to artifact, is the driver's TrainSession
// (gptc/Driver/TrainSession.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SESSION_H
#define GPTC_RUNTIME_SESSION_H

#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Dataset.h"
#include "gptc/Runtime/Device.h"
#include "gptc/Runtime/Trainer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gptc::runtime {

/// Where a process runs its program.
struct DeviceOptions {
  /// The CPU, or the CUDA runtime: a GPU (one per process, by its rank on
  /// the node: several pipeline stages may share one, a tensor axis needs
  /// one each) or the virtual CUDA device.
  DeviceKind kind = DeviceKind::CPU;
  bool cuda() const { return kind != DeviceKind::CPU; }
  /// The CPU's executor behind the residency checker (`gptc train
  /// --check-residency`); ignored on a GPU.
  bool checkResidency = false;
};

/// The processes of a run on `devices` devices: an MPI communicator when
/// there are several, when `mpi` asks for one (a pipeline always runs
/// under MPI) or when an MPI launcher started this process (so that a
/// size that does not match is reported, not run N times); otherwise null
/// (one process). Fails when MPI does not start or runs another number of
/// processes than `devices` (`error` names `mpirun -np <devices>`; the
/// communicator is kept so that the caller can print once and abort all).
/// `devices` 0 checks no count (the trainer checks it against the
/// artifact's mesh).
bool startProcesses(int64_t devices, bool mpi,
                    std::unique_ptr<Communicator> &comm, std::string &error);

/// Makes `kind` the device this process runs on, before anything is
/// compiled for it: the virtual CUDA device's stand-ins chosen, a GPU's
/// presence checked. Fails naming why (a build without the CUDA runtime,
/// no GPU).
bool prepareDevice(DeviceKind kind, std::string &error);

/// This process's run of `program`: its backend (null for the CPU's own
/// executor, the residency checker around it, or the GPU its rank on the
/// node picks), the trainer the program needs (its pipeline's stages when
/// it has a pipeline plan, else one program per device, with `initial` as
/// the parameters' initial values: an imported model's weights; a pipeline
/// takes none), then resumed from `options.checkpointPath` (`resume`) or
/// initialized (every parameter from its init, the optimizer state zero).
/// Null with `error` set.
std::unique_ptr<TrainingRun>
openTrainingRun(const program::Program &program, const TrainOptions &options,
                const DeviceOptions &device, Communicator *comm,
                std::map<std::string, std::string> initial, bool resume,
                std::string &error);

/// The data gptc trains on when none is named: the GPL-3 text every
/// Debian system ships (bytes are tokens).
extern const char *const kDefaultDataPath;

/// Why --profile does not go with a pipeline (RunSession::open refuses it;
/// gptc train says so before it compiles).
extern const char *const kPipelineProfileRefusal;

/// What a run has to say, in its caller's voice: `gptc train` and
/// `gptc-runtime` print it ("gptc: ..."), the C API collects it.
class RunObserver {
public:
  virtual ~RunObserver();
  /// A line about the run, the leader's (the threads, the model and its
  /// data, what a resumed run accepted, the processes, the memory).
  virtual void note(const std::string &line) = 0;
  /// An error: one message ("rank R: " before one rank's own).
  virtual void error(const std::string &message) = 0;
};

/// The settings of a run that its artifact does not hold: gptc train's and
/// gptc-runtime's flags, the C API's options. Unset: the artifact's.
struct RunOptions {
  /// Training data (several files comma-separated; Dataset::open) and the
  /// validation data ("": the last tenth of the training data).
  std::string data = kDefaultDataPath;
  std::string valData;
  /// Whether the session opens `data` itself (the tools); the C API's
  /// calls name their own.
  bool openData = true;
  /// The checkpoint directory; "": `<model>.ckpt`.
  std::string checkpoint;
  /// Stop (and checkpoint) after this many steps in all.
  std::optional<int64_t> stopAt;
  std::optional<int64_t> evalInterval, checkpointInterval, keepCheckpoints;
  /// A checkpoint once this many minutes have passed since the last; 0:
  /// none by time.
  double checkpointMinutes = 30;
  /// --resume, --resume-changed, --overwrite.
  bool resume = false, resumeChanged = false, overwrite = false;
  /// Whether a checkpoint of another schedule length may be resumed (the
  /// C API refuses it unless asked), and what the refusal advises.
  bool stepsChangeResumable = true;
  std::string resumeAdvice;
  /// TrainOptions's: the watchdog, non-blocking collectives.
  double collectiveTimeout = 20;
  bool overlapCollectives = true;
  /// A progress line every N steps (0: none); a live line on a terminal.
  int64_t logInterval = 10;
  bool liveProgress = false;
  /// --dump-dir, --trace, --profile, --profile-json.
  std::string dumpDir, tracePath, profileJson;
  bool profile = false;
  /// SIGTERM, SIGINT, SIGUSR1: checkpoint after the step and exit 75.
  bool stopOnSignal = true;
  DeviceOptions device;
  /// Testing (--inject-overflow): a gradient infinite at this 1-based
  /// step (0: never) on this rank.
  int64_t injectOverflowStep = 0;
  int64_t injectOverflowRank = 0;
  /// An error on one rank ends every rank (MPI_Abort), so that none waits
  /// in a collective (the tools); false: it is returned (the C API).
  bool endRanksOnError = true;
  /// The run's peak resident memory and what training added to it, noted
  /// at the end (gptc train: --emit=summary's "training memory" predicts
  /// it).
  bool reportMemory = false;
};

/// One process's part of a training run, from its processes to its last
/// checkpoint (every process makes the same calls in the same order):
///   connect (the processes, the cores) -> open (the program: data,
///   options, trainer) -> run (train, save).
/// Each step fails with its error reported to the observer once (fail).
class RunSession {
public:
  /// `tool` leads the training loop's own lines ("gptc").
  RunSession(RunObserver &observer, RunOptions options, std::string tool);
  ~RunSession();

  /// The processes of a mesh of `devices` devices (startProcesses; `mpi`
  /// for a pipeline, which runs under MPI even on one device; 0: the
  /// trainer checks the count against the artifact's mesh) and this
  /// rank's share of the cores (noted).
  bool connect(int64_t devices, bool mpi);
  /// The run of `program` (its training settings, then the options'): the
  /// data, the checkpoint's settings checked when resuming, the trainer
  /// (with `initial` as the parameters' initial values: an imported
  /// model's weights), resumed or initialized; what a resumed run accepted
  /// is noted.
  bool open(program::Program program,
            std::map<std::string, std::string> initial = {});
  /// Trains to the end (or to a stop signal), checkpointing as the options
  /// say: 0, kPreemptedExitCode, or 1 with the error reported.
  int run();

  /// gptc-runtime's start, with no compiler: the artifact at `path` read
  /// and checked (its format version, its training settings, its code
  /// against options.device), its processes (MPI under a launcher, for any
  /// mesh; a pipeline always), the run opened and described in notes.
  /// Null with the error reported.
  static std::unique_ptr<RunSession> fromArtifact(const std::string &path,
                                                  RunOptions options,
                                                  RunObserver &observer,
                                                  std::string tool);

  /// The data at `path` (several files comma-separated; "": the default
  /// text) for this run's model: the C API's calls, which name their own.
  bool openDataset(const std::string &path, Dataset &data,
                   std::string &error) const;

  /// Reports `message` as every rank's (printed once, by rank 0) or this
  /// rank's own, then, under several processes with endRanksOnError, ends
  /// the ranks. Returns 1.
  int fail(const std::string &message, bool everyRank = false);
  /// Ends the other ranks after an error this rank already reported (a
  /// compile error's diagnostics).
  int abort();

  bool leader() const { return !comm || comm->rank() == 0; }
  int64_t processes() const { return comm ? comm->size() : 1; }
  Communicator *communicator() { return comm.get(); }
  TrainingRun &trainer() { return *run_; }
  const TrainingRun &trainer() const { return *run_; }
  TrainOptions &trainOptions() { return train; }
  const TrainOptions &trainOptions() const { return train; }
  const RunOptions &options() const { return runOptions; }
  const Dataset &data() const { return dataset; }
  const program::Program &program() const { return artifact; }
  RunObserver &observer() { return sink; }

private:
  RunObserver &sink;
  RunOptions runOptions;
  std::string tool;
  /// Destroyed last (MPI is finalized with it).
  std::unique_ptr<Communicator> comm;
  program::Program artifact;
  TrainOptions train;
  Dataset dataset;
  std::unique_ptr<TrainingRun> run_;
  /// --reportMemory: the compiler's peak and the memory before training.
  int64_t compilePeak = 0, before = 0;
  bool trainingPeak = false;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_SESSION_H
