//===- Trainer.cpp - C API for training with gptc -----------------------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-c/Trainer.h over the compiler and the runtime: the description (or
// ONNX model) is compiled with gptc-train-pipeline into the runtime's
// program, as `gptc train` compiles it on one process, and trained by the
// runtime's Trainer.
//
//===----------------------------------------------------------------------===//

#include "gptc-c/Trainer.h"

#include "gptc/Analysis/Planner.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Driver/TrainSession.h"
#include "gptc/Frontend/HardwareDescription.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/InitAll.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Dataset.h"
#include "gptc/Runtime/PipelineTrainer.h"
#include "gptc/Runtime/Session.h"
#include "gptc/Runtime/TrainLoop.h"
#include "gptc/Runtime/Trainer.h"
#ifdef GPTC_HAVE_CUDA
#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/CUDA/CudaBackend.h"
#endif

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

using namespace mlir;
using namespace mlir::gptc;
namespace rt = ::gptc::runtime;

namespace {
/// What the session says to the C API: the diagnostics and errors of a
/// failed creation, returned to the caller (notes are the tools' to
/// print).
class CollectingObserver : public SessionObserver {
public:
  void note(const std::string &) override {}
  void error(const std::string &message) override {
    os << (text.empty() || text.back() == '\n' ? "" : "\n") << message;
  }
  llvm::raw_ostream &diagnostics() override { return os; }
  std::string text;
  llvm::raw_string_ostream os{text};
};

/// What a GptcTrainer points to: the session (its processes, program and
/// trainer), which reports to the observer.
struct TrainerImpl {
  CollectingObserver observer;
  std::unique_ptr<TrainSession> session;
  rt::TrainingRun &trainer() { return session->trainer(); }
  rt::TrainOptions &options() { return session->runtime().trainOptions(); }
  rt::Communicator *comm() { return session->runtime().communicator(); }
};
} // namespace

static TrainerImpl *unwrap(GptcTrainer t) {
  return static_cast<TrainerImpl *>(t.ptr);
}

/// Hands `message` to the caller through `error` (malloc'ed).
static bool setError(char **error, const std::string &message) {
  if (error) {
    *error = static_cast<char *>(std::malloc(message.size() + 1));
    if (*error)
      std::memcpy(*error, message.c_str(), message.size() + 1);
  }
  return false;
}

/// A word option: unset (NULL or ""), or one of the names `parse` knows.
template <typename T, typename Parse>
static LogicalResult word(const char *text, const char *name,
                          const char *values, Parse parse,
                          std::optional<T> &out, std::string &error) {
  if (!text || !*text)
    return success();
  out = parse(std::string(text));
  if (out)
    return success();
  error = std::string(name) + " takes " + values + ", got '" + text + "'";
  return failure();
}

/// The options beyond the first six: gptc train's flags of the same names.
static LogicalResult addSettings(const GptcTrainerOptions &o,
                                 TrainRequest &request, std::string &error) {
  DescriptionOverrides &d = request.overrides;
  CompileOptions &c = request.compile;
  auto fail = [&](const std::string &message) {
    error = message;
    return failure();
  };
  std::optional<PipelineScheduleKind> schedule;
  std::optional<Recompute> recompute;
  std::optional<bool> allGather, eachMicrobatch;
  std::optional<NanPolicy> nanPolicy;
  std::optional<LrDecay> decay;
  if (failed(word(o.pipelineSchedule, "pipelineSchedule",
                  "gpipe, 1f1b, interleaved or zb-h1", parsePipelineSchedule,
                  schedule, error)) ||
      failed(word(
          o.recompute, "recompute", "none, selective or full",
          [](const std::string &s) { return symbolizeRecompute(s); }, recompute,
          error)) ||
      failed(word(
          o.contextAttention, "contextAttention", "ring or all-gather",
          [](const std::string &s) -> std::optional<bool> {
            if (s == "ring" || s == "all-gather")
              return s == "all-gather";
            return std::nullopt;
          },
          allGather, error)) ||
      failed(word(
          o.zeroReduce, "zeroReduce", "step or microbatch",
          [](const std::string &s) -> std::optional<bool> {
            if (s == "step" || s == "microbatch")
              return s == "microbatch";
            return std::nullopt;
          },
          eachMicrobatch, error)) ||
      failed(word(
          o.nanPolicy, "nanPolicy", "stop or skip",
          [](const std::string &s) { return symbolizeNanPolicy(s); }, nanPolicy,
          error)) ||
      failed(word(
          o.lrDecay, "lrDecay", "cosine, linear or constant",
          [](const std::string &s) { return symbolizeLrDecay(s); }, decay,
          error)))
    return failure();
  bool planned = request.autoMesh.has_value();
  if (planned &&
      (schedule || o.virtualStages || o.pipelineLayers || recompute ||
       o.gradAccum || o.sequenceParallel >= 0 || allGather || eachMicrobatch))
    return fail("mesh \"auto\" chooses the ZeRO stage, sequence "
                "parallelism, microbatches, recomputation and pipeline "
                "schedule: leave pipelineSchedule, virtualStages, "
                "pipelineLayers, recompute, gradAccum, sequenceParallel, "
                "contextAttention and zeroReduce unset");
  c.pipeline.schedule = schedule;
  if (o.virtualStages < 0)
    return fail("virtualStages takes a count >= 1 (0: unset), got " +
                std::to_string(o.virtualStages));
  if (o.virtualStages > 0)
    c.pipeline.virtualStages = o.virtualStages;
  if (o.pipelineLayers && *o.pipelineLayers) {
    std::vector<int64_t> layers;
    SmallVector<StringRef> parts;
    StringRef(o.pipelineLayers).split(parts, ',');
    for (StringRef part : parts) {
      int64_t n = 0;
      if (part.trim().getAsInteger(10, n) || n < 1)
        return fail("pipelineLayers takes layer counts >= 1 separated by "
                    "commas (\"3,5\"), got '" +
                    std::string(o.pipelineLayers) + "'");
      layers.push_back(n);
    }
    c.pipeline.layers = std::move(layers);
  }
  if (recompute)
    d.recompute = *recompute;
  if (o.gradAccum < 0)
    return fail("gradAccum takes a count >= 1 (0: unset), got " +
                std::to_string(o.gradAccum));
  if (o.gradAccum > 0)
    d.accumulation = o.gradAccum;
  if (o.sequenceParallel > 1)
    return fail("sequenceParallel takes 0 or 1 (-1: unset), got " +
                std::to_string(o.sequenceParallel));
  if (o.sequenceParallel >= 0)
    d.sequenceParallel = o.sequenceParallel == 1;
  if (allGather)
    d.contextAllGather = *allGather;
  if (eachMicrobatch)
    c.zeroReduceEachMicrobatch = *eachMicrobatch;
  if (o.bucketMb > 1e6)
    return fail("bucketMb takes a size in MiB from 0 to 1000000");
  if (o.bucketMb >= 0)
    c.bucketBytes = static_cast<int64_t>(o.bucketMb * 1024 * 1024);
  if (o.gemmEpilogues > 1 || o.codegen > 1)
    return fail(std::string(o.gemmEpilogues > 1 ? "gemmEpilogues" : "codegen") +
                " takes 0 or 1 (-1: unset)");
  if (o.gemmEpilogues >= 0)
    c.gemmEpilogues = o.gemmEpilogues == 1;
  if (o.codegen >= 0)
    c.codegen = o.codegen == 1;
  request.nanPolicy = nanPolicy;
  if (o.lr < 0 || !std::isfinite(o.lr))
    return fail("lr takes a learning rate > 0 (0: unset)");
  if (o.lr > 0)
    d.lr = o.lr;
  if (o.warmupSteps >= 0)
    d.warmupSteps = o.warmupSteps;
  d.lrDecay = decay;
  if (o.minLrRatio >= 0)
    d.minLrRatio = o.minLrRatio;
  std::string verify;
  if (failed(c.verify(verify)))
    return fail(verify);
  rt::RunOptions &run = request.run;
  if (o.checkpointInterval < 0)
    return fail("checkpointInterval takes a step count >= 0 (0: none), got " +
                std::to_string(o.checkpointInterval));
  if (o.checkpointInterval > 0 && !(o.checkpoint && *o.checkpoint))
    return fail("checkpointInterval writes checkpoints to the checkpoint "
                "directory: name it");
  if (o.checkpoint)
    run.checkpoint = o.checkpoint;
  run.checkpointInterval = o.checkpointInterval;
  if (o.keepCheckpoints >= 0)
    run.keepCheckpoints = o.keepCheckpoints;
  return success();
}

/// `options` as the session's request: what gptc train's flags of the
/// same names ask for. The caller drives the steps, evaluations and
/// checkpoints, so none of them runs on its own, and progress lines are
/// the caller's to print.
static LogicalResult trainRequest(const std::string &modelPath,
                                  const GptcTrainerOptions &options,
                                  TrainRequest &request, std::string &error) {
  request.modelPath = modelPath;
  std::string mesh = options.mesh ? options.mesh : "";
  if (mesh == "auto") {
    if (!options.hardware || options.devices < 1) {
      error = "mesh \"auto\" needs a hardware description and devices >= 1";
      return failure();
    }
    request.autoMesh = AutoMesh{options.hardware, options.devices};
  } else if (!mesh.empty() &&
             failed(request.overrides.parseMesh(mesh, error))) {
    return failure();
  }
  if (options.zeroStage >= 0) {
    if (request.autoMesh) {
      error = "mesh \"auto\" chooses the ZeRO stage: leave zeroStage < 0";
      return failure();
    }
    request.overrides.zeroStage = options.zeroStage;
  }
  if (options.steps < 0) {
    error = "steps takes a step count >= 1 (0: the description's), got " +
            std::to_string(options.steps);
    return failure();
  }
  if (options.steps > 0)
    request.steps = options.steps;
  std::string device =
      options.device && *options.device ? options.device : "cpu";
  std::optional<DeviceKind> kind = parseDeviceKind(device);
  if (!kind) {
    error = "device '" + device +
            "': the C API trains on cpu, cuda or "
            "virtual-cuda";
    return failure();
  }
  request.compile.device = *kind;
  if (failed(addSettings(options, request, error)))
    return failure();
  // A call that fails leaves the trainer as it was: the step's program
  // carries the skip flag, so that a non-finite step changes no parameter
  // or moment whatever nan_policy says (the policy itself, what the
  // caller is told, stays the description's).
  request.guardEveryStep = true;
  // Each process's caller gets its own errors.
  request.reportOnEveryRank = true;
  rt::RunOptions &run = request.run;
  run.openData = false;
  run.logInterval = 0;
  run.evalInterval = 0;
  run.checkpointMinutes = 0;
  run.collectiveTimeout = 0;
  run.stopOnSignal = false;
  run.endRanksOnError = false;
  run.device.kind = request.compile.device;
  // Loading a checkpoint of other settings, the schedule's length among
  // them, is refused unless the caller asks for it.
  run.stepsChangeResumable = false;
  run.resumeAdvice =
      "Load it with these settings by gptcTrainerLoadCheckpointChanged "
      "(Python: load(path, changed=True))";
  return success();
}

GptcTrainer gptcTrainerCreate(const char *modelPath,
                              const GptcTrainerOptions *options, char **error) {
  if (!modelPath) {
    setError(error, "gptcTrainerCreate: no model path");
    return {nullptr};
  }
  GptcTrainerOptions defaults = gptcTrainerOptionsGetDefault();
  auto impl = std::make_unique<TrainerImpl>();
  TrainRequest request;
  std::string message;
  if (failed(trainRequest(modelPath, options ? *options : defaults, request,
                          message))) {
    setError(error, message);
    return {nullptr};
  }
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  impl->session = TrainSession::create(request, context, impl->observer);
  if (!impl->session) {
    std::string &text = impl->observer.text;
    setError(error, text.empty() ? "compiling the model failed" : text);
    return {nullptr};
  }
  return {impl.release()};
}

void gptcTrainerDestroy(GptcTrainer trainer) { delete unwrap(trainer); }

int64_t gptcTrainerGetRank(GptcTrainer t) {
  return unwrap(t)->comm() ? unwrap(t)->comm()->rank() : 0;
}
int64_t gptcTrainerGetNumProcesses(GptcTrainer t) {
  return unwrap(t)->comm() ? unwrap(t)->comm()->size() : 1;
}
const char *gptcTrainerGetMesh(GptcTrainer t) {
  return unwrap(t)->session->mesh().c_str();
}

int64_t gptcTrainerGetStep(GptcTrainer t) {
  return unwrap(t)->trainer().getStep();
}
int64_t gptcTrainerGetNumSteps(GptcTrainer t) {
  return unwrap(t)->options().steps;
}
int64_t gptcTrainerGetBatchSize(GptcTrainer t) {
  return unwrap(t)->session->batchSize();
}
int64_t gptcTrainerGetSeqLen(GptcTrainer t) {
  return unwrap(t)->options().seqLen;
}

int64_t gptcTrainerGetNumTensors(GptcTrainer t) {
  return static_cast<int64_t>(unwrap(t)->trainer().parameterNames().size());
}

/// The tensor `index` names, or null when out of range.
static bool validTensor(GptcTrainer t, int64_t index) {
  return index >= 0 && index < gptcTrainerGetNumTensors(t);
}

const char *gptcTrainerGetTensorName(GptcTrainer t, int64_t index) {
  if (!validTensor(t, index))
    return nullptr;
  return unwrap(t)->trainer().parameterNames()[index].c_str();
}
int64_t gptcTrainerGetTensorRank(GptcTrainer t, int64_t index) {
  if (!validTensor(t, index))
    return -1;
  return static_cast<int64_t>(
      unwrap(t)->trainer().parameterShape(index).size());
}
int64_t gptcTrainerGetTensorDim(GptcTrainer t, int64_t index, int64_t dim) {
  if (!validTensor(t, index) || dim < 0 ||
      dim >= gptcTrainerGetTensorRank(t, index))
    return -1;
  return unwrap(t)->trainer().parameterShape(index)[dim];
}
int64_t gptcTrainerGetNumParameters(GptcTrainer t) {
  return unwrap(t)->trainer().numParameters();
}

/// The index of the parameter `name` holding `count` float32 elements.
static std::optional<size_t> parameterIndex(GptcTrainer t, const char *name,
                                            int64_t count, char **error) {
  const auto &names = unwrap(t)->trainer().parameterNames();
  for (size_t i = 0; name && i < names.size(); ++i) {
    if (names[i] != name)
      continue;
    int64_t n = 1;
    for (int64_t d : unwrap(t)->trainer().parameterShape(i))
      n *= d;
    if (n != count) {
      setError(error, "parameter '" + names[i] + "' has " + std::to_string(n) +
                          " elements, not " + std::to_string(count));
      return std::nullopt;
    }
    return i;
  }
  setError(error, std::string("no parameter is named '") +
                      (name ? name : "(null)") + "'");
  return std::nullopt;
}

bool gptcTrainerReadParameter(GptcTrainer t, const char *name, float *data,
                              int64_t count, char **error) {
  std::optional<size_t> i = parameterIndex(t, name, count, error);
  if (!i)
    return false;
  std::vector<rt::Tensor> whole;
  std::string message;
  if (!unwrap(t)->trainer().wholeParameters(whole, message))
    return setError(error, message);
  const rt::Tensor &p = whole[*i];
  if (p.dtype != ::gptc::program::F32)
    return setError(error,
                    "parameter '" + std::string(name) + "' is not float32");
  std::memcpy(data, p.raw(), static_cast<size_t>(p.byteSize()));
  return true;
}

bool gptcTrainerWriteParameter(GptcTrainer t, const char *name,
                               const float *data, int64_t count, char **error) {
  std::optional<size_t> i = parameterIndex(t, name, count, error);
  if (!i)
    return false;
  rt::Tensor whole(::gptc::program::F32,
                   unwrap(t)->trainer().parameterShape(*i));
  std::memcpy(whole.raw(), data, static_cast<size_t>(whole.byteSize()));
  std::string message;
  if (!unwrap(t)->trainer().writeParameter(name, whole, message))
    return setError(error, message);
  return true;
}

/// The data set at `path` (NULL: the GPL-3 text) for `impl`'s model.
static bool openData(TrainerImpl &impl, const char *path, rt::Dataset &data,
                     char **error) {
  std::string message;
  if (!impl.session->runtime().openDataset(path ? path : "", data, message))
    return setError(error, message);
  return true;
}

bool gptcTrainerTrain(GptcTrainer t, const char *dataPath, int64_t steps,
                      double *loss, char **error) {
  TrainerImpl &impl = *unwrap(t);
  rt::Dataset data;
  if (!openData(impl, dataPath, data, error))
    return false;
  std::ostringstream log; // progress lines are the caller's to print
  std::string message;
  if (!impl.trainer().trainSteps(data, steps, log, message))
    return setError(error, message);
  if (loss)
    *loss = impl.trainer().getLastLoss();
  return true;
}

bool gptcTrainerTrainBatch(GptcTrainer t, const int32_t *tokens,
                           const int32_t *labels, int64_t rows, int64_t seqLen,
                           double *loss, double *norm, char **error) {
  TrainerImpl &impl = *unwrap(t);
  if (!tokens || !labels)
    return setError(error, "gptcTrainerTrainBatch: no tokens or labels");
  if (rows != impl.trainer().wholeBatchRows() ||
      seqLen != impl.options().seqLen)
    return setError(error, "gptcTrainerTrainBatch: a step's batch is " +
                               std::to_string(impl.trainer().wholeBatchRows()) +
                               " x " + std::to_string(impl.options().seqLen) +
                               " token ids, got " + std::to_string(rows) +
                               " x " + std::to_string(seqLen));
  rt::Tensor tk(::gptc::program::I32, {rows, seqLen}),
      lb(::gptc::program::I32, {rows, seqLen});
  for (int64_t i = 0; i < rows * seqLen; ++i) {
    for (int32_t id : {tokens[i], labels[i]})
      if (id < 0 || id >= impl.options().vocab)
        return setError(
            error, "gptcTrainerTrainBatch: token id " + std::to_string(id) +
                       " at " + std::to_string(i) + " is outside the " +
                       "vocabulary of " + std::to_string(impl.options().vocab));
    tk.data<int32_t>()[i] = tokens[i];
    lb.data<int32_t>()[i] = labels[i];
  }
  double l = 0, n = 0;
  std::string message;
  if (!impl.trainer().trainBatch(tk, lb, l, n, message))
    return setError(error, message);
  if (loss)
    *loss = l;
  if (norm)
    *norm = n;
  return true;
}

bool gptcTrainerEvaluate(GptcTrainer t, const char *dataPath, double *loss,
                         char **error) {
  TrainerImpl &impl = *unwrap(t);
  rt::Dataset data;
  if (!openData(impl, dataPath, data, error))
    return false;
  double value = 0;
  std::string message;
  if (!impl.trainer().evaluate(data, value, message))
    return setError(error, message);
  if (loss)
    *loss = value;
  return true;
}

bool gptcTrainerSaveCheckpoint(GptcTrainer t, const char *path, char **error) {
  std::string message;
  if (!path)
    return setError(error, "gptcTrainerSaveCheckpoint: no path");
  if (!unwrap(t)->trainer().saveCheckpoint(path, unwrap(t)->trainer().getStep(),
                                           message))
    return setError(error, message);
  return true;
}

bool gptcTrainerLoadCheckpoint(GptcTrainer t, const char *path, char **error) {
  std::string message;
  if (!path)
    return setError(error, "gptcTrainerLoadCheckpoint: no path");
  if (!unwrap(t)->trainer().loadCheckpoint(path, message))
    return setError(error, message);
  return true;
}

bool gptcTrainerLoadCheckpointChanged(GptcTrainer t, const char *path,
                                      char **notes, char **error) {
  if (!path)
    return setError(error, "gptcTrainerLoadCheckpointChanged: no path");
  TrainerImpl &impl = *unwrap(t);
  rt::ResumePolicy policy = impl.options().resumePolicy;
  policy.anyChange = true;
  impl.trainer().setResumePolicy(policy);
  std::string message;
  bool ok = impl.trainer().loadCheckpoint(path, message);
  impl.trainer().setResumePolicy(impl.options().resumePolicy);
  if (!ok)
    return setError(error, message);
  if (notes)
    *notes = strdup(impl.trainer().getResumeNotes().c_str());
  return true;
}

void gptcFreeString(char *string) { std::free(string); }
