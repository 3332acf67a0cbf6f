//===- gptc-runtime.cpp - Train a compiled artifact, no compiler -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trains the program of `gptc MODEL --emit=artifact [--device cuda]` with the
// runtime alone: no MLIR or LLVM, so the binary and its few libraries can
// go where the compiler cannot (a GPU machine without the toolchain). One
// process, or for a pipeline mesh one per device under mpirun (as `gptc
// train`); the artifact carries the description's training settings.
//
//   [mpirun -np N] gptc-runtime ARTIFACT [--device cpu|cuda|virtual-cuda]
//                [--data FILE] [--val-data FILE] [--stop-at-step N]
//                [--checkpoint DIR] [--resume | --overwrite]
//                [--keep-checkpoints N]
//                [--log-interval N] [--eval-interval N]
//                [--collective-timeout SECONDS] [--dump-dir DIR]
//                [--profile] [--profile-json FILE] [--trace FILE]
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Dataset.h"
#include "gptc/Runtime/PipelineTrainer.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/Session.h"
#include "gptc/Runtime/TrainLoop.h"
#include "gptc/Runtime/Trainer.h"
#include "gptc/Runtime/program.pb.h"

#ifdef GPTC_HAVE_CUDA
#include "gptc/Runtime/CUDA/CudaApi.h"
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace rt = gptc::runtime;
namespace pg = gptc::program;

static int fail(const std::string &message, int code = 1) {
  std::cerr << "gptc-runtime: error: " << message << "\n";
  return code;
}

static const char *kUsage =
    "usage: gptc-runtime ARTIFACT [--device cpu|cuda|virtual-cuda] [--data "
    "FILE]\n"
    "                    [--val-data FILE] [--stop-at-step N]\n"
    "                    [--checkpoint DIR] [--resume [--resume-changed] | "
    "--overwrite]\n"
    "                    [--keep-checkpoints N]\n"
    "                    [--log-interval N] [--eval-interval N]\n"
    "                    [--collective-timeout SECONDS] [--dump-dir DIR]\n"
    "                    [--profile] [--profile-json FILE] [--trace FILE]\n"
    "each flag as gptc train's; the schedule's length (--steps) is "
    "compiled into the artifact\n"
    "a pipeline mesh's artifact runs one process per device: mpirun -np N "
    "gptc-runtime ...\n";

/// What a resumed run accepted that differs from its checkpoint.
static void printResumeNotes(const rt::TrainingRun &trainer) {
  std::istringstream notes(trainer.getResumeNotes());
  for (std::string line; std::getline(notes, line);)
    std::cerr << "gptc-runtime: " << line << "\n";
}

/// A non-negative integer option's value, or -1.
static int64_t parseCount(const std::string &text) {
  if (text.empty() || text.size() > 18)
    return -1;
  for (char c : text)
    if (c < '0' || c > '9')
      return -1;
  return std::strtoll(text.c_str(), nullptr, 10);
}

/// A pipeline artifact: one process per device of its mesh under mpirun,
/// each running its stage (PipelineTrainer), as `gptc train` does.
static int trainPipeline(const pg::Program &program,
                         const rt::TrainOptions &opts, bool cuda, bool resume,
                         const rt::Dataset &dataset) {
  if (opts.profile)
    return fail("--profile times the kernels of one program; a pipeline's "
                "stages and their waits are timed by --trace");
  std::unique_ptr<rt::Communicator> comm;
  std::string error;
  // (PipelineTrainer checks the processes against the artifact's mesh.)
  bool started = rt::startProcesses(/*devices=*/0, /*mpi=*/true, comm, error);
  if (!comm)
    return fail("a pipeline artifact runs under MPI, and MPI did not start");
  auto failAll = [&](const std::string &message) {
    std::cerr << "gptc-runtime: error: rank " << comm->rank() << ": " << message
              << "\n";
    if (comm->size() > 1)
      comm->abort(1);
    return 1;
  };
  if (!started)
    return failAll(error);
  std::string threadsLine = rt::shareCores(comm.get(), error);
  if (threadsLine.empty())
    return failAll(error);
  if (comm->rank() == 0)
    std::cerr << "gptc-runtime: " << threadsLine << "\n";
  std::unique_ptr<rt::TrainingRun> trainer =
      rt::openTrainingRun(program, opts, {cuda}, comm.get(), {}, resume, error);
  if (!trainer)
    return failAll(error);
  bool leader = comm->rank() == 0;
  if (leader)
    printResumeNotes(*trainer);
  if (leader) {
    const pg::PipelinePlan &plan = program.pipeline();
    std::cerr << "gptc-runtime: training " << opts.model << " ("
              << trainer->numParameters() << " parameters), a pipeline of "
              << plan.stages() << " stages ("
              << rt::scheduleName(plan.schedule()) << ", "
              << plan.microbatches() << " microbatches) on " << comm->size()
              << " processes, stage 0 on " << trainer->device() << ", steps "
              << trainer->getStep() << ".." << opts.steps << "\n";
  }
  if (!rt::trainAndSave(*trainer, opts, dataset, leader, "gptc-runtime", error))
    return failAll(error);
  return trainer->getStoppedBySignal() ? rt::kPreemptedExitCode : 0;
}

int main(int argc, char **argv) {
  std::string artifact, device = "cpu",
                        data = "/usr/share/common-licenses/GPL-3", valData,
                        checkpoint, dumpDir, tracePath, profileJson;
  int64_t stopAt = -1, logInterval = 10, evalInterval = -1,
          keepCheckpoints = -1, injectStep = -1;
  double collectiveTimeout = 20;
  bool resume = false, resumeChanged = false, overwrite = false,
       profile = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    auto count = [&](int64_t &out) {
      std::string text;
      if (!value(text))
        return false;
      out = parseCount(text);
      return out >= 0;
    };
    // Seconds, finite and >= 0.
    auto seconds = [&](double &out) {
      std::string text;
      if (!value(text) || text.empty())
        return false;
      char *end = nullptr;
      out = std::strtod(text.c_str(), &end);
      return *end == 0 && std::isfinite(out) && out >= 0;
    };
    bool ok = true;
    if (arg == "--device")
      ok = value(device);
    else if (arg == "--data")
      ok = value(data);
    else if (arg == "--val-data")
      ok = value(valData);
    else if (arg == "--keep-checkpoints")
      ok = count(keepCheckpoints);
    else if (arg == "--collective-timeout")
      ok = seconds(collectiveTimeout);
    else if (arg == "--inject-overflow") // testing, as gptc train's
      ok = count(injectStep) && injectStep >= 1;
    else if (arg == "--checkpoint")
      ok = value(checkpoint) && !checkpoint.empty();
    else if (arg == "--dump-dir")
      ok = value(dumpDir);
    else if (arg == "--trace")
      ok = value(tracePath);
    else if (arg == "--profile-json")
      ok = value(profileJson);
    else if (arg == "--stop-at-step")
      ok = count(stopAt);
    else if (arg == "--log-interval")
      ok = count(logInterval);
    else if (arg == "--eval-interval")
      ok = count(evalInterval);
    else if (arg == "--resume")
      resume = true;
    else if (arg == "--resume-changed")
      resumeChanged = true;
    else if (arg == "--overwrite")
      overwrite = true;
    else if (arg == "--profile")
      profile = true;
    else if (arg == "--steps")
      return fail("--steps: the schedule's length is compiled into the "
                  "artifact (training.steps, or gptc MODEL --emit=artifact "
                  "--steps N)",
                  2);
    else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (!arg.empty() && arg[0] == '-')
      return fail("unknown option '" + arg + "'\n" + kUsage, 2);
    else if (artifact.empty())
      artifact = arg;
    else
      return fail("one artifact, got '" + artifact + "' and '" + arg + "'", 2);
    if (!ok)
      return fail(arg + " takes " +
                      (arg == "--device" || arg == "--data" ||
                               arg == "--val-data" || arg == "--checkpoint" ||
                               arg == "--dump-dir" || arg == "--trace" ||
                               arg == "--profile-json"
                           ? std::string("a value")
                       : arg == "--collective-timeout"
                           ? std::string("seconds >= 0 (0: no watchdog)")
                           : std::string("a count (an integer >= 0)")),
                  2);
  }
  if (artifact.empty())
    return fail(std::string("no artifact\n") + kUsage, 2);
  if (resume && overwrite)
    return fail("--resume continues the checkpoints at --checkpoint and "
                "--overwrite removes them: give one of the two",
                2);
  if (stopAt == 0)
    return fail("--stop-at-step takes a step >= 1, got 0", 2);
  if (device != "cpu" && device != "cuda" && device != "virtual-cuda")
    return fail(
        "--device takes cpu, cuda or virtual-cuda, got '" + device + "'", 2);
  // The CUDA runtime, on a GPU or on the virtual CUDA device.
  bool cuda = device != "cpu";

  pg::Program program;
  {
    std::ifstream in(artifact, std::ios::binary);
    if (!in)
      return fail("cannot open '" + artifact + "'");
    if (!program.ParseFromIstream(&in))
      return fail("'" + artifact + "' is not a gptc artifact");
  }
  if (program.format_version() != rt::kProgramFormatVersion)
    return fail("'" + artifact + "' has format version " +
                std::to_string(program.format_version()) +
                "; this runtime reads " +
                std::to_string(rt::kProgramFormatVersion));
  if (!program.has_train())
    return fail("'" + artifact +
                "' has no training settings: make it with gptc MODEL "
                "--emit=artifact");
  const pg::TrainSettings &s = program.train();
  if (cuda && !program.has_cuda())
    return fail("'" + artifact +
                "' holds CPU code: compile it with --emit=artifact "
                "--device=" +
                device);
  bool virtualImage =
      program.cuda().format() == ::gptc::program::CUDA_IMAGE_HOST;
  if (device == "cpu" && program.has_cuda())
    return fail("'" + artifact + "' holds GPU code: run it with --device " +
                (virtualImage ? "virtual-cuda" : "cuda"));
  if (cuda && virtualImage != (device == "virtual-cuda"))
    return fail("'" + artifact + "' was compiled for " +
                (virtualImage ? "the virtual CUDA device: run it with "
                                "--device virtual-cuda"
                              : "a GPU: the virtual CUDA device runs "
                                "artifacts compiled with --device "
                                "virtual-cuda"));
  if (device == "virtual-cuda") {
#ifdef GPTC_HAVE_CUDA
    std::string why;
    if (!gptc::cuda::useVirtualDevice(why))
      return fail("--device virtual-cuda: " + why);
#else
    return fail("--device virtual-cuda: this build has no CUDA runtime");
#endif
  }

  std::string error;
  rt::Dataset dataset;
  if (!rt::Dataset::open(data, valData, s.seq_len(), s.vocab(), dataset, error))
    return fail(error);
  // The artifact's settings, then the flags that replace them (as gptc
  // train's do).
  rt::TrainOptions opts = rt::TrainOptions::fromProgram(program);
  if (stopAt > opts.steps)
    return fail("--stop-at-step " + std::to_string(stopAt) +
                    " is past the artifact's last step (" +
                    std::to_string(opts.steps) + ")",
                2);
  if (stopAt >= 0)
    opts.stopAfter = stopAt;
  if (evalInterval >= 0)
    opts.evalInterval = evalInterval;
  if (keepCheckpoints >= 0)
    opts.keepCheckpoints = static_cast<int>(keepCheckpoints);
  if (!checkpoint.empty())
    opts.checkpointPath = checkpoint;
  opts.collectiveTimeout = collectiveTimeout;
  // SIGTERM, SIGINT, SIGUSR1: checkpoint after the step and exit 75.
  opts.stopOnSignal = true;
  opts.logInterval = logInterval;
  opts.liveProgress = isatty(STDERR_FILENO);
  opts.dumpDir = dumpDir;
  opts.profile = profile || !profileJson.empty();
  opts.profileJson = profileJson;
  opts.tracePath = tracePath;
  opts.injectOverflowStep = injectStep - 1;
  opts.resumed = resume;
  opts.resumePolicy.anyChange = resumeChanged;
  opts.overwrite = overwrite;
  opts.recipe.emplace_back("data", dataset.identity());
  if (resumeChanged && !resume)
    return fail("--resume-changed continues a checkpoint: it goes with "
                "--resume");

  if (program.has_pipeline())
    return trainPipeline(program, opts, cuda, resume, dataset);

  std::string threadsLine = rt::shareCores(nullptr, error);
  if (threadsLine.empty())
    return fail(error);
  std::cerr << "gptc-runtime: " << threadsLine << "\n";
  std::unique_ptr<rt::TrainingRun> trainer =
      rt::openTrainingRun(program, opts, {cuda}, nullptr, {}, resume, error);
  if (!trainer)
    return fail(error);
  printResumeNotes(*trainer);
  std::cerr << "gptc-runtime: training " << opts.model << " ("
            << trainer->numParameters() << " parameters) on "
            << trainer->device() << ", steps " << trainer->getStep() << ".."
            << opts.steps << "\n";
  if (!rt::trainAndSave(*trainer, opts, dataset, true, "gptc-runtime", error))
    return fail(error);
  return trainer->getStoppedBySignal() ? rt::kPreemptedExitCode : 0;
}
