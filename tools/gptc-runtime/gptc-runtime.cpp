//===- gptc-runtime.cpp - Train a compiled artifact, no compiler -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trains the program of `gptc MODEL --emit=artifact [--device cuda]` with the
// runtime alone: no MLIR or LLVM, so the binary and its few libraries can
// go where the compiler cannot (a GPU machine without the toolchain). One
// process per device of the artifact's mesh (under mpirun for several, as
// `gptc train`); the artifact carries the description's training settings.
// The flags become the runtime session's options (rt::RunSession, the
// same session gptc train opens after compiling).
//
//   [mpirun -np N] gptc-runtime ARTIFACT [--device cpu|cuda|virtual-cuda]
//                [--data FILE] [--val-data FILE] [--stop-at-step N]
//                [--checkpoint DIR] [--resume | --overwrite]
//                [--keep-checkpoints N] [--checkpoint-interval N]
//                [--checkpoint-minutes M]
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
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>

namespace rt = gptc::runtime;

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
    "                    [--keep-checkpoints N] [--checkpoint-interval N]\n"
    "                    [--checkpoint-minutes M]\n"
    "                    [--log-interval N] [--eval-interval N]\n"
    "                    [--collective-timeout SECONDS] [--dump-dir DIR]\n"
    "                    [--profile] [--profile-json FILE] [--trace FILE]\n"
    "each flag as gptc train's; the schedule's length (--steps) is "
    "compiled into the artifact\n"
    "a pipeline mesh's artifact runs one process per device: mpirun -np N "
    "gptc-runtime ...\n";

namespace {
/// The session's notes and errors, as gptc-runtime says them.
class PrintingObserver : public rt::RunObserver {
public:
  void note(const std::string &line) override {
    std::cerr << ("gptc-runtime: " + line + "\n") << std::flush;
  }
  void error(const std::string &message) override {
    std::cerr << ("gptc-runtime: error: " + message + "\n") << std::flush;
  }
};
} // namespace

/// A non-negative integer option's value, or -1.
static int64_t parseCount(const std::string &text) {
  if (text.empty() || text.size() > 18)
    return -1;
  for (char c : text)
    if (c < '0' || c > '9')
      return -1;
  return std::strtoll(text.c_str(), nullptr, 10);
}

int main(int argc, char **argv) {
  // Before any other thread exists: the stop signals go to a thread of
  // their own, never to a kernel's (gptc/Runtime/Preemption.h).
  rt::routeStopSignals();
  std::string artifact, device = "cpu", data = rt::kDefaultDataPath, valData,
                        checkpoint, dumpDir, tracePath, profileJson;
  int64_t stopAt = -1, logInterval = 10, evalInterval = -1,
          keepCheckpoints = -1, checkpointInterval = -1, injectStep = -1;
  double collectiveTimeout = 20, checkpointMinutes = 30;
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
    else if (arg == "--checkpoint-minutes")
      ok = seconds(checkpointMinutes);
    else if (arg == "--checkpoint-interval")
      ok = count(checkpointInterval);
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
                       : arg == "--checkpoint-minutes"
                           ? std::string("minutes >= 0 (0: no checkpoint by "
                                         "time)")
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
  std::optional<rt::DeviceKind> kind = rt::parseDeviceKind(device);
  if (!kind)
    return fail(
        "--device takes cpu, cuda or virtual-cuda, got '" + device + "'", 2);
  if (resumeChanged && !resume)
    return fail("--resume-changed continues a checkpoint: it goes with "
                "--resume",
                2);

  // The artifact's settings, then the flags that replace them (as gptc
  // train's do).
  rt::RunOptions run;
  run.data = data;
  run.valData = valData;
  run.checkpoint = checkpoint;
  if (stopAt >= 0)
    run.stopAt = stopAt;
  if (evalInterval >= 0)
    run.evalInterval = evalInterval;
  if (keepCheckpoints >= 0)
    run.keepCheckpoints = keepCheckpoints;
  if (checkpointInterval >= 0)
    run.checkpointInterval = checkpointInterval;
  run.checkpointMinutes = checkpointMinutes;
  run.collectiveTimeout = collectiveTimeout;
  run.logInterval = logInterval;
  run.liveProgress = isatty(STDERR_FILENO);
  run.dumpDir = dumpDir;
  run.profile = profile;
  run.profileJson = profileJson;
  run.tracePath = tracePath;
  run.injectOverflowStep = injectStep > 0 ? injectStep : 0;
  run.resume = resume;
  run.resumeChanged = resumeChanged;
  run.overwrite = overwrite;
  run.device.kind = *kind;
  PrintingObserver observer;
  std::unique_ptr<rt::RunSession> session = rt::RunSession::fromArtifact(
      artifact, std::move(run), observer, "gptc-runtime");
  return session ? session->run() : 1;
}
