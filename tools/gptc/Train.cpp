//===- Train.cpp - gptc train ----------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The main job: gptc train's flags as a TrainRequest, opened and run by the
// driver's TrainSession (the same session the C API opens): the
// description compiled with the pipelines gptc-opt names, its artifact
// trained by the runtime. `gptc sample` is Sample.cpp.
//
//===----------------------------------------------------------------------===//

#include "Train.h"

#include "CompileFlags.h"
#include "Onnx.h"
#include "Plan.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Driver/TrainSession.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Session.h"
#include "gptc/Runtime/TrainLoop.h"
#include "gptc/Runtime/Trainer.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unistd.h>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;
namespace rt = ::gptc::runtime;

static cl::OptionCategory &trainCategory = trainOptionCategory();

static cl::opt<std::string>
    dataPath("data",
             cl::desc("Training data: a token file (uint16 ids, flat as "
                      "nanoGPT's train.bin or with llm.c's header) or a text "
                      "file (bytes are tokens), or several read in order: a "
                      "comma-separated list of files and quoted globs "
                      "('data/train_*.bin'); default: the GPL-3 text every "
                      "Debian system ships"),
             cl::init("/usr/share/common-licenses/GPL-3"),
             cl::cat(trainCategory));
static cl::opt<std::string> valDataPath(
    "val-data",
    cl::desc("Validation data of the same kind as --data (default: the "
             "last 10% of --data)"),
    cl::init(""), cl::cat(trainCategory));
static cl::opt<int64_t> stopAfterOpt(
    "stop-at-step",
    cl::desc("Stop (and checkpoint) after this many steps in all, keeping "
             "the schedule of --steps; --resume continues"),
    cl::init(-1), cl::cat(trainCategory));
static cl::opt<std::string>
    checkpointOpt("checkpoint",
                  cl::desc("Checkpoint directory (default: <model name>.ckpt); "
                           "--resume also reads a step directory in it or a "
                           "single-file checkpoint (formats 1 and 2)"),
                  cl::init(""), cl::cat(trainCategory));
static cl::opt<NanPolicy, false, NamedValueParser<NanPolicy>> nanPolicyOpt(
    "nan-policy",
    cl::desc("A step whose loss or gradients are NaN or infinite (default: "
             "training.nan_policy, stop)"),
    cl::values(clEnumValN(NanPolicy::Stop, "stop",
                          "name it and end; the last checkpoint is the "
                          "last good state"),
               clEnumValN(NanPolicy::Skip, "skip",
                          "leave the parameters as they were and go on")),
    cl::init(NanPolicy::Stop), cl::cat(trainCategory));
static cl::opt<double> collectiveTimeoutOpt(
    "collective-timeout",
    cl::desc("Under mpirun: a collective or pipeline message that waits "
             "longer than this many seconds (at least 5x the slowest step; "
             "10 minutes in the first step, checkpoints and evaluations) "
             "ends every rank, naming the ranks that did not reach it; 0: "
             "never (default 20)"),
    cl::init(20), cl::cat(trainCategory));
static cl::opt<bool> collectiveOverlapOpt(
    "collective-overlap",
    cl::desc("Under mpirun: run the collectives the compiler's schedule "
             "lets overlap later kernels (gradient buckets in the backward) "
             "non-blocking while those kernels compute (default true; "
             "false: each completes where it stands)"),
    cl::init(true), cl::cat(trainCategory));
static cl::opt<int64_t> checkpointIntervalOpt(
    "checkpoint-interval",
    cl::desc("A checkpoint every N steps (default: the description's "
             "training.checkpoint_interval; 0: none by steps)"),
    cl::init(-1), cl::cat(trainCategory));
static cl::opt<double> checkpointMinutesOpt(
    "checkpoint-minutes",
    cl::desc("A checkpoint once this many minutes have passed since the "
             "last (rank 0's clock, for every rank; 0: none by time)"),
    cl::init(30), cl::cat(trainCategory));
static cl::opt<int64_t> keepCheckpointsOpt(
    "keep-checkpoints",
    cl::desc("Keep the newest N step directories in the checkpoint "
             "directory, 0: all (default: training.keep_checkpoints, 1)"),
    cl::init(-1), cl::cat(trainCategory));
static cl::opt<bool> resumeOpt("resume", cl::desc("Continue from --checkpoint"),
                               cl::init(false), cl::cat(trainCategory));
static cl::opt<bool> resumeChangedOpt(
    "resume-changed",
    cl::desc("With --resume: continue a checkpoint trained with other "
             "settings (learning rate, schedule, batch, data, ...), each "
             "named at start; without it, gptc refuses"),
    cl::init(false), cl::cat(trainCategory));
static cl::opt<bool> overwriteOpt(
    "overwrite",
    cl::desc("Start a fresh run where --checkpoint already holds "
             "checkpoints, removing them (without it, gptc refuses)"),
    cl::init(false), cl::cat(trainCategory));
static cl::opt<int64_t> evalIntervalOpt(
    "eval-interval",
    cl::desc("Validation loss every N steps (default: the description's)"),
    cl::init(-1), cl::cat(trainCategory));
static cl::opt<int64_t>
    logIntervalOpt("log-interval", cl::desc("A progress line every N steps"),
                   cl::init(10), cl::cat(trainCategory));
static cl::opt<std::string> traceOpt(
    "trace",
    cl::desc("Record the run's timeline (steps, kernels, evaluations, "
             "checkpoints) as a Chrome trace for Perfetto; under mpirun "
             "each rank writes FILE with .rank<r> before the extension"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
static cl::opt<bool> profileOpt(
    "profile",
    cl::desc("Time every kernel after the first step and print where the "
             "step's time goes: by kernel kind, the GEMMs' FLOP/s, the "
             "memory-bound kernels' bandwidth against a measured copy"),
    cl::init(false), cl::cat(trainCategory));
static cl::opt<std::string> profileJsonOpt(
    "profile-json",
    cl::desc("With the profile (implies --profile): rank 0 writes it per "
             "kernel, with operand types, as JSON (docs/Runtime.md)"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
static cl::opt<bool> codegenOpt(
    "codegen",
    cl::desc("Compile the ops code generation lowers into fused kernels "
             "(default); =false runs every op as the runtime's reference "
             "kernel"),
    cl::init(true), cl::cat(trainCategory));
static cl::opt<std::string>
    dumpDirOpt("dump-dir",
               cl::desc("Write the initial parameters, each batch and the "
                        "losses here (.npy/.tsv) for reference checks"),
               cl::init(""), cl::cat(trainCategory));
static cl::opt<std::string> injectOverflowOpt(
    "inject-overflow",
    cl::desc("Testing non-finite gradients (fp16's loss scaling, "
             "--nan-policy): STEP[:RANK] makes a gradient infinite at that "
             "1-based step on that rank (default 0)"),
    cl::init(""), cl::cat(trainCategory), cl::Hidden);
static cl::opt<std::string> injectCheckpointErrorOpt(
    "inject-checkpoint-error",
    cl::desc("Testing checkpoint write failures: STEP:ERRNO[:RANK] makes "
             "the checkpoint of that step fail midway on that rank (default "
             "0) with ENOSPC, EIO or EFBIG"),
    cl::init(""), cl::cat(trainCategory), cl::Hidden);
static cl::opt<double> assumeFreeBytesOpt(
    "assume-free-bytes",
    cl::desc("Testing the free-space check: the checkpoint directory's "
             "file system has this many bytes free"),
    cl::init(-1), cl::cat(trainCategory), cl::Hidden);

static cl::opt<bool> checkResidencyOpt(
    "check-residency",
    cl::desc("Testing the device backends' memory contract on the CPU: "
             "resident state gets a second copy the runs use, stale copies "
             "are NaN (createResidencyCheckingBackend)"),
    cl::init(false), cl::cat(trainCategory), cl::Hidden);

/// Where this process trains: the GPU with --device cuda, the CPU's runs
/// behind a device's memory contract with --check-residency, else the
/// CPU's own executor.
static rt::DeviceOptions deviceOptions(DeviceKind kind) {
  rt::DeviceOptions device;
  device.kind = kind;
  device.checkResidency = checkResidencyOpt;
  return device;
}

/// An error before the processes connect. Under an MPI launcher every rank
/// reads the same command line and files and finds it: rank 0 says it.
static int fail(const std::string &message) {
  if (rt::launcherRank() <= 0)
    llvm::errs() << "gptc: error: " << message << "\n";
  return 1;
}

/// --inject-checkpoint-error and --assume-free-bytes, for this process.
static LogicalResult setCheckpointFaults() {
  rt::CheckpointFaults faults;
  faults.freeBytes = assumeFreeBytesOpt;
  if (!injectCheckpointErrorOpt.empty()) {
    SmallVector<StringRef> parts;
    StringRef(injectCheckpointErrorOpt).split(parts, ':');
    int64_t rank = 0;
    faults.failErrno = parts.size() < 2       ? 0
                       : parts[1] == "ENOSPC" ? ENOSPC
                       : parts[1] == "EIO"    ? EIO
                       : parts[1] == "EFBIG"  ? EFBIG
                                              : 0;
    if (parts.size() < 2 || parts.size() > 3 ||
        parts[0].getAsInteger(10, faults.failStep) || faults.failStep < 1 ||
        !faults.failErrno ||
        (parts.size() == 3 && (parts[2].getAsInteger(10, rank) || rank < 0))) {
      fail("--inject-checkpoint-error takes STEP:ENOSPC|EIO|EFBIG[:RANK], "
           "got '" +
           injectCheckpointErrorOpt + "'");
      return failure();
    }
    faults.failRank = static_cast<int>(rank);
  }
  rt::setCheckpointFaultsForTesting(faults);
  return success();
}

/// `v` as a user would write it: -1, 0.5, nan.
static std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

/// The counts gptc train takes, checked before anything runs (a negative
/// count used to mean "not given" and was silently replaced).
static LogicalResult checkTrainOptions() {
  if (failed(setCheckpointFaults()))
    return failure();
  auto count = [](const cl::opt<int64_t> &opt, int64_t least,
                  StringRef what) -> LogicalResult {
    if (!opt.getNumOccurrences() || opt >= least)
      return success();
    fail("--" + opt.ArgStr.str() + " takes " + what.str() + ", got " +
         std::to_string(opt));
    return failure();
  };
  return failure(
      (stepsFlag() && *stepsFlag() < 1 &&
       (fail("--steps takes a step count >= 1, got " +
             std::to_string(*stepsFlag())),
        true)) ||
      (resumeChangedOpt && !resumeOpt &&
       (fail("--resume-changed continues a checkpoint: it goes with --resume"),
        true)) ||
      failed(count(stopAfterOpt, 1, "a step >= 1")) ||
      failed(count(evalIntervalOpt, 0, "N >= 0 (0: no validation)")) ||
      failed(count(logIntervalOpt, 0, "N >= 0 (0: no progress lines)")) ||
      failed(count(keepCheckpointsOpt, 0, "N >= 0 (0: keep all)")) ||
      failed(count(checkpointIntervalOpt, 0,
                   "N >= 0 (0: no checkpoint by steps)")) ||
      (checkpointMinutesOpt.getNumOccurrences() &&
       !(checkpointMinutesOpt >= 0 && std::isfinite(checkpointMinutesOpt)) &&
       (fail("--checkpoint-minutes takes minutes >= 0 (0: no checkpoint by "
             "time), got " +
             shortNumber(checkpointMinutesOpt.getValue())),
        true)) ||
      (resumeOpt && overwriteOpt &&
       (fail("--resume continues the checkpoints at --checkpoint and "
             "--overwrite removes them: give one of the two"),
        true)) ||
      (checkpointOpt.getNumOccurrences() && checkpointOpt.empty() &&
       (fail("--checkpoint names a directory, got ''"), true)) ||
      (!(collectiveTimeoutOpt >= 0 && std::isfinite(collectiveTimeoutOpt)) &&
       (fail("--collective-timeout takes seconds >= 0 (0: no watchdog), "
             "got " +
             std::to_string(collectiveTimeoutOpt.getValue())),
        true)));
}

namespace {
/// What the session says, printed as gptc says it: notes and errors on
/// stderr ("gptc: ", "gptc: error: "; each one write, so that ranks' lines
/// do not interleave), diagnostics as MLIR prints them.
class PrintingObserver : public SessionObserver {
public:
  void note(const std::string &line) override {
    llvm::errs() << ("gptc: " + line + "\n");
  }
  void error(const std::string &message) override {
    llvm::errs() << ("gptc: error: " + message + "\n");
  }
  llvm::raw_ostream &diagnostics() override { return llvm::errs(); }
};
} // namespace

/// --inject-overflow STEP[:RANK] into `run`.
static LogicalResult setInjectOverflow(rt::RunOptions &run) {
  if (injectOverflowOpt.empty())
    return success();
  StringRef spec = injectOverflowOpt;
  auto [stepText, rankText] = spec.split(':');
  int64_t step = 0, rank = 0;
  if (stepText.getAsInteger(10, step) || step < 1 ||
      (!rankText.empty() && rankText.getAsInteger(10, rank)) || rank < 0) {
    fail("--inject-overflow takes STEP[:RANK] (a step from 1, a rank from 0), "
         "got '" +
         spec.str() + "'");
    return failure();
  }
  run.injectOverflowStep = step;
  run.injectOverflowRank = rank;
  return success();
}

/// gptc train's flags as the session's request.
static FailureOr<TrainRequest> trainRequest(const std::string &modelPath) {
  TrainRequest request;
  request.modelPath = modelPath;
  if (!getOnnxImportOptions(request.onnx))
    return failure();
  FailureOr<std::optional<AutoMesh>> mesh = autoMeshFlags();
  if (failed(mesh))
    return failure();
  request.autoMesh = *mesh;
  if (request.autoMesh) {
    // The plan chooses the parallel settings; the learning rate's flags
    // still apply.
    if (failed(addScheduleFlags(request.overrides)))
      return failure();
  } else {
    FailureOr<DescriptionOverrides> overrides = getDescriptionOverrides();
    if (failed(overrides))
      return failure();
    request.overrides = *overrides;
  }
  request.steps = stepsFlag();
  if (nanPolicyOpt.getNumOccurrences())
    request.nanPolicy = nanPolicyOpt;
  FailureOr<CompileOptions> options = getCompileOptions();
  if (failed(options))
    return failure();
  request.compile = std::move(*options);
  request.compile.codegen = codegenOpt;

  rt::RunOptions &run = request.run;
  run.data = dataPath;
  run.valData = valDataPath;
  run.checkpoint = checkpointOpt;
  if (stopAfterOpt.getNumOccurrences())
    run.stopAt = stopAfterOpt;
  if (evalIntervalOpt >= 0)
    run.evalInterval = evalIntervalOpt;
  if (keepCheckpointsOpt >= 0)
    run.keepCheckpoints = keepCheckpointsOpt;
  if (checkpointIntervalOpt >= 0)
    run.checkpointInterval = checkpointIntervalOpt;
  run.checkpointMinutes = checkpointMinutesOpt;
  run.resume = resumeOpt;
  run.resumeChanged = resumeChangedOpt;
  run.overwrite = overwriteOpt;
  run.collectiveTimeout = collectiveTimeoutOpt;
  run.overlapCollectives = collectiveOverlapOpt;
  run.logInterval = logIntervalOpt;
  run.liveProgress = isatty(STDERR_FILENO);
  run.dumpDir = dumpDirOpt;
  run.profile = profileOpt;
  run.profileJson = profileJsonOpt;
  run.tracePath = traceOpt;
  run.device = deviceOptions(request.compile.device);
  run.reportMemory = true;
  if (failed(setInjectOverflow(run)))
    return failure();
  return request;
}

int mlir::gptc::runTrain(const std::string &modelPath,
                         const DialectRegistry &registry) {
  if (failed(checkTrainOptions()))
    return 1;
  FailureOr<TrainRequest> request = trainRequest(modelPath);
  if (failed(request))
    return 1;
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  PrintingObserver observer;
  std::unique_ptr<TrainSession> session =
      TrainSession::create(*request, context, observer);
  return session ? session->run() : 1;
}
