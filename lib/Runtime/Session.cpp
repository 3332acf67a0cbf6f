//===- Session.cpp - Processes, backend, trainer of a run -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Session.h"

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/PipelineTrainer.h"
#include "gptc/Runtime/Preemption.h"
#include "gptc/Runtime/ProcessMemory.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/TrainLoop.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#ifdef GPTC_HAVE_CUDA
#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/CUDA/CudaBackend.h"
#endif

namespace gptc::runtime {

bool startProcesses(int64_t devices, bool mpi,
                    std::unique_ptr<Communicator> &comm, std::string &error) {
  comm.reset();
  if (devices <= 1 && !mpi && !launchedByMpi())
    return true;
  comm = createMpiCommunicator(nullptr, nullptr);
  if (!comm) {
    error = "MPI did not start";
    return false;
  }
  if (devices > 0 && comm->size() != devices) {
    error = "the mesh has " + std::to_string(devices) + " devices but " +
            std::to_string(comm->size()) +
            " processes run it: use mpirun -np " + std::to_string(devices);
    return false;
  }
  return true;
}

bool prepareDevice(DeviceKind kind, std::string &error) {
  if (kind == DeviceKind::CPU)
    return true;
#ifdef GPTC_HAVE_CUDA
  std::string why;
  if (kind == DeviceKind::VirtualCUDA && !cuda::useVirtualDevice(why)) {
    error = "--device virtual-cuda: " + why;
    return false;
  }
  return cudaDeviceAvailable(error);
#else
  error = std::string("--device ") + deviceKindName(kind) +
          ": this build has no CUDA runtime (no CUDA toolkit was found when "
          "it was built)";
  return false;
#endif
}

/// The backend `device` asks for: null for the CPU's own executor, or
/// null with `error` set when it cannot start.
static std::unique_ptr<Backend> createBackend(const program::Program &program,
                                              const DeviceOptions &device,
                                              Communicator *comm,
                                              std::string &error) {
  error.clear();
  if (device.cuda()) {
#ifdef GPTC_HAVE_CUDA
    int gpu = comm ? localDeviceIndex(comm->rank(), cudaDeviceCount()) : 0;
    // A communicator of one process makes no NCCL communicator.
    return createCudaBackend(program, gpu, error,
                             comm && comm->size() > 1 ? comm : nullptr);
#else
    error = "--device cuda: this build has no CUDA runtime";
    return nullptr;
#endif
  }
  if (!device.checkResidency)
    return nullptr;
  std::unique_ptr<Backend> cpu = createCpuBackend(program, error);
  return cpu ? createResidencyCheckingBackend(std::move(cpu)) : nullptr;
}

std::unique_ptr<TrainingRun>
openTrainingRun(const program::Program &program, const TrainOptions &options,
                const DeviceOptions &device, Communicator *comm,
                std::map<std::string, std::string> initial, bool resume,
                std::string &error) {
  std::unique_ptr<Backend> backend =
      createBackend(program, device, comm, error);
  if (!backend && !error.empty())
    return nullptr;
  std::unique_ptr<TrainingRun> run;
  if (program.has_pipeline())
    run = PipelineTrainer::create(program, options, error, comm,
                                  std::move(backend));
  else
    run = Trainer::create(program, options, error, comm, std::move(backend));
  if (!run)
    return nullptr;
  if (!initial.empty() && !run->setInitialValues(std::move(initial), error))
    return nullptr;
  if (resume) {
    if (!run->loadCheckpoint(options.checkpointPath, error))
      return nullptr;
  } else {
    run->initialize();
  }
  return run;
}

const char *const kDefaultDataPath = "/usr/share/common-licenses/GPL-3";
const char *const kPipelineProfileRefusal =
    "--profile times the kernels of one program; a pipeline's stages and "
    "their waits are timed by --trace (docs/Pipeline.md)";

RunObserver::~RunObserver() = default;

RunSession::RunSession(RunObserver &observer, RunOptions options,
                       std::string tool)
    : sink(observer), runOptions(std::move(options)), tool(std::move(tool)) {}

RunSession::~RunSession() {
  // The trainer before the communicator it may hold.
  run_.reset();
}

int RunSession::fail(const std::string &message, bool everyRank) {
  bool many = comm && comm->size() > 1;
  if (!comm) {
    // One process, or a rank before the processes connect: under an MPI
    // launcher every rank reads the same command line and files and finds
    // the same error, and rank 0 says it.
    if (launcherRank() <= 0 || !runOptions.endRanksOnError)
      sink.error(message);
    return 1;
  }
  // The message is one write, so that ranks' lines do not interleave.
  if (!everyRank || !many || comm->rank() == 0 || !runOptions.endRanksOnError)
    sink.error((many && !everyRank
                    ? "rank " + std::to_string(comm->rank()) + ": "
                    : std::string()) +
               message);
  if (many && runOptions.endRanksOnError) {
    if (everyRank) {
      // Every rank stops here: each ends normally (MPI finalized as the
      // communicator goes), so the launcher forwards rank 0's message
      // before it ends the job. (An abort could end the launcher first:
      // 1 run in 30 printed nothing.)
      char done = 0;
      std::string ignored;
      if (comm->broadcast(&done, 1, {comm->size()}, {0}, ignored))
        return 1;
    }
    comm->abort(1);
  }
  return 1;
}

int RunSession::abort() {
  if (comm && comm->size() > 1 && runOptions.endRanksOnError)
    comm->abort(1);
  return 1;
}

bool RunSession::connect(int64_t devices, bool mpi) {
  std::string error;
  bool started = startProcesses(devices, mpi, comm, error);
  if (!started) {
    // Without a communicator no rank can tell the others: each says it
    // (rank 0 alone under a launcher, fail).
    fail(!comm && mpi ? "a pipeline runs under MPI, and MPI did not start"
                      : error,
         /*everyRank=*/true);
    return false;
  }
  std::string threads = shareCores(comm.get(), error);
  if (threads.empty())
    return fail(error), false;
  if (leader())
    sink.note(threads);
  return true;
}

/// --resume: whether the checkpoint's step and settings let this run
/// continue it (the same on every rank, so checked before the ranks load
/// their blocks, where an error is one rank's).
static bool checkResumable(const TrainOptions &opts, std::string &error) {
  auto reader = CheckpointReader::open(opts.checkpointPath, error);
  std::string notes;
  return reader && reader->checkSettings(opts.recipe, opts.model, opts.steps,
                                         opts.resumePolicy, notes, error);
}

bool RunSession::open(program::Program program,
                      std::map<std::string, std::string> initial) {
  artifact = std::move(program);
  const RunOptions &o = runOptions;
  // The artifact's settings, then the options that replace them.
  train = TrainOptions::fromProgram(artifact);
  if (o.stopAt) {
    if (*o.stopAt > train.steps)
      return fail("--stop-at-step " + std::to_string(*o.stopAt) +
                      " is past the artifact's last step (" +
                      std::to_string(train.steps) + ")",
                  /*everyRank=*/true),
             false;
    train.stopAfter = *o.stopAt;
  }
  if (o.evalInterval)
    train.evalInterval = *o.evalInterval;
  if (o.keepCheckpoints)
    train.keepCheckpoints = static_cast<int>(*o.keepCheckpoints);
  if (o.checkpointInterval)
    train.checkpointInterval = *o.checkpointInterval;
  train.checkpointMinutes = o.checkpointMinutes;
  train.stopOnSignal = o.stopOnSignal;
  if (!o.checkpoint.empty())
    train.checkpointPath = o.checkpoint;
  train.resumed = o.resume;
  train.resumePolicy.anyChange = o.resumeChanged;
  train.resumePolicy.stepsChange = o.stepsChangeResumable;
  if (!o.resumeAdvice.empty())
    train.resumePolicy.whatToDo = o.resumeAdvice;
  train.overwrite = o.overwrite;
  train.collectiveTimeout = o.collectiveTimeout;
  train.overlapCollectives = o.overlapCollectives;
  train.logInterval = o.logInterval;
  train.liveProgress = o.liveProgress;
  train.dumpDir = o.dumpDir;
  train.profile = o.profile || !o.profileJson.empty();
  train.profileJson = o.profileJson;
  train.tracePath = o.tracePath;
  train.injectOverflowStep = o.injectOverflowStep - 1;
  train.injectOverflowRank = static_cast<int>(o.injectOverflowRank);

  std::string error;
  if (train.profile && artifact.has_pipeline())
    return fail(kPipelineProfileRefusal, /*everyRank=*/true), false;
  if (o.openData) {
    if (!Dataset::open(o.data, o.valData, train.seqLen, train.vocab, dataset,
                       error))
      return fail(error), false;
    train.recipe.emplace_back("data", dataset.identity());
  }
  if (o.resume && !checkResumable(train, error))
    return fail(error, /*everyRank=*/true), false;
  if (o.injectOverflowStep > 0 && o.injectOverflowRank >= processes())
    return fail("--inject-overflow names rank " +
                std::to_string(o.injectOverflowRank) + " of a run of " +
                std::to_string(processes()) + " processes"),
           false;
  if (o.reportMemory) {
    // What training adds to the process: measured from here, where the
    // compiler has finished (its peak kept aside, its freed heap given
    // back, so that training's allocations count whatever the compiler
    // freed) and the training state is not yet allocated.
    compilePeak = peakResidentBytes();
    returnFreeHeap();
    before = residentBytes();
    trainingPeak = compilePeak > 0 && before > 0 && resetPeakResident();
  }
  run_ = openTrainingRun(artifact, train, o.device, comm.get(),
                         o.resume ? std::map<std::string, std::string>()
                                  : std::move(initial),
                         o.resume, error);
  if (!run_)
    return fail(error), false;
  if (o.resume && leader()) {
    sink.note("resuming from " + train.checkpointPath + " at step " +
              std::to_string(run_->getStep()));
    std::istringstream notes(run_->getResumeNotes());
    for (std::string line; std::getline(notes, line);)
      if (!line.empty())
        sink.note(line);
  }
  return true;
}

bool RunSession::openDataset(const std::string &path, Dataset &data,
                             std::string &error) const {
  return Dataset::open(path.empty() ? kDefaultDataPath : path, "", train.seqLen,
                       train.vocab, data, error);
}

/// "1.5 MiB".
static std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / 1048576.0);
  return text;
}

int RunSession::run() {
  std::string error;
  if (comm && comm->size() > 1) {
    // The leader says which process each rank is: a launcher names a dead
    // rank by its PID. (The GPU each rank drives, "cuda:1"; the CPU's
    // threads say the rest.)
    std::string device = run_->device();
    device =
        device.rfind("cpu", 0) == 0 ? "" : device.substr(0, device.find(' '));
    std::string text;
    if (!describeProcesses(*comm, device, text, error))
      return fail(error);
    if (comm->rank() == 0)
      sink.note("processes: " + text);
  }
  if (!trainAndSave(*run_, train, dataset, leader(), tool, error))
    return fail(error, run_->getErrorOnEveryRank());
  if (runOptions.reportMemory && leader()) {
    // The whole run's peak (compilation, training and the checkpoint) and
    // what training added to the memory the compiler and the libraries
    // held when it began.
    int64_t peak = peakResidentBytes();
    if (peak > 0) {
      int64_t whole = trainingPeak ? std::max(peak, compilePeak) : peak;
      std::string line = "peak resident memory " + std::to_string(whole) +
                         " bytes (" + mib(whole) + " MiB)";
      if (trainingPeak)
        line += "; training added " + std::to_string(peak - before) +
                " bytes (" + mib(peak - before) + " MiB) to the " +
                mib(before) + " MiB of the compiler and libraries";
      sink.note(line);
    }
  }
  return run_->getStoppedBySignal() ? kPreemptedExitCode : 0;
}

/// Reads the artifact at `path` into `program`, checked for this runtime
/// and `device`.
static bool readArtifact(const std::string &path, DeviceKind device,
                         program::Program &program, std::string &error) {
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = "cannot open '" + path + "'";
      return false;
    }
    if (!program.ParseFromIstream(&in)) {
      error = "'" + path + "' is not a gptc artifact";
      return false;
    }
  }
  if (program.format_version() != kProgramFormatVersion) {
    error = "'" + path + "' has format version " +
            std::to_string(program.format_version()) + "; this runtime reads " +
            std::to_string(kProgramFormatVersion);
    return false;
  }
  if (!program.has_train()) {
    error = "'" + path +
            "' has no training settings: make it with gptc MODEL "
            "--emit=artifact";
    return false;
  }
  bool cuda = device != DeviceKind::CPU;
  if (cuda && !program.has_cuda()) {
    error = "'" + path +
            "' holds CPU code: compile it with --emit=artifact --device=" +
            deviceKindName(device);
    return false;
  }
  bool virtualImage = program.cuda().format() == program::CUDA_IMAGE_HOST;
  if (!cuda && program.has_cuda()) {
    error = "'" + path + "' holds GPU code: run it with --device " +
            (virtualImage ? "virtual-cuda" : "cuda");
    return false;
  }
  if (cuda && virtualImage != (device == DeviceKind::VirtualCUDA)) {
    error = "'" + path + "' was compiled for " +
            (virtualImage ? "the virtual CUDA device: run it with --device "
                            "virtual-cuda"
                          : "a GPU: the virtual CUDA device runs artifacts "
                            "compiled with --device virtual-cuda");
    return false;
  }
  return true;
}

std::unique_ptr<RunSession> RunSession::fromArtifact(const std::string &path,
                                                     RunOptions options,
                                                     RunObserver &observer,
                                                     std::string tool) {
  auto session = std::make_unique<RunSession>(observer, std::move(options),
                                              std::move(tool));
  const RunOptions &o = session->runOptions;
  program::Program program;
  std::string error;
  if (!readArtifact(path, o.device.kind, program, error) ||
      !prepareDevice(o.device.kind, error)) {
    session->fail(error);
    return nullptr;
  }
  // A pipeline runs under MPI even on one device; one program per device
  // under MPI when a launcher started it (the trainer checks the count
  // against the artifact's mesh and names the mpirun it needs).
  bool pipeline = program.has_pipeline();
  if (!session->connect(/*devices=*/0, /*mpi=*/pipeline) ||
      !session->open(std::move(program)))
    return nullptr;
  if (session->leader()) {
    const TrainingRun &trainer = session->trainer();
    const TrainOptions &train = session->train;
    std::string line = "training " + train.model + " (" +
                       std::to_string(trainer.numParameters()) + " parameters)";
    if (pipeline) {
      const program::PipelinePlan &plan = session->artifact.pipeline();
      line += ", a pipeline of " + std::to_string(plan.stages()) + " stages (" +
              scheduleName(plan.schedule()) + ", " +
              std::to_string(plan.microbatches()) + " microbatches) on " +
              std::to_string(session->processes()) + " processes, stage 0";
    } else if (session->processes() > 1) {
      line +=
          " on " + std::to_string(session->processes()) + " processes, rank 0";
    }
    line += " on " + trainer.device() + ", steps " +
            std::to_string(trainer.getStep()) + ".." +
            std::to_string(train.steps);
    observer.note(line);
  }
  return session;
}

} // namespace gptc::runtime
