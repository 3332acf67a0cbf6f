//===- Train.cpp - gptc train and gptc sample ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The main job: compile the model's training step with the same pipelines
// gptc-opt names (gptc-train-pipeline), lower it to the runtime's artifact
// and train on the CPU; then sample from the checkpoint.
//
//===----------------------------------------------------------------------===//

#include "Train.h"

#include "CompileFlags.h"
#include "Onnx.h"
#include "Plan.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/PipelineTrainer.h"
#include "gptc/Runtime/ProcessMemory.h"
#include "gptc/Runtime/Sampling.h"
#include "gptc/Runtime/Session.h"
#include "gptc/Runtime/TrainLoop.h"
#include "gptc/Runtime/Trainer.h"
#include "gptc/Runtime/checkpoint.pb.h"
#ifdef GPTC_HAVE_CUDA
#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/CUDA/CudaBackend.h"
#endif
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <unistd.h>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;
namespace rt = ::gptc::runtime;

static cl::OptionCategory &trainCategory = trainOptionCategory();
static cl::OptionCategory sampleCategory("gptc sample options");

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
static cl::opt<std::string> nanPolicyOpt(
    "nan-policy",
    cl::desc("A step whose loss or gradients are NaN or infinite: 'stop' "
             "(name it and end; the last checkpoint is the last good state) "
             "or 'skip' (leave the parameters as they were and go on) "
             "(default: training.nan_policy, stop)"),
    cl::init(""), cl::cat(trainCategory));
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
static rt::DeviceOptions deviceOptions(bool cuda) {
  rt::DeviceOptions device;
  device.cuda = cuda;
  device.checkResidency = checkResidencyOpt;
  return device;
}

static cl::opt<int64_t> lengthOpt("length",
                                  cl::desc("Bytes (token ids) to generate"),
                                  cl::init(300), cl::cat(sampleCategory));
static cl::opt<std::string> promptOpt("prompt", cl::desc("Text to continue"),
                                      cl::init("\n"), cl::cat(sampleCategory));
static cl::opt<double> temperatureOpt("temperature",
                                      cl::desc("Softmax temperature"),
                                      cl::init(0.8), cl::cat(sampleCategory));
static cl::opt<int64_t>
    topKOpt("top-k", cl::desc("Sample among the K likeliest (0: all)"),
            cl::init(40), cl::cat(sampleCategory));
static cl::opt<uint64_t> seedOpt("seed", cl::desc("Sampling seed"), cl::init(0),
                                 cl::cat(sampleCategory));
static cl::opt<bool> tokenIdsOpt(
    "token-ids",
    cl::desc("Sample token ids, not bytes: --prompt is ids (\"464 318\"), "
             "and the ids generated are printed (a model with its own "
             "tokenizer, e.g. an imported GPT-2)"),
    cl::init(false), cl::cat(sampleCategory));

/// An error before the processes connect. Under an MPI launcher every rank
/// reads the same command line and files and finds it: rank 0 says it.
static int fail(const std::string &message) {
  if (rt::launcherRank() <= 0)
    llvm::errs() << "gptc: error: " << message << "\n";
  return 1;
}

/// An error once the processes have connected. An error on one rank ends
/// every rank (MPI_Abort), so that none waits in a collective; the message
/// is one write, so ranks' lines do not interleave. An error every rank
/// finds (`everyRank`: the same files and settings) is printed once, by
/// rank 0, and every rank ends with it.
static int failRanks(rt::Communicator *comm, const std::string &message,
                     bool everyRank) {
  bool many = comm && comm->size() > 1;
  if (!everyRank || !many || comm->rank() == 0)
    llvm::errs() << ("gptc: error: " +
                     (many && !everyRank
                          ? "rank " + std::to_string(comm->rank()) + ": "
                          : std::string()) +
                     message + "\n");
  if (many) {
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

/// --resume: whether the checkpoint's step and settings let this run
/// continue it (the same on every rank, so checked before the ranks load
/// their blocks, where an error is one rank's).
static bool checkResumable(const rt::TrainOptions &opts, std::string &error) {
  auto reader = rt::CheckpointReader::open(opts.checkpointPath, error);
  std::string notes;
  return reader && reader->checkSettings(opts.recipe, opts.model, opts.steps,
                                         opts.resumePolicy, notes, error);
}

/// "gptc: resuming from PATH at step N", and what changed that the run
/// accepts (the leader's).
static void printResuming(const rt::TrainOptions &opts,
                          const rt::TrainingRun &trainer) {
  llvm::errs() << "gptc: resuming from " << opts.checkpointPath << " at step "
               << trainer.getStep() << "\n";
  llvm::SmallVector<StringRef> lines;
  StringRef(trainer.getResumeNotes()).split(lines, '\n', -1, false);
  for (StringRef line : lines)
    llvm::errs() << "gptc: " << line << "\n";
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
        true)) ||
      (nanPolicyOpt.getNumOccurrences() && nanPolicyOpt != "stop" &&
       nanPolicyOpt != "skip" &&
       (fail("--nan-policy takes 'stop' or 'skip', got '" + nanPolicyOpt + "'"),
        true)));
}

/// The checks that need the run's final length (--steps or the
/// description's): the warm-up and --stop-at-step within it.
static LogicalResult checkSchedule(const ModelDescription &desc) {
  // --steps shorter than the description's warm-up is a short trial (a
  // warning); a warm-up the flags or the description make longer than
  // the run they give is an error.
  if (failed(desc.checkSchedule(stepsFlag().has_value() && !isWarmupGiven())))
    return failure();
  int64_t steps = desc.getConfig().steps;
  if (stopAfterOpt.getNumOccurrences() && stopAfterOpt > steps) {
    fail("--stop-at-step " + std::to_string(stopAfterOpt) +
         " is past the run's last step (" + std::to_string(steps) +
         ", --steps): it stops where the schedule ends anyway");
    return failure();
  }
  return success();
}

/// The run's options: the artifact's training settings (what
/// `gptc --emit=artifact` writes for gptc-runtime, so that both start from
/// the same), then the flags that replace them.
static rt::TrainOptions trainOptions(const ModelDescription &desc,
                                     const std::string &description,
                                     ::gptc::program::Program &program) {
  setTrainSettings(desc, description, program);
  rt::TrainOptions opts = rt::TrainOptions::fromProgram(program);
  opts.model = desc.getName().str();
  if (stopAfterOpt >= 0)
    opts.stopAfter = std::min<int64_t>(stopAfterOpt, opts.steps);
  if (evalIntervalOpt >= 0)
    opts.evalInterval = evalIntervalOpt;
  if (keepCheckpointsOpt >= 0)
    opts.keepCheckpoints = static_cast<int>(keepCheckpointsOpt);
  if (checkpointIntervalOpt >= 0)
    opts.checkpointInterval = checkpointIntervalOpt;
  opts.checkpointMinutes = checkpointMinutesOpt;
  // SIGTERM, SIGINT, SIGUSR1: checkpoint after the step, exit 75.
  opts.stopOnSignal = true;
  if (!checkpointOpt.empty())
    opts.checkpointPath = checkpointOpt;
  else
    opts.checkpointPath = opts.model + ".ckpt";
  opts.resumed = resumeOpt;
  opts.resumePolicy.anyChange = resumeChangedOpt;
  opts.overwrite = overwriteOpt;
  opts.collectiveTimeout = collectiveTimeoutOpt;
  opts.overlapCollectives = collectiveOverlapOpt;
  opts.logInterval = logIntervalOpt;
  opts.liveProgress = isatty(STDERR_FILENO);
  opts.dumpDir = dumpDirOpt;
  opts.profile = profileOpt || !profileJsonOpt.empty();
  opts.profileJson = profileJsonOpt;
  opts.tracePath = traceOpt;
  return opts;
}

/// Under several processes, the leader says which process each rank is:
/// a launcher names a dead rank by its PID.
static bool printProcesses(rt::Communicator &comm,
                           const rt::TrainingRun &trainer, std::string &error) {
  if (comm.size() < 2)
    return true;
  // The GPU each rank drives ("cuda:1"); the CPU's threads say the rest.
  std::string device = trainer.device();
  device =
      device.rfind("cpu", 0) == 0 ? "" : device.substr(0, device.find(' '));
  std::string text;
  if (!rt::describeProcesses(comm, device, text, error))
    return false;
  if (comm.rank() == 0)
    llvm::errs() << "gptc: processes: " << text << "\n";
  return true;
}

/// gptc train on a pipeline mesh: one process per stage (docs/Pipeline.md).
static int runPipelineTrain(ModelDescription &desc,
                            const std::string &description,
                            MLIRContext &context, const CompileOptions &options,
                            std::optional<OnnxImport> &onnx, int64_t injectStep,
                            int64_t injectRank) {
  const ModelConfig &m = desc.getConfig();
  if (failed(checkPipelineSupported(desc, options)))
    return 1;
  if (profileOpt || !profileJsonOpt.empty()) {
    llvm::errs() << "gptc: error: --profile times the kernels of one "
                    "program; a pipeline's stages and their waits are timed "
                    "by --trace (docs/Pipeline.md)\n";
    return 1;
  }
  if (stepsFlag())
    desc.setSteps(*stepsFlag());
  if (failed(checkSchedule(desc)))
    return 1;
  // The processes first: compiling a large model takes minutes.
  std::unique_ptr<rt::Communicator> comm;
  std::string error;
  int64_t devices = m.devices();
  bool started = rt::startProcesses(devices, /*mpi=*/true, comm, error);
  if (!comm)
    return fail(error);
  bool leader = comm->rank() == 0;
  auto failAll = [&](const std::string &message, bool everyRank = false) {
    return failRanks(comm.get(), message, everyRank);
  };
  if (!started)
    return failAll(error, /*everyRank=*/true);
  // Every process compiles the same program; an error stops them all.
  bool fromOnnx = onnx.has_value();
  std::map<std::string, std::string> initialValues;
  OwningOpRef<ModuleOp> module =
      buildTrainingModule(desc, &context, onnx, initialValues);
  ::gptc::program::Program program;
  if (!module || failed(compilePipeline(desc, *module, options,
                                        ProgramCode::Compiled, program))) {
    if (comm->size() > 1)
      comm->abort(1);
    return 1;
  }
  std::string threadsLine = rt::shareCores(comm.get(), error);
  if (threadsLine.empty())
    return failAll(error);
  if (leader)
    llvm::errs() << "gptc: " << threadsLine << "\n";
  rt::Dataset data;
  if (!rt::Dataset::open(dataPath, valDataPath, m.seqLen, m.vocabSize, data,
                         error))
    return failAll(error);
  rt::TrainOptions opts = trainOptions(desc, description, program);
  opts.recipe.emplace_back("data", data.identity());
  if (resumeOpt && !checkResumable(opts, error))
    return failAll(error, /*everyRank=*/true);
  opts.injectOverflowStep = injectStep - 1;
  opts.injectOverflowRank = static_cast<int>(injectRank);
  if (injectStep > 0 && injectRank >= comm->size())
    return failAll("--inject-overflow names rank " +
                   std::to_string(injectRank) + " of a run of " +
                   std::to_string(comm->size()) + " processes");
  std::unique_ptr<rt::TrainingRun> trainer = rt::openTrainingRun(
      program, opts, deviceOptions(options.cuda()), comm.get(),
      resumeOpt ? std::map<std::string, std::string>()
                : std::move(initialValues),
      resumeOpt, error);
  if (!trainer)
    return failAll(error);
  if (resumeOpt && leader)
    printResuming(opts, *trainer);
  if (leader) {
    const ::gptc::program::PipelinePlan &plan = program.pipeline();
    if (fromOnnx)
      llvm::errs() << "gptc: the model is the ONNX graph "
                   << desc.getOnnxModelPath()
                   << " (its initializers are the initial parameters; its "
                   << m.numLayers << " raised blocks cut into the stages)\n";
    llvm::errs() << "gptc: training " << opts.model << " ("
                 << trainer->numParameters() << " parameters) on "
                 << data.getPath() << ", batch " << m.batchSize << " x "
                 << opts.seqLen << ", steps " << trainer->getStep() << ".."
                 << opts.steps << "\n";
    llvm::errs() << "gptc: learning rate " << describeLearningRate(m) << "\n";
    llvm::errs() << "gptc: pipeline of " << plan.stages() << " stages"
                 << (plan.virtual_stages() > 1
                         ? " x " + std::to_string(plan.virtual_stages()) +
                               " virtual stages"
                         : std::string())
                 << ", " << rt::scheduleName(plan.schedule()) << ", "
                 << plan.microbatches() << " microbatches of "
                 << m.microBatchSize << " sequences"
                 << (m.dataParallel > 1
                         ? ", " + std::to_string(m.dataParallel) +
                               " data-parallel replicas"
                         : std::string())
                 << (m.tensorParallel > 1 ? ", tensor parallel " +
                                                std::to_string(m.tensorParallel)
                                          : std::string())
                 << (m.zeroStage > 0 ? ", ZeRO-" + std::to_string(m.zeroStage)
                                     : std::string())
                 << "\n";
    if (options.cuda())
      llvm::errs() << "gptc: stage 0 on " << trainer->device()
                   << " (state and update on the device)\n";
  }
  if (!printProcesses(*comm, *trainer, error))
    return failAll(error);
  if (!rt::trainAndSave(*trainer, opts, data, leader, "gptc", error))
    return failAll(error, trainer->getErrorOnEveryRank());
  return trainer->getStoppedBySignal() ? rt::kPreemptedExitCode : 0;
}

int mlir::gptc::runTrain(const std::string &modelPath,
                         const DialectRegistry &registry) {
  if (failed(checkTrainOptions()))
    return 1;
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  // Under an MPI launcher every rank compiles the same description: rank 0
  // prints the diagnostics (errors, warnings, remarks), the others none
  // (their launcher reports their exit status). A rank whose files differ
  // from rank 0's could fail alone, silently: docs/Training.md says to
  // keep the inputs the same on every host.
  std::optional<ScopedDiagnosticHandler> quiet;
  if (rt::launcherRank() > 0)
    quiet.emplace(&context, [](Diagnostic &) { return success(); });
  std::string error;
  std::string description;
  // An ONNX model: its graph is the model (docs/Onnx.md, "Training"). For
  // MODEL.onnx itself the training settings are gptc's defaults and the
  // flags, written as a description that names the graph; a description
  // may also name one (`onnx_model`).
  std::optional<OnnxImport> onnx;
  OnnxTrainingShape onnxShape;
  if (StringRef(modelPath).ends_with(".onnx")) {
    FailureOr<OnnxImport> imported =
        importOnnxForTraining(modelPath, context, onnxShape);
    if (failed(imported))
      return 1;
    onnx = std::move(*imported);
    FailureOr<DescriptionOverrides> overrides = getOnnxDescriptionOverrides();
    if (failed(overrides))
      return 1;
    FailureOr<std::string> text =
        onnxTrainingDescription(modelPath, onnxShape, *overrides, error);
    if (failed(text))
      return fail(error);
    description = *text;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(
            description, modelPath + " (training settings)"),
        llvm::SMLoc());
  } else {
    auto buffer = openBoundedInput(modelPath, kMaxDescriptionBytes,
                                   "model description", error);
    if (!buffer)
      return fail(error);
    description = buffer->getBuffer().str();
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  }

  // 1. The description (with --mesh and friends), with the limits of this
  //    runtime.
  FailureOr<ModelDescription> desc =
      parseDescription(sourceMgr, context, onnx ? &onnxShape : nullptr);
  if (failed(desc))
    return 1;
  // Under a launcher of N processes, a description without a mesh (and no
  // --mesh) trains data parallel over them, as torchrun's users expect.
  int world = rt::launcherSize();
  std::string defaultMeshNote;
  if (world > 1 && desc->getMeshAxes().empty() && !isMeshGiven() &&
      !isMeshAuto()) {
    setDefaultMesh("dp=" + std::to_string(world));
    desc = parseDescription(sourceMgr, context, onnx ? &onnxShape : nullptr);
    if (failed(desc))
      return 1;
    defaultMeshNote = "gptc: mesh dp=" + std::to_string(world) + ": the " +
                      std::to_string(world) +
                      " processes the launcher started (the description "
                      "has no mesh and --mesh is not given)\n";
  }
  if (!defaultMeshNote.empty() && rt::launcherRank() <= 0)
    llvm::errs() << defaultMeshNote;
  const ModelConfig &m = desc->getConfig();
  std::string onnxPath = desc->getOnnxModelPath();
  OnnxImportOptions onnxOptions;
  if (!getOnnxImportOptions(onnxOptions) ||
      failed(resolveOnnxModel(*desc, &context, onnxOptions, onnx, onnxShape)))
    return 1;
  FailureOr<CompileOptions> options = getCompileOptions();
  if (failed(options))
    return 1;
  options->codegen = codegenOpt;
  if (options->cuda()) {
    if (checkResidencyOpt)
      return fail("--check-residency emulates a device's memory on the CPU; "
                  "it does not go with --device cuda");
#ifdef GPTC_HAVE_CUDA
    if (!codegenOpt)
      return fail("--device cuda runs generated kernels; --codegen=false "
                  "is for the CPU");
    // Before compiling: a cubin for GPT-2 takes half a minute.
    std::string why;
    if (options->device == DeviceKind::VirtualCUDA &&
        !::gptc::cuda::useVirtualDevice(why))
      return fail("--device virtual-cuda: " + why);
    if (!rt::cudaDeviceAvailable(why))
      return fail(why);
#else
    return fail("--device cuda: this gptc was built without the CUDA "
                "runtime (no CUDA toolkit was found when it was built)");
#endif
  }
  if (!nanPolicyOpt.empty())
    desc->setSkipNonFinite(nanPolicyOpt == "skip");
  if (m.pipelineParallel <= 1 && options->pipeline.any())
    return fail("--pipeline-schedule, --virtual-stages and --pipeline-layers "
                "shape a pipeline; this mesh has no pipeline axis (--mesh "
                "pp=N)");
  int64_t injectStep = -1, injectRank = 0;
  if (!injectOverflowOpt.empty()) {
    StringRef spec = injectOverflowOpt;
    auto [stepText, rankText] = spec.split(':');
    if (stepText.getAsInteger(10, injectStep) || injectStep < 1 ||
        (!rankText.empty() && rankText.getAsInteger(10, injectRank)) ||
        injectRank < 0)
      return fail("--inject-overflow takes STEP[:RANK] (a step from 1, a "
                  "rank from 0), got '" +
                  spec.str() + "'");
  }
  if (m.pipelineParallel > 1)
    return runPipelineTrain(*desc, description, context, *options, onnx,
                            injectStep, injectRank);

  // 2. Compile @forward and @train_step; --steps sets the schedule's length.
  if (stepsFlag())
    desc->setSteps(*stepsFlag());
  if (failed(checkSchedule(*desc)))
    return 1;
  bool fromOnnx = onnx.has_value();
  std::map<std::string, std::string> initialValues;
  OwningOpRef<ModuleOp> module =
      buildTrainingModule(*desc, &context, onnx, initialValues);
  ::gptc::program::Program program;
  if (!module || failed(compileTraining(*desc, *module, *options,
                                        ProgramCode::Compiled, program)))
    return 1;

  // 3. One process per device: MPI when the mesh has several devices or an
  //    MPI launcher started us (so that a mismatch is reported, not run N
  //    times).
  int64_t devices = m.devices();
  std::unique_ptr<rt::Communicator> comm;
  bool started = rt::startProcesses(devices, /*mpi=*/false, comm, error);
  if (!started && !comm)
    return fail(error);
  bool leader = !comm || comm->rank() == 0;
  // An error ends every rank (failRanks).
  auto failAll = [&](const std::string &message, bool everyRank = false) {
    return failRanks(comm.get(), message, everyRank);
  };
  if (!started)
    return failAll(error, /*everyRank=*/true);

  std::string threadsLine = rt::shareCores(comm.get(), error);
  if (threadsLine.empty())
    return failAll(error);
  if (leader)
    llvm::errs() << "gptc: " << threadsLine << "\n";

  // 4. Data, options, parameters.
  rt::Dataset data;
  if (!rt::Dataset::open(dataPath, valDataPath, m.seqLen, m.vocabSize, data,
                         error))
    return failAll(error);
  rt::TrainOptions opts = trainOptions(*desc, description, program);
  opts.recipe.emplace_back("data", data.identity());
  if (resumeOpt && !checkResumable(opts, error))
    return failAll(error, /*everyRank=*/true);
  opts.injectOverflowStep = injectStep - 1;
  opts.injectOverflowRank = static_cast<int>(injectRank);
  if (injectStep > 0 && injectRank >= (comm ? comm->size() : 1))
    return failAll("--inject-overflow names rank " +
                   std::to_string(injectRank) + " of a run of " +
                   std::to_string(comm ? comm->size() : 1) + " processes");
  // What training adds to the process: measured from here, where the
  // compiler has finished (its peak kept aside, its freed heap given back,
  // so that training's allocations count whatever the compiler freed) and
  // the training state is not yet allocated.
  int64_t compilePeak = rt::peakResidentBytes();
  rt::returnFreeHeap();
  int64_t before = rt::residentBytes();
  bool trainingPeak = compilePeak > 0 && before > 0 && rt::resetPeakResident();
  std::unique_ptr<rt::TrainingRun> trainer = rt::openTrainingRun(
      program, opts, deviceOptions(options->cuda()), comm.get(),
      resumeOpt ? std::map<std::string, std::string>()
                : std::move(initialValues),
      resumeOpt, error);
  if (!trainer)
    return failAll(error);
  if (resumeOpt && leader)
    printResuming(opts, *trainer);

  if (leader) {
    if (fromOnnx)
      llvm::errs() << "gptc: the model is the ONNX graph " << onnxPath
                   << " (its initializers are the initial parameters)\n";
    llvm::errs() << "gptc: training " << opts.model << " ("
                 << trainer->numParameters() << " parameters) on "
                 << data.getPath() << " ("
                 << (data.trainShards() > 1
                         ? std::to_string(data.trainShards()) + " files, "
                         : std::string())
                 << data.trainSize() << " + " << data.validationSize()
                 << (std::string(data.kind()) == "text" ? " bytes" : " tokens")
                 << "), batch " << m.batchSize << " x " << opts.seqLen
                 << ", steps " << trainer->getStep() << ".." << opts.steps
                 << "\n";
    llvm::errs() << "gptc: learning rate " << describeLearningRate(m) << "\n";
    if (options->cuda())
      llvm::errs() << "gptc: on " << trainer->device() << "\n";
    if (devices > 1 || m.gradAccumSteps > 1)
      llvm::errs() << "gptc: " << devices << " processes: data parallel "
                   << m.dataParallel << ", tensor parallel " << m.tensorParallel
                   << (m.sequenceParallel ? " (sequence parallel)" : "")
                   << (m.contextParallel > 1
                           ? ", context parallel " +
                                 std::to_string(m.contextParallel) +
                                 (m.contextAllGather ? " (all-gather)"
                                                     : " (ring)")
                           : std::string())
                   << ", ZeRO stage " << m.zeroStage << ", " << m.gradAccumSteps
                   << " microbatch(es) of " << m.microBatchSize
                   << " sequences per rank\n";
  }
  if (comm && !printProcesses(*comm, *trainer, error))
    return failAll(error);
  if (!rt::trainAndSave(*trainer, opts, data, leader, "gptc", error))
    return failAll(error, trainer->getErrorOnEveryRank());
  if (leader) {
    // The whole run's peak (compilation, training and the checkpoint) and
    // what training added to the memory the compiler and the libraries
    // held when it began (--emit=summary's "training memory" predicts it).
    int64_t peak = rt::peakResidentBytes();
    if (peak > 0) {
      int64_t whole = trainingPeak ? std::max(peak, compilePeak) : peak;
      llvm::errs() << "gptc: peak resident memory " << whole << " bytes ("
                   << llvm::format("%.1f", whole / 1048576.0) << " MiB)";
      if (trainingPeak)
        llvm::errs() << "; training added " << peak - before << " bytes ("
                     << llvm::format("%.1f", (peak - before) / 1048576.0)
                     << " MiB) to the "
                     << llvm::format("%.1f", before / 1048576.0)
                     << " MiB of the compiler and libraries";
      llvm::errs() << "\n";
    }
  }
  return trainer->getStoppedBySignal() ? rt::kPreemptedExitCode : 0;
}

int mlir::gptc::runSample(const std::string &checkpointPath,
                          const DialectRegistry &registry) {
  if (!std::isfinite(temperatureOpt) || temperatureOpt < 0)
    return fail("--temperature takes a finite value >= 0 (0: always the "
                "likeliest byte), got " +
                std::to_string(temperatureOpt.getValue()));
  if (lengthOpt < 0)
    return fail("--length takes a byte count >= 0, got " +
                std::to_string(lengthOpt));
  if (topKOpt < 0)
    return fail("--top-k takes K >= 0 (0: all), got " +
                std::to_string(topKOpt));
  // 1. The checkpoint and the description it carries.
  std::string error;
  auto reader = rt::CheckpointReader::open(checkpointPath, error);
  if (!reader || !reader->verifyAll(error))
    return fail(error);
  const ::gptc::checkpoint::Manifest &ck = reader->manifest();

  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(ck.description(),
                                           checkpointPath + ":description"),
      llvm::SMLoc());
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(sourceMgr, &context);
  if (failed(desc))
    return 1;
  // 2. Compile @logits for one sequence (an ONNX model's for the graph's
  //    batch, whose first row is sampled).
  OwningOpRef<ModuleOp> module;
  if (std::string onnxPath = desc->getOnnxModelPath(); !onnxPath.empty()) {
    OnnxImportOptions onnxOptions;
    if (!getOnnxImportOptions(onnxOptions))
      return 1;
    if (!llvm::sys::fs::exists(onnxPath))
      return fail("'" + checkpointPath + "' was trained from the ONNX model '" +
                  onnxPath + "', which gptc sample reads again: it is gone");
    module = importOnnxLogits(onnxPath, &context, onnxOptions);
    if (!module)
      return 1;
  } else {
    module = importLogits(*desc, &context, 1);
  }
  ::gptc::program::Program program;
  auto cleanup = [](OpPassManager &pm) {
    FrontendPipelineOptions options;
    options.verifyModel = false;
    buildFrontendPipeline(pm, options);
  };
  FailureOr<CompileOptions> options = getCompileOptions();
  if (failed(options))
    return 1;
  options->device = DeviceKind::CPU;
  if (!module || failed(runPasses(*module, *options, cleanup)) ||
      failed(emitProgram(*module, {"logits"}, *options, ProgramCode::Compiled,
                         program)))
    return 1;
  auto exec = rt::Executor::create(program.functions(0), error);
  if (!exec)
    return fail(error);

  // 3. Parameters by name.
  const auto &fn = program.functions(0);
  int64_t logitsVocab = fn.values(fn.outputs(0)).type().shape().empty()
                            ? 0
                            : *fn.values(fn.outputs(0)).type().shape().rbegin();
  std::vector<rt::Tensor> params;
  params.reserve(fn.inputs_size());
  for (int i = 0; i + 1 < fn.inputs_size(); ++i) {
    const auto &v = fn.values(fn.inputs(i));
    std::vector<int64_t> shape(v.type().shape().begin(),
                               v.type().shape().end());
    rt::Tensor t(v.type().dtype(), shape);
    // A vocabulary table padded by the mesh that trained it (tensor
    // parallelism) loads without its padding rows.
    if (!reader->read(v.name(), shape, std::vector<int64_t>(shape.size(), 0), t,
                      error, rt::vocabularyRows(v, shape, logitsVocab)))
      return fail(error);
    params.push_back(std::move(t));
  }
  std::vector<const rt::Tensor *> ptrs;
  for (const rt::Tensor &t : params)
    ptrs.push_back(&t);

  // 4. Bytes (ids 0-255), or with --token-ids any id of the vocabulary.
  int64_t vocab = fn.values(fn.outputs(0)).type().shape().empty()
                      ? 0
                      : *fn.values(fn.outputs(0)).type().shape().rbegin();
  std::vector<int32_t> prompt;
  if (tokenIdsOpt) {
    SmallVector<StringRef> words;
    StringRef(promptOpt).split(words, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef word : words) {
      int64_t id;
      if (word.trim().getAsInteger(10, id) || id < 0 || id >= vocab)
        return fail("--token-ids: the prompt's '" + word.trim().str() +
                    "' is not a token id of the model's vocabulary [0, " +
                    std::to_string(vocab) + ")");
      prompt.push_back(static_cast<int32_t>(id));
    }
    if (prompt.empty())
      return fail("--token-ids needs a --prompt of token ids, e.g. "
                  "--prompt \"464 318\"");
  } else {
    for (unsigned char c : promptOpt.getValue().empty() ? std::string("\n")
                                                        : promptOpt.getValue())
      if (c >= vocab)
        return fail("the prompt's byte " + std::to_string(c) +
                    " is outside the model's vocabulary of " +
                    std::to_string(vocab) +
                    " ids: give token ids with --token-ids");
      else
        prompt.push_back(c);
  }
  std::vector<int32_t> generated;
  if (!rt::sampleTokens(*exec, ptrs, prompt, lengthOpt, temperatureOpt, topKOpt,
                        seedOpt, tokenIdsOpt ? vocab : 256, generated, error))
    return fail(error);
  if (tokenIdsOpt) {
    for (size_t i = 0; i < prompt.size() + generated.size(); ++i)
      llvm::outs() << (i ? " " : "")
                   << (i < prompt.size() ? prompt[i]
                                         : generated[i - prompt.size()]);
  } else {
    llvm::outs() << promptOpt;
    for (int32_t id : generated)
      llvm::outs() << static_cast<char>(id);
  }
  llvm::outs() << "\n";
  return 0;
}
