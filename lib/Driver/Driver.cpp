//===- Driver.cpp - gptc's compiler driver --------------------------------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Driver/Driver.h"

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Target/CPU/CompileProgram.h"
#include "gptc/Target/CUDA/CompileKernels.h"
#include "gptc/Target/CUDA/Passes.h"
#include "gptc/Target/ExportProgram.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <charconv>
#include <map>

using namespace mlir;
using namespace mlir::gptc;
namespace pg = ::gptc::program;

std::optional<DeviceKind> mlir::gptc::parseDeviceKind(StringRef name) {
  return ::gptc::runtime::parseDeviceKind(name.str());
}

StringRef mlir::gptc::stringifyDeviceKind(DeviceKind kind) {
  return ::gptc::runtime::deviceKindName(kind);
}

LogicalResult CompileOptions::verify(std::string &error) const {
  if (rowRegisters < 0 || rowRegisters > 128) {
    error = "--cuda-row-registers takes 0 to 128, got " +
            std::to_string(rowRegisters);
    return failure();
  }
  if (bucketBytes < 0) {
    error = "--bucket-mb takes a size in MiB from 0 to 1000000, got a "
            "negative size";
    return failure();
  }
  if (pipeline.virtualStages && *pipeline.virtualStages < 1) {
    error = "--virtual-stages takes a count >= 1, got " +
            std::to_string(*pipeline.virtualStages);
    return failure();
  }
  return success();
}

void CompileOptions::fillTrainPipeline(TrainPipelineOptions &out) const {
  out.kernels = codegen;
  out.kernelTarget = cuda() ? KernelTarget::Cuda : KernelTarget::Cpu;
  out.bucketBytes = bucketBytes;
  out.zeroReduceEachMicrobatch = zeroReduceEachMicrobatch;
  out.gemmEpilogues = epilogues();
}

void CompileOptions::fillGpuLowering(
    GpuKernelLoweringPipelineOptions &out) const {
  out.chip = chip;
  out.rowRegisters = rowRegisters;
  // The virtual device loads the kernels as host code.
  out.format = device == DeviceKind::VirtualCUDA ? "host" : "bin";
}

/// Reports an error in the options, not in the description.
static LogicalResult optionError(const CompileOptions &options,
                                 MLIRContext *context, const Twine &message) {
  if (options.optionError)
    options.optionError(message);
  else
    emitError(UnknownLoc::get(context)) << message;
  return failure();
}

FailureOr<PipelinePlanning>
mlir::gptc::planPipeline(const ModelDescription &desc,
                         const CompileOptions &options) {
  Location meshLoc = desc.locate({{"mesh"}});
  MLIRContext *context = meshLoc.getContext();
  const ModelConfig &m = desc.getConfig();
  const PipelineOverrides &given = options.pipeline;
  // The caller's settings replace the description's.
  std::optional<PipelineScheduleKind> kind =
      given.schedule.value_or(m.pipelineSchedule);
  int64_t v = given.virtualStages.value_or(0);
  // The description's virtual stages go with its schedule.
  if (v == 0 && !(given.schedule && *kind != PipelineScheduleKind::Interleaved))
    v = m.virtualStages;
  if (v == 0)
    v = *kind == PipelineScheduleKind::Interleaved ? 2 : 1;
  if (v > 1 && *kind != PipelineScheduleKind::Interleaved)
    return optionError(options, context,
                       "--virtual-stages is for the interleaved schedule, "
                       "not " +
                           Twine(pipelineScheduleName(*kind)));
  int64_t p = m.pipelineParallel, micro = m.gradAccumSteps;
  if (p < 2)
    return emitError(meshLoc)
           << "--emit=schedule plans a pipeline: the mesh needs a pipeline "
              "axis of size 2 or more (e.g. --mesh pp=4)";
  // Every microbatch the same size on every data-parallel rank.
  if (m.batchSize % (m.dataParallel * micro) != 0)
    return emitError(desc.locate({{"training"}, {"batch_size"}}))
           << "a pipeline needs equal microbatches: batch_size (" << m.batchSize
           << ") is not a multiple of data-parallel size x "
           << "microbatches (" << m.dataParallel << " x " << micro << ")";
  std::optional<ModelSize> size = computeModelSize(m);
  if (!size)
    return emitError(meshLoc) << "cannot size this model";
  double C = static_cast<double>(m.modelDim), T = static_cast<double>(m.seqLen);
  double layerCost = 2.0 * size->layerParams + 4.0 * T * C;
  double headCost = 2.0 * m.vocabSize * C;
  std::string error;
  std::optional<PipelinePartition> partition;
  bool givenLayers = given.layers.has_value();
  std::vector<int64_t> layers = givenLayers ? *given.layers : m.pipelineLayers;
  if (layers.empty()) {
    partition =
        partitionPipeline(m.numLayers, p, v, layerCost, 0.0, headCost, error);
    if (!partition)
      return emitError(meshLoc) << error;
  } else {
    // Fixed by the user: each chunk's layers, checked against the model.
    auto fail = [&](const Twine &message) -> LogicalResult {
      if (givenLayers)
        return optionError(options, context, "--pipeline-layers: " + message);
      return emitError(desc.locate({{"parallel"}, {"pipeline_layers"}}))
             << message;
    };
    int64_t sum = 0;
    for (int64_t l : layers) {
      if (l < 1)
        return fail("every pipeline chunk needs a layer, got " + Twine(l));
      sum += l;
    }
    if (static_cast<int64_t>(layers.size()) != p * v)
      return fail(Twine(layers.size()) + " chunks given; the pipeline has " +
                  Twine(p) + " stages x " + Twine(v) +
                  " virtual stages = " + Twine(p * v));
    if (sum != m.numLayers)
      return fail("the chunks hold " + Twine(sum) + " layers; the model has " +
                  Twine(m.numLayers));
    PipelinePartition fixed;
    fixed.stages = p;
    fixed.virtualStages = v;
    fixed.layers = m.numLayers;
    int64_t first = 0;
    for (size_t c = 0; c < layers.size(); ++c) {
      fixed.chunks.push_back({first, first + layers[c]});
      first += layers[c];
      fixed.forwardCost.push_back(static_cast<double>(layers[c]) * layerCost +
                                  (c + 1 == layers.size() ? headCost : 0.0));
    }
    partition = std::move(fixed);
  }
  auto programs = buildPipelinePrograms(*partition, micro, *kind, error);
  if (!programs)
    return emitError(meshLoc) << error;
  // A schedule that cannot finish is refused here, whatever runs it.
  std::vector<double> equal(partition->forwardCost.size(), 1.0);
  if (!simulatePipeline(*programs, equal, v, error))
    return emitError(meshLoc) << error;
  return PipelinePlanning{*kind, v, micro, std::move(*partition),
                          std::move(*programs)};
}

LogicalResult
mlir::gptc::checkPipelineSupported(const ModelDescription &desc,
                                   const CompileOptions &options) {
  const ModelConfig &m = desc.getConfig();
  if (options.zeroReduceEachMicrobatch)
    return emitError(desc.locate({{"mesh"}}))
           << "--zero-reduce=microbatch: pipeline stages reduce their "
              "gradients in the runtime, once per step";
  if (m.skipNonFinite)
    return emitError(desc.locate({{"mesh"}}))
           << "pipeline stages stop at a non-finite step (nan_policy STOP); "
              "SKIP is not wired into the stages yet";
  return success();
}

LogicalResult mlir::gptc::runPasses(ModuleOp module,
                                    const CompileOptions &options,
                                    function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  if (options.configurePassManager && failed(options.configurePassManager(pm)))
    return failure();
  build(pm);
  return pm.run(module);
}

LogicalResult mlir::gptc::lowerTrainingStep(ModuleOp module,
                                            const CompileOptions &options) {
  TrainPipelineOptions pipeline;
  options.fillTrainPipeline(pipeline);
  return runPasses(module, options, [&](OpPassManager &pm) {
    buildTrainPipeline(pm, pipeline);
    // Every rank runs this step: its collectives agree by construction;
    // the pass says so (and proves a module of several programs).
    pm.addPass(createGptcVerifyCollectivesPass());
  });
}

LogicalResult mlir::gptc::emitProgram(ModuleOp module,
                                      ArrayRef<StringRef> names,
                                      const CompileOptions &options,
                                      ProgramCode code, pg::Program &program) {
  if (code == ProgramCode::None)
    return success();
  if (code == ProgramCode::Exported)
    return exportProgram(module, names, program);
  if (options.cuda()) {
    GpuKernelLoweringPipelineOptions gpu;
    options.fillGpuLowering(gpu);
    // (An empty std::function would make a non-null function_ref.)
    function_ref<LogicalResult(PassManager &)> configure;
    if (options.configurePassManager)
      configure = options.configurePassManager;
    return compileProgramForCuda(module, names, program, gpu, configure);
  }
  return compileProgram(module, names, program);
}

/// The runtime's plan of a pipeline: each stage's steps, the parameters in
/// @forward's order with their weight decay, the mesh's axes and the
/// optimizer's settings.
static LogicalResult fillPipelinePlan(
    const ModelDescription &desc, ModuleOp module, const PipelinePlanning &plan,
    ArrayRef<std::vector<PipelineOp>> programs, pg::Program &program) {
  pg::PipelinePlan &out = *program.mutable_pipeline();
  const ModelConfig &m = desc.getConfig();
  out.set_stages(m.pipelineParallel);
  out.set_virtual_stages(plan.virtualStages);
  out.set_microbatches(plan.microbatches);
  out.set_schedule(plan.kind == PipelineScheduleKind::GPipe ? pg::SCHEDULE_GPIPE
                   : plan.kind == PipelineScheduleKind::OneFOneB
                       ? pg::SCHEDULE_1F1B
                   : plan.kind == PipelineScheduleKind::ZeroBubbleH1
                       ? pg::SCHEDULE_ZB_H1
                       : pg::SCHEDULE_INTERLEAVED);
  for (const std::vector<PipelineOp> &ops : programs) {
    pg::PipelineStageProgram &stage = *out.add_programs();
    for (const PipelineOp &op : ops) {
      pg::PipelineStep &step = *stage.add_steps();
      step.set_kind(op.kind == PipelineOp::Forward ? pg::PipelineStep::FORWARD
                    : op.kind == PipelineOp::Backward
                        ? pg::PipelineStep::BACKWARD
                    : op.kind == PipelineOp::BackwardInput
                        ? pg::PipelineStep::BACKWARD_INPUT
                    : op.kind == PipelineOp::BackwardWeight
                        ? pg::PipelineStep::BACKWARD_WEIGHT
                    : op.kind == PipelineOp::Send ? pg::PipelineStep::SEND
                                                  : pg::PipelineStep::RECV);
      step.set_microbatch(op.microbatch);
      step.set_chunk(op.chunk);
      step.set_peer(op.peer);
      step.set_gradient(op.gradient);
    }
  }
  // The parameters in @forward's order, with their inits as the chunks'
  // functions export them, and the optimizer's settings.
  std::map<std::string, const pg::Value *> exported;
  for (const pg::Function &f : program.functions())
    for (int32_t id : f.inputs())
      if (f.values(id).role() == pg::ROLE_PARAMETER)
        exported[f.values(id).name()] = &f.values(id);
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  OptimizerAttr opt = getOptimizerConfig(module);
  if (!forward || !opt)
    return module.emitError("the pipeline needs @forward and its optimizer");
  double decay = opt.getWeightDecay().convertToDouble();
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    if (!name)
      continue;
    auto it = exported.find(name.str());
    if (it == exported.end())
      return forward.emitOpError("parameter '")
             << name.getValue() << "' is used by no pipeline chunk";
    pg::Value &v = *out.add_params();
    v = *it->second;
    v.set_id(static_cast<int32_t>(out.params_size() - 1));
    v.set_offset(-1);
    auto type = cast<RankedTensorType>(forward.getArgument(i).getType());
    bool embedding = bool(forward.getArgAttr(i, kEmbeddingTableAttrName));
    out.add_weight_decays(
        type.getRank() >= 2 && (!embedding || opt.getDecayEmbeddings()) ? decay
                                                                        : 0.0);
  }
  out.set_pipeline_axis(-1);
  out.set_data_axis(-1);
  out.set_tensor_axis(-1);
  for (auto [i, axis] : llvm::enumerate(desc.getMeshAxes())) {
    out.add_grid(axis.size);
    if (axis.kind == MeshAxis::Kind::Pipeline)
      out.set_pipeline_axis(static_cast<int64_t>(i));
    else if (axis.kind == MeshAxis::Kind::Data)
      out.set_data_axis(static_cast<int64_t>(i));
    else
      out.set_tensor_axis(static_cast<int64_t>(i));
  }
  out.set_zero_stage(m.zeroStage);
  out.set_beta1(opt.getBeta1().convertToDouble());
  out.set_beta2(opt.getBeta2().convertToDouble());
  out.set_eps(opt.getEps().convertToDouble());
  out.set_max_norm(opt.getGradClip().convertToDouble());
  pg::ScheduleParams &sched = *out.mutable_schedule_params();
  sched.set_peak(opt.getLr().convertToDouble());
  sched.set_min(opt.getMinLr().convertToDouble());
  sched.set_warmup(opt.getWarmupSteps());
  sched.set_total(opt.getTotalSteps());
  sched.set_decay(scheduleDecay(opt.getDecay()));
  if (m.precision == Precision::FP16) {
    // The rule of @train_step's gptc.loss_scale_update (gptc-optimizer).
    pg::LossScaleParams &scale = *out.mutable_loss_scale();
    scale.set_growth(2.0);
    scale.set_backoff(0.5);
    scale.set_interval(opt.getLossScaleGrowthInterval());
    out.set_initial_loss_scale(opt.getInitialLossScale().convertToDouble());
  }
  return success();
}

LogicalResult mlir::gptc::compilePipeline(const ModelDescription &desc,
                                          ModuleOp module,
                                          const CompileOptions &options,
                                          ProgramCode code,
                                          pg::Program &program) {
  if (failed(checkPipelineSupported(desc, options)))
    return failure();
  FailureOr<PipelinePlanning> plan = planPipeline(desc, options);
  if (failed(plan))
    return failure();
  int64_t n = static_cast<int64_t>(plan->partition.chunks.size());
  SmallVector<std::string> names;
  auto build = [&](OpPassManager &pm) {
    pm.addPass(createGptcVerifyModelPass());
    // Megatron blocks first (each chunk then holds its layers' blocks and
    // all-reduces over the tensor axis), as in the one-program step.
    pm.addPass(createGptcShardingPropagationPass());
    pm.addPass(createGptcTensorParallelPass());
    // bf16: the GEMMs' casts are ops of @forward, so each chunk keeps its
    // own (fp32 master weights and activations between stages).
    pm.addPass(createGptcMixedPrecisionPass());
    GptcPipelineSplitPassOptions split;
    for (int64_t c = 1; c < n; ++c)
      split.boundaries.push_back(plan->partition.chunks[c].first);
    pm.addPass(createGptcPipelineSplitPass(split));
    bool halves = splitsBackward(plan->kind);
    for (int64_t c = 0; c < n; ++c) {
      GptcAutodiffPassOptions ad;
      std::string chunk = "chunk" + std::to_string(c);
      ad.function = c + 1 < n ? chunk + "_objective" : chunk;
      ad.output = chunk + "_backward";
      pm.addPass(createGptcAutodiffPass(ad));
      names.push_back(chunk); // the last one's: for evaluation
      if (halves) {
        names.push_back(ad.output + "_input");
        names.push_back(ad.output + "_weight");
      } else {
        names.push_back(ad.output);
      }
    }
    pm.nest<func::FuncOp>().addPass(createCanonicalizerPass());
    pm.nest<func::FuncOp>().addPass(createCSEPass());
    // Zero-bubble schedules: each backward as its input-gradient and
    // weight-gradient halves, which the stages run at different times.
    if (halves)
      pm.addPass(createGptcSplitBackwardPass());
    OpPassManager &func = pm.nest<func::FuncOp>();
    // The GEMM epilogues as for the one-program step (by default on the GPU
    // only).
    if (options.epilogues())
      func.addPass(createGptcFuseGemmEpiloguesPass());
    if (options.codegen) {
      GptcFormKernelsPassOptions form;
      form.target = options.cuda() ? KernelTarget::Cuda : KernelTarget::Cpu;
      func.addPass(createGptcFormKernelsPass(form));
    }
    func.addPass(createGptcPlanBuffersPass());
    // Each stage's program in the IR (calls, sends, receives), checked for
    // deadlocks; the runtime's plan is read back from it.
    GptcPipelineSchedulePassOptions schedule;
    schedule.schedule = plan->kind;
    schedule.microbatches = plan->microbatches;
    pm.addPass(createGptcPipelineSchedulePass(schedule));
    // Every group of ranks issues the same collectives in the same order,
    // and no stage waits forever (the programs the runtime runs).
    pm.addPass(createGptcVerifyCollectivesPass());
  };
  if (failed(runPasses(module, options, build)))
    return failure();
  FailureOr<std::vector<std::vector<PipelineOp>>> programs =
      readPipelinePrograms(module);
  if (failed(programs))
    return failure();
  SmallVector<StringRef> refs(names.begin(), names.end());
  if (failed(emitProgram(
          module, refs, options,
          code == ProgramCode::None ? ProgramCode::Exported : code, program)))
    return failure();
  return fillPipelinePlan(desc, module, *plan, *programs, program);
}

LogicalResult mlir::gptc::compileTraining(const ModelDescription &desc,
                                          ModuleOp module,
                                          const CompileOptions &options,
                                          ProgramCode code,
                                          pg::Program &program) {
  if (desc.getConfig().pipelineParallel > 1)
    return compilePipeline(desc, module, options, code, program);
  if (failed(lowerTrainingStep(module, options)))
    return failure();
  return emitProgram(module, {"forward", "train_step"}, options, code, program);
}

/// A double as the shortest text that reads back as it (0.0006, 1e-08).
static std::string shortest(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

/// TrainSettings.recipe: what decides the steps from a checkpoint on, under
/// the description's paths. The mesh, ZeRO, accumulation and recomputation
/// are left out: a checkpoint continues on any layout.
static void setRecipe(const ModelConfig &m, pg::TrainSettings &t) {
  auto add = [&](StringRef name, std::string value) {
    pg::Setting *s = t.add_recipe();
    s->set_name(name.str());
    s->set_value(std::move(value));
  };
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  add("model.vocab_size", std::to_string(m.vocabSize));
  add("model.context_length", std::to_string(m.contextLength));
  add("model.num_layers", std::to_string(m.numLayers));
  add("model.num_heads", std::to_string(m.numHeads));
  add("model.model_dim", std::to_string(m.modelDim));
  add("model.mlp_ratio",
      m.modelDim ? std::to_string(m.mlpDim / m.modelDim) : "0");
  add("model.tied_embeddings", flag(m.tiedEmbeddings));
  add("model.bias", flag(m.bias));
  add("model.layer_norm_epsilon", shortest(m.layerNormEpsilon));
  add("training.batch_size", std::to_string(m.batchSize));
  add("training.seq_len", std::to_string(m.seqLen));
  add("training.steps", std::to_string(m.steps));
  add("training.precision", m.precision == Precision::BF16   ? "BF16"
                            : m.precision == Precision::FP16 ? "FP16"
                                                             : "FP32");
  if (m.precision == Precision::FP16)
    add("training.loss_scaling.growth_interval",
        std::to_string(m.lossScaleGrowthInterval));
  add("training.grad_clip", shortest(m.optimizer.gradClip));
  add("training.seed", std::to_string(m.dataSeed));
  const OptimizerConfig &o = m.optimizer;
  // The rate the step uses: a reference batch's, scaled.
  add("training.optimizer.lr", shortest(o.lr));
  add("training.optimizer.beta1", shortest(o.beta1));
  add("training.optimizer.beta2", shortest(o.beta2));
  add("training.optimizer.eps", shortest(o.eps));
  add("training.optimizer.weight_decay", shortest(o.weightDecay));
  add("training.optimizer.decay_embeddings", flag(o.decayEmbeddings));
  add("training.lr_schedule.decay", stringifyLrDecay(o.decay).upper());
  add("training.lr_schedule.warmup_steps", std::to_string(o.warmupSteps));
  add("training.lr_schedule.min_lr_ratio", shortest(o.minLrRatio));
}

void mlir::gptc::setTrainSettings(const ModelDescription &desc, StringRef text,
                                  pg::Program &program) {
  const ModelConfig &m = desc.getConfig();
  // The model's name, which checkpoints record (a pipeline's module, cut
  // into stages, may not carry it).
  program.set_model(desc.getName().str());
  pg::TrainSettings &t = *program.mutable_train();
  t.clear_recipe();
  setRecipe(m, t);
  t.set_description(text.str());
  t.set_micro_batch(m.microBatchSize);
  t.set_seq_len(m.seqLen);
  t.set_vocab(m.vocabSize);
  t.set_steps(m.steps);
  t.set_eval_interval(m.evalInterval);
  t.set_checkpoint_interval(m.checkpointInterval);
  t.set_keep_checkpoints(m.keepCheckpoints);
  t.set_skip_non_finite(m.skipNonFinite);
  t.set_init_seed(m.initSeed);
  t.set_data_seed(m.dataSeed);
}

LogicalResult mlir::gptc::writeArtifact(const pg::Program &program,
                                        Location loc, raw_ostream &os) {
  std::string bytes;
  if (!program.SerializeToString(&bytes))
    return emitError(loc, "the artifact does not serialize (over 2 GiB?)");
  os << bytes;
  return success();
}
