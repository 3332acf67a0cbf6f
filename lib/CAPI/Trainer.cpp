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
/// What a GptcTrainer points to. The program outlives the trainer that
/// runs it.
struct TrainerImpl {
  /// The processes of a mesh (null for one device); destroyed last.
  std::unique_ptr<rt::Communicator> comm;
  ::gptc::program::Program program;
  rt::TrainOptions options;
  /// One program per device, or a pipeline mesh's stage.
  std::unique_ptr<rt::TrainingRun> trainer;
  int64_t batchSize = 0;
  std::string mesh;
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

static const char *kDefaultData = "/usr/share/common-licenses/GPL-3";

/// The hardware description `name` names: a preset or a file.
static FailureOr<HardwareSpec> loadHardware(const std::string &name,
                                            MLIRContext &context,
                                            llvm::raw_ostream &os) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  std::string text;
  for (const auto &[preset, body] : hardwarePresets())
    if (preset == name)
      text = body;
  if (text.empty()) {
    std::string error;
    if (llvm::sys::fs::exists(name)) {
      std::unique_ptr<llvm::MemoryBuffer> file = openBoundedInput(
          name, kMaxDescriptionBytes, "hardware description", error);
      if (!file)
        return os << error, failure();
      sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
      return parseHardware(sourceMgr, &context);
    }
    std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(name, &error);
    if (!file)
      return os << "hardware '" << name
                << "' is neither a preset nor a readable file",
             failure();
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  } else {
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "<preset " + name + ">"),
        llvm::SMLoc());
  }
  return parseHardware(sourceMgr, &context);
}

/// The parallel settings `options` asks for; "auto" plans them for the
/// description in `sourceMgr`.
static FailureOr<DescriptionOverrides>
overridesFor(const GptcTrainerOptions &options, llvm::SourceMgr &sourceMgr,
             MLIRContext &context, llvm::raw_ostream &os) {
  DescriptionOverrides overrides;
  std::string error;
  std::string mesh = options.mesh ? options.mesh : "";
  if (mesh == "auto") {
    if (!options.hardware || options.devices < 1)
      return os << "mesh \"auto\" needs a hardware description and "
                   "devices >= 1",
             failure();
    FailureOr<HardwareSpec> hw = loadHardware(options.hardware, context, os);
    if (failed(hw))
      return failure();
    FailureOr<ModelDescription> desc = ModelDescription::parse(
        sourceMgr, &context, DescriptionOverrides::unplanned());
    if (failed(desc))
      return failure();
    if (!desc->getOnnxModelPath().empty())
      return os << "mesh \"auto\" plans gptc's own GPTs; an ONNX model "
                   "takes a mesh",
             failure();
    std::optional<PlanSearch> search =
        searchPlans(desc->getConfig(), *hw, options.devices, error);
    if (!search || search->plans.empty())
      return os << "mesh \"auto\": "
                << (search ? "no plan fits the devices' memory" : error),
             failure();
    if (failed(overrides.setFromPlan(search->plans.front().first, error)))
      return os << error, failure();
    return overrides;
  }
  if (!mesh.empty() && failed(overrides.parseMesh(mesh, error)))
    return os << error, failure();
  if (options.zeroStage >= 0)
    overrides.zeroStage = options.zeroStage;
  return overrides;
}

/// Compiles `modelPath` into `impl`; diagnostics go to `diagnostics`.
static bool compile(const std::string &modelPath,
                    const GptcTrainerOptions &options, TrainerImpl &impl,
                    std::string &diagnostics) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::raw_string_ostream os(diagnostics);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);

  std::optional<OnnxImport> onnx;
  OnnxTrainingShape shape;
  std::string description, error;
  if (llvm::StringRef(modelPath).ends_with(".onnx")) {
    FailureOr<OnnxImport> imported =
        importOnnxFileForTraining(modelPath, &context, {}, shape);
    if (failed(imported))
      return false;
    onnx = std::move(*imported);
    DescriptionOverrides flags;
    if (options.mesh && *options.mesh && std::string(options.mesh) != "auto" &&
        failed(flags.parseMesh(options.mesh, error)))
      return os << error, false;
    FailureOr<std::string> text =
        onnxTrainingDescription(modelPath, shape, flags, error);
    if (failed(text))
      return os << error, false;
    description = *text;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(
            description, modelPath + " (training settings)"),
        llvm::SMLoc());
  } else {
    std::unique_ptr<llvm::MemoryBuffer> buffer = openBoundedInput(
        modelPath, kMaxDescriptionBytes, "model description", error);
    if (!buffer)
      return os << error, false;
    description = buffer->getBuffer().str();
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  }
  FailureOr<DescriptionOverrides> overrides =
      overridesFor(options, sourceMgr, context, os);
  if (failed(overrides))
    return false;
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(sourceMgr, &context, *overrides);
  if (failed(desc))
    return false;
  if (options.steps < 0)
    return os << "steps takes a step count >= 1 (0: the description's), got "
              << options.steps,
           false;
  if (options.steps > 0)
    desc->setSteps(options.steps);
  // The description's own schedule is checked; a caller's `steps` is a
  // run it asked for (a warning would reach no one: diagnostics are
  // returned on failure only).
  if (options.steps == 0 && failed(desc->checkSchedule()))
    return false;
  const ModelConfig &m = desc->getConfig();
  bool pipeline = m.pipelineParallel > 1;
  int64_t devices = m.devices();
  for (const MeshAxis &axis : desc->getMeshAxes())
    impl.mesh += (impl.mesh.empty() ? "" : ",") + axis.name + "=" +
                 std::to_string(axis.size);
  if (failed(resolveOnnxModel(*desc, &context, {}, onnx, shape)))
    return false;
  if (pipeline && onnx)
    return os << "an ONNX model trains on meshes without a pipeline axis "
                 "(its initializers are not split into stages)",
           false;
  std::map<std::string, std::string> initial;
  OwningOpRef<ModuleOp> module =
      buildTrainingModule(*desc, &context, onnx, initial);
  if (!module)
    return false;
  // A call that fails leaves the trainer as it was: the step's program
  // carries the skip flag, so that a non-finite step changes no parameter
  // or moment whatever nan_policy says (the policy itself, what the
  // caller is told, stays the description's). Pipeline stages guard their
  // own update (PipelineTrainer).
  if (!pipeline)
    GptcDialect::NanPolicyAttrHelper(&context).setAttr(
        *module, NanPolicyAttr::get(&context, NanPolicy::Skip));
  // The device: the CPU, or the CUDA runtime on a GPU or the virtual
  // CUDA device (GEMM epilogues, the GPU's kernel grouping, an sm_90 image
  // or the virtual device's host code).
  std::string device =
      options.device && *options.device ? options.device : "cpu";
  std::optional<DeviceKind> kind = parseDeviceKind(device);
  if (!kind)
    return os << "device '" << device
              << "': the C API trains on cpu, cuda or virtual-cuda",
           false;
  CompileOptions compileOptions;
  compileOptions.device = *kind;
  bool cuda = compileOptions.cuda();
#ifdef GPTC_HAVE_CUDA
  if (*kind == DeviceKind::VirtualCUDA &&
      !::gptc::cuda::useVirtualDevice(error))
    return os << "device virtual-cuda: " << error, false;
  if (cuda && !rt::cudaDeviceAvailable(error))
    return os << error, false;
#else
  if (cuda)
    return os << "device " << device
              << ": this gptc was built without the CUDA runtime",
           false;
#endif
  if (failed(compileTraining(*desc, *module, compileOptions,
                             ProgramCode::Compiled, impl.program)))
    return false;

  // The artifact's settings, as gptc train and gptc-runtime start from;
  // the caller drives the steps, evaluations and checkpoints, so none of
  // them runs on its own, and progress lines are the caller's to print.
  setTrainSettings(*desc, description, impl.program);
  rt::TrainOptions &opts = impl.options;
  opts = rt::TrainOptions::fromProgram(impl.program);
  opts.model = desc->getName().str();
  opts.logInterval = 0;
  opts.evalInterval = 0;
  opts.checkpointInterval = 0;
  opts.collectiveTimeout = 0;
  // Loading a checkpoint of other settings, the schedule's length among
  // them, is refused unless the caller asks for it.
  opts.resumePolicy.stepsChange = false;
  opts.resumePolicy.whatToDo =
      "Load it with these settings by gptcTrainerLoadCheckpointChanged "
      "(Python: load(path, changed=True))";
  impl.batchSize = m.batchSize;
  // The processes, the device and the trainer as gptc train makes them
  // (rt::Session): a pipeline's stages, each process its own
  // (docs/Pipeline.md), or one program per device.
  if (!rt::startProcesses(devices, pipeline, impl.comm, error))
    return os << (impl.comm ? error : "cannot start MPI"), false;
  // The threads as gptc train sets them: this rank's share of the cores,
  // OMP_NUM_THREADS at most that, the OpenMP variables checked.
  if (rt::shareCores(impl.comm.get(), error).empty())
    return os << error, false;
  rt::DeviceOptions where;
  where.cuda = cuda;
  impl.trainer =
      rt::openTrainingRun(impl.program, opts, where, impl.comm.get(),
                          std::move(initial), /*resume=*/false, error);
  if (!impl.trainer)
    return os << error, false;
  return true;
}

GptcTrainer gptcTrainerCreate(const char *modelPath,
                              const GptcTrainerOptions *options, char **error) {
  if (!modelPath) {
    setError(error, "gptcTrainerCreate: no model path");
    return {nullptr};
  }
  GptcTrainerOptions defaults = gptcTrainerOptionsGetDefault();
  auto impl = std::make_unique<TrainerImpl>();
  std::string diagnostics;
  if (!compile(modelPath, options ? *options : defaults, *impl, diagnostics)) {
    setError(error,
             diagnostics.empty() ? "compiling the model failed" : diagnostics);
    return {nullptr};
  }
  return {impl.release()};
}

void gptcTrainerDestroy(GptcTrainer trainer) { delete unwrap(trainer); }

int64_t gptcTrainerGetRank(GptcTrainer t) {
  return unwrap(t)->comm ? unwrap(t)->comm->rank() : 0;
}
int64_t gptcTrainerGetNumProcesses(GptcTrainer t) {
  return unwrap(t)->comm ? unwrap(t)->comm->size() : 1;
}
const char *gptcTrainerGetMesh(GptcTrainer t) {
  return unwrap(t)->mesh.c_str();
}

int64_t gptcTrainerGetStep(GptcTrainer t) {
  return unwrap(t)->trainer->getStep();
}
int64_t gptcTrainerGetNumSteps(GptcTrainer t) {
  return unwrap(t)->options.steps;
}
int64_t gptcTrainerGetBatchSize(GptcTrainer t) { return unwrap(t)->batchSize; }
int64_t gptcTrainerGetSeqLen(GptcTrainer t) {
  return unwrap(t)->options.seqLen;
}

int64_t gptcTrainerGetNumTensors(GptcTrainer t) {
  return static_cast<int64_t>(unwrap(t)->trainer->parameterNames().size());
}

/// The tensor `index` names, or null when out of range.
static bool validTensor(GptcTrainer t, int64_t index) {
  return index >= 0 && index < gptcTrainerGetNumTensors(t);
}

const char *gptcTrainerGetTensorName(GptcTrainer t, int64_t index) {
  if (!validTensor(t, index))
    return nullptr;
  return unwrap(t)->trainer->parameterNames()[index].c_str();
}
int64_t gptcTrainerGetTensorRank(GptcTrainer t, int64_t index) {
  if (!validTensor(t, index))
    return -1;
  return static_cast<int64_t>(unwrap(t)->trainer->parameterShape(index).size());
}
int64_t gptcTrainerGetTensorDim(GptcTrainer t, int64_t index, int64_t dim) {
  if (!validTensor(t, index) || dim < 0 ||
      dim >= gptcTrainerGetTensorRank(t, index))
    return -1;
  return unwrap(t)->trainer->parameterShape(index)[dim];
}
int64_t gptcTrainerGetNumParameters(GptcTrainer t) {
  return unwrap(t)->trainer->numParameters();
}

/// The index of the parameter `name` holding `count` float32 elements.
static std::optional<size_t> parameterIndex(GptcTrainer t, const char *name,
                                            int64_t count, char **error) {
  const auto &names = unwrap(t)->trainer->parameterNames();
  for (size_t i = 0; name && i < names.size(); ++i) {
    if (names[i] != name)
      continue;
    int64_t n = 1;
    for (int64_t d : unwrap(t)->trainer->parameterShape(i))
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
  if (!unwrap(t)->trainer->wholeParameters(whole, message))
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
                   unwrap(t)->trainer->parameterShape(*i));
  std::memcpy(whole.raw(), data, static_cast<size_t>(whole.byteSize()));
  std::string message;
  if (!unwrap(t)->trainer->writeParameter(name, whole, message))
    return setError(error, message);
  return true;
}

/// The data set at `path` (NULL: the GPL-3 text) for `impl`'s model.
static bool openData(const TrainerImpl &impl, const char *path,
                     rt::Dataset &data, char **error) {
  std::string message;
  if (!rt::Dataset::open(path ? path : kDefaultData, "", impl.options.seqLen,
                         impl.options.vocab, data, message))
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
  if (!impl.trainer->trainSteps(data, steps, log, message))
    return setError(error, message);
  if (loss)
    *loss = impl.trainer->getLastLoss();
  return true;
}

bool gptcTrainerTrainBatch(GptcTrainer t, const int32_t *tokens,
                           const int32_t *labels, int64_t rows, int64_t seqLen,
                           double *loss, double *norm, char **error) {
  TrainerImpl &impl = *unwrap(t);
  if (!tokens || !labels)
    return setError(error, "gptcTrainerTrainBatch: no tokens or labels");
  if (rows != impl.trainer->wholeBatchRows() || seqLen != impl.options.seqLen)
    return setError(error, "gptcTrainerTrainBatch: a step's batch is " +
                               std::to_string(impl.trainer->wholeBatchRows()) +
                               " x " + std::to_string(impl.options.seqLen) +
                               " token ids, got " + std::to_string(rows) +
                               " x " + std::to_string(seqLen));
  rt::Tensor tk(::gptc::program::I32, {rows, seqLen}),
      lb(::gptc::program::I32, {rows, seqLen});
  for (int64_t i = 0; i < rows * seqLen; ++i) {
    for (int32_t id : {tokens[i], labels[i]})
      if (id < 0 || id >= impl.options.vocab)
        return setError(
            error, "gptcTrainerTrainBatch: token id " + std::to_string(id) +
                       " at " + std::to_string(i) + " is outside the " +
                       "vocabulary of " + std::to_string(impl.options.vocab));
    tk.data<int32_t>()[i] = tokens[i];
    lb.data<int32_t>()[i] = labels[i];
  }
  double l = 0, n = 0;
  std::string message;
  if (!impl.trainer->trainBatch(tk, lb, l, n, message))
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
  if (!impl.trainer->evaluate(data, value, message))
    return setError(error, message);
  if (loss)
    *loss = value;
  return true;
}

bool gptcTrainerSaveCheckpoint(GptcTrainer t, const char *path, char **error) {
  std::string message;
  if (!path)
    return setError(error, "gptcTrainerSaveCheckpoint: no path");
  if (!unwrap(t)->trainer->saveCheckpoint(path, unwrap(t)->trainer->getStep(),
                                          message))
    return setError(error, message);
  return true;
}

bool gptcTrainerLoadCheckpoint(GptcTrainer t, const char *path, char **error) {
  std::string message;
  if (!path)
    return setError(error, "gptcTrainerLoadCheckpoint: no path");
  if (!unwrap(t)->trainer->loadCheckpoint(path, message))
    return setError(error, message);
  return true;
}

bool gptcTrainerLoadCheckpointChanged(GptcTrainer t, const char *path,
                                      char **notes, char **error) {
  if (!path)
    return setError(error, "gptcTrainerLoadCheckpointChanged: no path");
  TrainerImpl &impl = *unwrap(t);
  rt::ResumePolicy policy = impl.options.resumePolicy;
  policy.anyChange = true;
  impl.trainer->setResumePolicy(policy);
  std::string message;
  bool ok = impl.trainer->loadCheckpoint(path, message);
  impl.trainer->setResumePolicy(impl.options.resumePolicy);
  if (!ok)
    return setError(error, message);
  if (notes)
    *notes = strdup(impl.trainer->getResumeNotes().c_str());
  return true;
}

void gptcFreeString(char *string) { std::free(string); }
