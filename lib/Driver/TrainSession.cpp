//===- TrainSession.cpp - One home for a training run ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Driver/TrainSession.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/PipelineTrainer.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace mlir::gptc;
namespace rt = ::gptc::runtime;

/// "training tiny (N parameters) on DATA (...), batch B x T, steps a..b",
/// the learning rate, and the mesh: the leader's notes at the start.
static std::vector<std::string> describeRun(const ModelDescription &desc,
                                            const rt::RunSession &run,
                                            bool fromOnnx,
                                            const CompileOptions &options) {
  const ModelConfig &m = desc.getConfig();
  const rt::TrainingRun &trainer = run.trainer();
  const rt::TrainOptions &opts = run.trainOptions();
  const rt::Dataset &data = run.data();
  bool pipeline = run.program().has_pipeline();
  std::vector<std::string> lines;
  auto add = [&](auto &&write) {
    std::string text;
    llvm::raw_string_ostream os(text);
    write(os);
    lines.push_back(std::move(text));
  };
  if (fromOnnx)
    add([&](llvm::raw_ostream &os) {
      os << "the model is the ONNX graph " << desc.getOnnxModelPath()
         << " (its initializers are the initial parameters";
      if (pipeline)
        os << "; its " << m.numLayers << " raised blocks cut into the stages";
      os << ")";
    });
  add([&](llvm::raw_ostream &os) {
    os << "training " << opts.model << " (" << trainer.numParameters()
       << " parameters)";
    if (run.options().openData) {
      os << " on " << data.getPath();
      if (!pipeline)
        os << " ("
           << (data.trainShards() > 1
                   ? std::to_string(data.trainShards()) + " files, "
                   : std::string())
           << data.trainSize() << " + " << data.validationSize()
           << (std::string(data.kind()) == "text" ? " bytes" : " tokens")
           << ")";
    }
    os << ", batch " << m.batchSize << " x " << opts.seqLen << ", steps "
       << trainer.getStep() << ".." << opts.steps;
  });
  add([&](llvm::raw_ostream &os) {
    os << "learning rate " << describeLearningRate(m);
  });
  if (pipeline) {
    const ::gptc::program::PipelinePlan &plan = run.program().pipeline();
    add([&](llvm::raw_ostream &os) {
      os << "pipeline of " << plan.stages() << " stages"
         << (plan.virtual_stages() > 1
                 ? " x " + std::to_string(plan.virtual_stages()) +
                       " virtual stages"
                 : std::string())
         << ", " << rt::scheduleName(plan.schedule()) << ", "
         << plan.microbatches() << " microbatches of " << m.microBatchSize
         << " sequences"
         << (m.dataParallel > 1 ? ", " + std::to_string(m.dataParallel) +
                                      " data-parallel replicas"
                                : std::string())
         << (m.tensorParallel > 1
                 ? ", tensor parallel " + std::to_string(m.tensorParallel)
                 : std::string())
         << (m.zeroStage > 0 ? ", ZeRO-" + std::to_string(m.zeroStage)
                             : std::string());
    });
    if (options.cuda())
      add([&](llvm::raw_ostream &os) {
        os << "stage 0 on " << trainer.device()
           << " (state and update on the device)";
      });
    return lines;
  }
  if (options.cuda())
    add([&](llvm::raw_ostream &os) { os << "on " << trainer.device(); });
  if (m.devices() > 1 || m.gradAccumSteps > 1)
    add([&](llvm::raw_ostream &os) {
      os << m.devices() << " processes: data parallel " << m.dataParallel
         << ", tensor parallel " << m.tensorParallel
         << (m.sequenceParallel ? " (sequence parallel)" : "")
         << (m.contextParallel > 1
                 ? ", context parallel " + std::to_string(m.contextParallel) +
                       (m.contextAllGather ? " (all-gather)" : " (ring)")
                 : std::string())
         << ", ZeRO stage " << m.zeroStage << ", " << m.gradAccumSteps
         << " microbatch(es) of " << m.microBatchSize << " sequences per rank";
    });
  return lines;
}

/// The device `options` asks for, checked before compiling (a cubin for
/// GPT-2 takes half a minute).
static LogicalResult checkDevice(const TrainRequest &request,
                                 const CompileOptions &options,
                                 std::string &error) {
  if (!options.cuda())
    return success();
  if (request.run.device.checkResidency) {
    error = "--check-residency emulates a device's memory on the CPU; it "
            "does not go with --device cuda";
    return failure();
  }
  if (!options.codegen) {
    error = "--device cuda runs generated kernels; --codegen=false is for "
            "the CPU";
    return failure();
  }
  return success(rt::prepareDevice(options.device, error));
}

std::unique_ptr<TrainSession> TrainSession::create(const TrainRequest &request,
                                                   MLIRContext &context,
                                                   SessionObserver &observer) {
  // Before the processes connect, under an MPI launcher every rank reads
  // the same command line and files and finds the same error: rank 0 says
  // it, and prints the diagnostics (errors, warnings, remarks); the others
  // compile quietly (their launcher reports their exit status). A rank
  // whose files differ from rank 0's could fail alone, silently:
  // docs/Training.md says to keep the inputs the same on every host.
  bool quietRank = !request.reportOnEveryRank && rt::launcherRank() > 0;
  auto fail = [&](const std::string &message) {
    if (!quietRank)
      observer.error(message);
    return nullptr;
  };
  llvm::raw_ostream &diagnostics =
      quietRank ? llvm::nulls() : observer.diagnostics();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnostics);
  std::optional<ScopedDiagnosticHandler> quiet;
  if (quietRank)
    quiet.emplace(&context, [](Diagnostic &) { return success(); });

  // 1. The model: a description, or an ONNX graph whose training settings
  //    are gptc's defaults and the overrides, written as a description
  //    that names the graph (docs/Onnx.md, "Training"; a description may
  //    also name one: onnx_model).
  std::string description, error;
  std::optional<OnnxImport> onnx;
  OnnxTrainingShape onnxShape;
  if (StringRef(request.modelPath).ends_with(".onnx")) {
    FailureOr<OnnxImport> imported = importOnnxFileForTraining(
        request.modelPath, &context, request.onnx, onnxShape);
    if (failed(imported))
      return nullptr;
    onnx = std::move(*imported);
    FailureOr<std::string> text = onnxTrainingDescription(
        request.modelPath, onnxShape,
        request.autoMesh ? onnxPlanningOverrides(request.autoMesh->devices,
                                                 request.overrides)
                         : request.overrides,
        error);
    if (failed(text))
      return fail(error);
    description = *text;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(
            description, request.modelPath + " (training settings)"),
        llvm::SMLoc());
  } else {
    auto buffer = openBoundedInput(request.modelPath, kMaxDescriptionBytes,
                                   "model description", error);
    if (!buffer)
      return fail(error);
    description = buffer->getBuffer().str();
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  }

  // 2. The description with the overrides, or planned for `--mesh auto`
  //    (the plan's compiler choices go into the options).
  CompileOptions options = request.compile;
  auto parse = [&](const DescriptionOverrides &overrides)
      -> FailureOr<ModelDescription> {
    if (!request.autoMesh)
      return ModelDescription::parse(sourceMgr, &context, overrides);
    FailureOr<ModelDescription> planned = planDescription(
        sourceMgr, context, *request.autoMesh, overrides,
        onnx ? &onnxShape : nullptr, request.onnx, options, diagnostics, error);
    if (failed(planned) && !error.empty())
      fail(error);
    return planned;
  };
  FailureOr<ModelDescription> desc = parse(request.overrides);
  if (failed(desc))
    return nullptr;
  // Under a launcher of N processes, a description without a mesh trains
  // data parallel over them, as torchrun's users expect.
  int world = rt::launcherSize();
  if (request.meshFromLauncher && world > 1 && desc->getMeshAxes().empty() &&
      !request.overrides.mesh && !request.autoMesh) {
    DescriptionOverrides overrides = request.overrides;
    if (failed(overrides.parseMesh("dp=" + std::to_string(world), error)))
      return fail(error);
    desc = parse(overrides);
    if (failed(desc))
      return nullptr;
    if (!quietRank)
      observer.note("mesh dp=" + std::to_string(world) + ": the " +
                    std::to_string(world) +
                    " processes the launcher started (the description has "
                    "no mesh and --mesh is not given)");
  }
  if (failed(resolveOnnxModel(*desc, &context, request.onnx, onnx, onnxShape)))
    return nullptr;
  if (failed(checkDevice(request, options, error)))
    return fail(error);
  if (request.nanPolicy)
    desc->setSkipNonFinite(*request.nanPolicy == NanPolicy::Skip);
  const ModelConfig &m = desc->getConfig();
  bool pipeline = m.pipelineParallel > 1;
  if (!pipeline && options.pipeline.any())
    return fail("--pipeline-schedule, --virtual-stages and --pipeline-layers "
                "shape a pipeline; this mesh has no pipeline axis (--mesh "
                "pp=N)");
  if (pipeline) {
    if (failed(checkPipelineSupported(*desc, options)))
      return nullptr;
    if (request.run.profile || !request.run.profileJson.empty())
      return fail(rt::kPipelineProfileRefusal);
  }
  // 3. The schedule's length: steps shorter than the description's
  //    warm-up are a short trial (a warning); a warm-up the request or
  //    the description makes longer than the run is an error.
  if (request.steps)
    desc->setSteps(*request.steps);
  if (failed(desc->checkSchedule(request.steps.has_value() &&
                                 !request.overrides.warmupSteps)))
    return nullptr;
  if (request.run.stopAt && *request.run.stopAt > m.steps)
    return fail("--stop-at-step " + std::to_string(*request.run.stopAt) +
                " is past the run's last step (" + std::to_string(m.steps) +
                ", --steps): it stops where the schedule ends anyway");

  // 4. The processes and the program. A pipeline connects first
  //    (compiling a large model takes minutes, and each stage compiles its
  //    own); one program per device runs under MPI when the mesh has
  //    several devices or an MPI launcher started it (so that a mismatch
  //    is reported, not run N times).
  auto session = std::make_unique<TrainSession>();
  session->session =
      std::make_unique<rt::RunSession>(observer, request.run, "gptc");
  rt::RunSession &run = *session->session;
  if (pipeline && !run.connect(m.devices(), /*mpi=*/true))
    return nullptr;
  std::map<std::string, std::string> initialValues;
  bool fromOnnx = onnx.has_value();
  OwningOpRef<ModuleOp> module =
      buildTrainingModule(*desc, &context, onnx, initialValues);
  if (module && request.guardEveryStep && !pipeline)
    GptcDialect::NanPolicyAttrHelper(&context).setAttr(
        *module, NanPolicyAttr::get(&context, NanPolicy::Skip));
  ::gptc::program::Program program;
  if (!module || failed(compileTraining(*desc, *module, options,
                                        ProgramCode::Compiled, program))) {
    run.abort();
    return nullptr;
  }
  if (!pipeline && !run.connect(m.devices(), /*mpi=*/false))
    return nullptr;
  // The artifact's training settings (what `gptc --emit=artifact` writes
  // for gptc-runtime, so that both start from the same), then the run's.
  setTrainSettings(*desc, description, program);
  if (!run.open(std::move(program), std::move(initialValues)))
    return nullptr;
  if (run.leader())
    for (const std::string &line : describeRun(*desc, run, fromOnnx, options))
      observer.note(line);
  for (const MeshAxis &axis : desc->getMeshAxes())
    session->meshText += (session->meshText.empty() ? "" : ",") + axis.name +
                         "=" + std::to_string(axis.size);
  session->batch = m.batchSize;
  return session;
}
