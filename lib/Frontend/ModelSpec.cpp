//===- ModelSpec.cpp - Parse and validate model descriptions --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every syntax and validation error points at its field, with a caret,
// through MLIR's SourceMgr diagnostic handler (TextProtoSource keeps the
// fields' positions).
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/ModelSpec.h"

#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Analysis/Planner.h"

#include "gptc/Frontend/TextProto.h"
#include "gptc/Frontend/model_spec.pb.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>

using namespace mlir;
using namespace mlir::gptc;
namespace pb = google::protobuf;
using ::gptc::spec::Axis;
using ::gptc::spec::ModelSpec;
using ::gptc::spec::Parallelism;
using ::gptc::spec::Training;

//===----------------------------------------------------------------------===//
// Locations
//===----------------------------------------------------------------------===//

namespace {
struct OverrideFlag {
  std::vector<std::string> path;
  std::string text;
  int column;
};
} // namespace

struct ModelDescription::Impl {
  TextProtoSource source;
  ModelSpec spec;
  MLIRContext *context;
  /// Fields the command line replaced, with the flag that did: their
  /// errors are reported at the flag, not in the file.
  std::vector<OverrideFlag> flags;

  Impl(StringRef text, StringRef fileName, MLIRContext *context)
      : source(text, fileName, context), context(context) {}
};

ModelDescription::ModelDescription(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
ModelDescription::ModelDescription(ModelDescription &&) noexcept = default;
ModelDescription &
ModelDescription::operator=(ModelDescription &&) noexcept = default;
ModelDescription::~ModelDescription() = default;

const ModelSpec &ModelDescription::getSpec() const { return impl->spec; }

std::string ModelDescription::getOnnxModelPath() const {
  const ModelSpec &spec = impl->spec;
  if (!spec.has_onnx_model())
    return {};
  if (llvm::sys::path::is_absolute(spec.onnx_model()))
    return spec.onnx_model();
  llvm::SmallString<256> path(
      llvm::sys::path::parent_path(impl->source.getFileName()));
  llvm::sys::path::append(path, spec.onnx_model());
  return std::string(path);
}

static std::string compact(double v);

/// The command line's replacements as text ("--mesh dp=2,tp=3
/// --zero-stage 7"), each with the description's fields it replaces and
/// its column: errors in those fields are reported there.
static std::vector<OverrideFlag>
overrideFlags(const DescriptionOverrides &overrides) {
  std::vector<OverrideFlag> flags;
  int column = 1;
  auto flag = [&](std::vector<std::string> path, std::string text) {
    flags.push_back({std::move(path), text, column});
    column += static_cast<int>(text.size()) + 1;
  };
  if (overrides.mesh) {
    std::string text;
    for (const MeshAxis &a : *overrides.mesh)
      text += (text.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
    flag({"mesh"}, "--mesh " + (text.empty() ? std::string("1") : text));
  }
  if (overrides.zeroStage)
    flag({"parallel", "zero_stage"},
         "--zero-stage " + std::to_string(*overrides.zeroStage));
  if (overrides.sequenceParallel)
    flag({"parallel", "sequence_parallel"}, "--sequence-parallel");
  if (overrides.contextAllGather)
    flag({"parallel", "context_attention"},
         *overrides.contextAllGather ? "--context-attention=all-gather"
                                     : "--context-attention=ring");
  if (overrides.recompute)
    flag({"parallel", "recompute"},
         ("--recompute=" + stringifyRecompute(*overrides.recompute)).str());
  if (overrides.accumulation)
    flag({"training", "gradient_accumulation_steps"},
         "--grad-accum " + std::to_string(*overrides.accumulation));
  if (overrides.lr)
    flag({"training", "optimizer", "lr"}, "--lr " + compact(*overrides.lr));
  if (overrides.warmupSteps)
    flag({"training", "lr_schedule", "warmup_steps"},
         "--warmup-steps " + std::to_string(*overrides.warmupSteps));
  if (overrides.lrDecay)
    flag({"training", "lr_schedule", "decay"},
         ("--lr-decay " + stringifyLrDecay(*overrides.lrDecay)).str());
  if (overrides.minLrRatio)
    flag({"training", "lr_schedule", "min_lr_ratio"},
         "--min-lr-ratio " + compact(*overrides.minLrRatio));
  return flags;
}

/// The buffer name of the command line's replacements in diagnostics.
static constexpr llvm::StringLiteral kCommandLine = "command line";

Location ModelDescription::locate(ArrayRef<FieldRef> path) const {
  for (const OverrideFlag &flag : impl->flags) {
    if (path.size() < flag.path.size())
      continue;
    bool within = true;
    for (size_t i = 0; i < flag.path.size(); ++i)
      within &= path[i].name == flag.path[i];
    if (within)
      return FileLineColLoc::get(StringAttr::get(impl->context, kCommandLine),
                                 1, flag.column);
  }
  return impl->source.locate(ModelSpec::descriptor(), path);
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

FailureOr<ModelDescription> ModelDescription::parse(llvm::SourceMgr &sourceMgr,
                                                    MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  return parse(buffer->getBuffer(), buffer->getBufferIdentifier(), context);
}

FailureOr<ModelDescription>
ModelDescription::parse(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                        const DescriptionOverrides &overrides) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  // The replacements as a buffer of their own, so that an error at a flag
  // shows the flag.
  std::vector<OverrideFlag> flags = overrideFlags(overrides);
  if (!flags.empty()) {
    std::string line;
    for (const OverrideFlag &f : flags)
      line += (line.empty() ? "" : " ") + f.text;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(line, kCommandLine),
        llvm::SMLoc());
  }
  return parse(buffer->getBuffer(), buffer->getBufferIdentifier(), context,
               overrides);
}

DescriptionOverrides DescriptionOverrides::unplanned() {
  DescriptionOverrides o;
  o.mesh = std::vector<MeshAxis>();
  o.zeroStage = 0;
  o.sequenceParallel = false;
  o.recompute = Recompute::None;
  o.accumulation = 1;
  o.dropPipelineSettings = true;
  return o;
}

LogicalResult DescriptionOverrides::setFromPlan(const ParallelPlan &plan,
                                                std::string &error) {
  // The plan's axes as they are (a value, not its text parsed again).
  mesh = std::vector<MeshAxis>();
  for (const ParallelPlan::Axis &axis : plan.axes())
    mesh->push_back({axis.name, axis.size, axis.kind});
  zeroStage = plan.zeroStage;
  sequenceParallel = plan.sequenceParallel;
  accumulation = plan.microbatches;
  // The plan replaces the description's pipeline settings (a plan
  // without a pipeline has none).
  dropPipelineSettings = true;
  if (plan.pp > 1) {
    pipelineSchedule = plan.schedule;
    virtualStages = plan.virtualStages;
  } else {
    recompute = plan.recompute;
  }
  return success();
}

LogicalResult DescriptionOverrides::parseMesh(StringRef text,
                                              std::string &error) {
  std::vector<MeshAxis> axes;
  text = text.trim();
  if (!text.empty() && text != "1") {
    SmallVector<StringRef> items;
    text.split(items, ',');
    for (StringRef item : items) {
      auto [key, value] = item.trim().split('=');
      MeshAxis axis;
      axis.name = key.trim().str();
      StringRef k = key.trim();
      if (k == "dp" || k == "data")
        axis.kind = MeshAxis::Kind::Data;
      else if (k == "tp" || k == "tensor")
        axis.kind = MeshAxis::Kind::Tensor;
      else if (k == "pp" || k == "pipeline")
        axis.kind = MeshAxis::Kind::Pipeline;
      else if (k == "cp" || k == "context")
        axis.kind = MeshAxis::Kind::Context;
      else {
        error = "--mesh: unknown axis '" + k.str() +
                "' (expected dp, tp, pp or cp, as in --mesh dp=2,tp=2)";
        return failure();
      }
      if (value.trim().getAsInteger(10, axis.size)) {
        error = "--mesh: axis '" + k.str() + "' has size '" +
                value.trim().str() +
                "', which is not an integer that fits 64 bits, as in " +
                k.str() + "=2";
        return failure();
      }
      if (axis.size < 1) {
        error = "--mesh: axis '" + k.str() + "' needs a size >= 1, got " +
                std::to_string(axis.size) + ", as in " + k.str() + "=2";
        return failure();
      }
      axes.push_back(axis);
    }
  }
  mesh = std::move(axes);
  return success();
}

FailureOr<ModelDescription>
ModelDescription::parse(StringRef text, StringRef fileName,
                        MLIRContext *context,
                        const DescriptionOverrides &overrides) {
  auto impl = std::make_unique<Impl>(text, fileName, context);
  if (failed(impl->source.parse(impl->spec, "the model description")))
    return failure();
  // Command-line replacements, validated like the rest.
  ModelSpec &spec = impl->spec;
  impl->flags = overrideFlags(overrides);
  if (overrides.mesh) {
    spec.mutable_mesh()->clear_axis();
    for (const MeshAxis &a : *overrides.mesh) {
      auto *axis = spec.mutable_mesh()->add_axis();
      axis->set_name(a.name);
      axis->set_size(a.size);
      axis->set_kind(
          a.kind == MeshAxis::Kind::Data      ? ::gptc::spec::Axis::DATA
          : a.kind == MeshAxis::Kind::Tensor  ? ::gptc::spec::Axis::TENSOR
          : a.kind == MeshAxis::Kind::Context ? ::gptc::spec::Axis::CONTEXT
                                              : ::gptc::spec::Axis::PIPELINE);
    }
    if (overrides.mesh->empty())
      spec.clear_mesh();
  }
  if (overrides.zeroStage)
    spec.mutable_parallel()->set_zero_stage(*overrides.zeroStage);
  if (overrides.sequenceParallel)
    spec.mutable_parallel()->set_sequence_parallel(*overrides.sequenceParallel);
  if (overrides.contextAllGather)
    spec.mutable_parallel()->set_context_attention(*overrides.contextAllGather
                                                       ? Parallelism::ALL_GATHER
                                                       : Parallelism::RING);
  if (overrides.recompute)
    spec.mutable_parallel()->set_recompute(
        *overrides.recompute == Recompute::Full        ? Parallelism::FULL
        : *overrides.recompute == Recompute::Selective ? Parallelism::SELECTIVE
                                                       : Parallelism::NONE);
  if (overrides.dropPipelineSettings && spec.has_parallel()) {
    spec.mutable_parallel()->clear_pipeline_schedule();
    spec.mutable_parallel()->clear_virtual_stages();
    spec.mutable_parallel()->clear_pipeline_layers();
  }
  if (overrides.pipelineSchedule) {
    Parallelism::Schedule schedule = Parallelism::ONE_F_ONE_B;
    switch (*overrides.pipelineSchedule) {
    case PipelineScheduleKind::GPipe:
      schedule = Parallelism::GPIPE;
      break;
    case PipelineScheduleKind::OneFOneB:
      schedule = Parallelism::ONE_F_ONE_B;
      break;
    case PipelineScheduleKind::Interleaved:
      schedule = Parallelism::INTERLEAVED;
      break;
    case PipelineScheduleKind::ZeroBubbleH1:
      schedule = Parallelism::ZB_H1;
      break;
    }
    spec.mutable_parallel()->set_pipeline_schedule(schedule);
  }
  if (overrides.virtualStages)
    spec.mutable_parallel()->set_virtual_stages(
        static_cast<int32_t>(*overrides.virtualStages));
  if (overrides.accumulation)
    spec.mutable_training()->set_gradient_accumulation_steps(
        *overrides.accumulation);
  if (overrides.lr)
    spec.mutable_training()->mutable_optimizer()->set_lr(*overrides.lr);
  ::gptc::spec::LRSchedule *schedule =
      overrides.warmupSteps || overrides.lrDecay || overrides.minLrRatio
          ? spec.mutable_training()->mutable_lr_schedule()
          : nullptr;
  if (overrides.warmupSteps)
    schedule->set_warmup_steps(*overrides.warmupSteps);
  if (overrides.lrDecay)
    schedule->set_decay(*overrides.lrDecay == LrDecay::Linear
                            ? ::gptc::spec::LRSchedule::LINEAR
                        : *overrides.lrDecay == LrDecay::Constant
                            ? ::gptc::spec::LRSchedule::CONSTANT
                            : ::gptc::spec::LRSchedule::COSINE);
  if (overrides.minLrRatio)
    schedule->set_min_lr_ratio(*overrides.minLrRatio);
  ModelDescription description(std::move(impl));
  if (failed(description.validate()))
    return failure();
  return description;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

static std::string compact(double v);

namespace {
/// Collects validation errors; each check reports at its field and the
/// whole description is checked before failing, so a user sees every
/// problem at once.
class Validator {
public:
  explicit Validator(const ModelDescription &desc) : desc(desc) {}

  InFlightDiagnostic error(ArrayRef<FieldRef> path) {
    failed = true;
    return emitError(desc.locate(path));
  }

  /// Reads an integer field, reporting a missing required field at its
  /// enclosing block and a non-positive value at the field itself.
  int64_t positive(const pb::Message &msg, StringRef block, StringRef field,
                   std::optional<int64_t> defaultValue = std::nullopt) {
    const pb::FieldDescriptor *fd =
        msg.GetDescriptor()->FindFieldByName(field.str());
    const pb::Reflection *refl = msg.GetReflection();
    if (!refl->HasField(msg, fd)) {
      if (defaultValue)
        return *defaultValue;
      error({{block}}) << "missing required field '" << block << "." << field
                       << "'";
      return 1;
    }
    int64_t value = fd->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32
                        ? refl->GetInt32(msg, fd)
                        : refl->GetInt64(msg, fd);
    if (value <= 0) {
      error({{block}, {field}})
          << "'" << field << "' must be positive, got " << value;
      return 1;
    }
    return value;
  }

  /// Reads a floating-point field that must lie in [lo, hi) (or [lo, hi]).
  double real(const pb::Message &msg, ArrayRef<FieldRef> path, double dflt,
              double lo, double hi, bool closedAbove, bool openBelow = false) {
    const pb::FieldDescriptor *fd =
        msg.GetDescriptor()->FindFieldByName(path.back().name.str());
    const pb::Reflection *refl = msg.GetReflection();
    if (!refl->HasField(msg, fd))
      return dflt;
    double v = refl->GetDouble(msg, fd);
    bool ok = std::isfinite(v) && (openBelow ? v > lo : v >= lo) &&
              (closedAbove ? v <= hi : v < hi);
    // Every such setting is used in fp32: it must be finite there (1e300
    // is inf), and an open lower bound must hold after rounding (1e-50 is
    // 0).
    float single = static_cast<float>(v);
    if (ok && (!std::isfinite(single) || (openBelow && !(single > lo)))) {
      error(path) << "'" << path.back().name << "' is " << compact(v)
                  << ", which is " << (std::isfinite(single) ? "0" : "inf")
                  << " in fp32, the precision it is used in";
      return v;
    }
    if (!ok) {
      InFlightDiagnostic d = error(path);
      d << "'" << path.back().name << "' must be in " << (openBelow ? "(" : "[")
        << compact(lo) << ", " << compact(hi)
        << (closedAbove && !std::isinf(hi) ? "]" : ")") << ", got "
        << compact(v);
    }
    return v;
  }

  const ModelDescription &desc;
  bool failed = false;
};
} // namespace

/// Formats a double as a user wrote it: 0.1, 1e-05, inf.
static std::string compact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// The most blocks the importer unrolls.
static constexpr int64_t kMaxLayers = 4096;

/// Returns true when `name` is a C-style identifier.
static bool isIdentifier(StringRef name) {
  if (name.empty() || !(std::isalpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name, [](char c) { return std::isalnum(c) || c == '_'; });
}

LogicalResult ModelDescription::validate() {
  const ModelSpec &spec = impl->spec;
  Validator v(*this);
  ModelConfig &m = config;

  name = spec.has_name() && !spec.name().empty()
             ? spec.name()
             : llvm::sys::path::stem(impl->source.getFileName()).str();
  if (spec.has_name() && !spec.name().empty() && !isIdentifier(spec.name()) &&
      !llvm::all_of(spec.name(), [](char c) {
        return std::isalnum(c) || c == '_' || c == '-' || c == '.';
      }))
    v.error({{"name"}}) << "'name' may hold only letters, digits, '_', '-' "
                           "and '.'";

  // 1. Architecture (an ONNX model's is its graph).
  if (spec.has_onnx_model()) {
    if (spec.onnx_model().empty())
      v.error({{"onnx_model"}}) << "'onnx_model' needs a path";
    if (spec.has_model())
      v.error({{"model"}}) << "a description with 'onnx_model' has no "
                              "'model' block: the ONNX graph is the model";
  } else if (!spec.has_model()) {
    v.error({}) << "missing required block 'model'";
  } else {
    const auto &a = spec.model();
    m.vocabSize = v.positive(a, "model", "vocab_size");
    m.contextLength = v.positive(a, "model", "context_length");
    m.numLayers = v.positive(a, "model", "num_layers");
    m.numHeads = v.positive(a, "model", "num_heads");
    m.modelDim = v.positive(a, "model", "model_dim");
    int64_t ratio = v.positive(a, "model", "mlp_ratio", 4);
    m.tiedEmbeddings = a.has_tied_embeddings() ? a.tied_embeddings() : true;
    m.bias = a.has_bias() ? a.bias() : true;
    m.layerNormEpsilon =
        v.real(a, {{"model"}, {"layer_norm_epsilon"}}, 1e-5, 0, 1, false,
               /*openBelow=*/true);
    if (a.has_init()) {
      m.initStd = v.real(a.init(), {{"model"}, {"init"}, {"std"}}, 0.02, 0,
                         INFINITY, false, /*openBelow=*/true);
      m.scaleResidualInit =
          a.init().has_scale_residual() ? a.init().scale_residual() : true;
      m.initSeed = a.init().seed();
    }
    if (__builtin_mul_overflow(m.modelDim, ratio, &m.mlpDim)) {
      v.error({{"model"}, {"mlp_ratio"}})
          << "MLP width model_dim x mlp_ratio overflows 64 bits";
      m.mlpDim = 1;
    }
    // The IR unrolls the blocks; a deeper model than any trained so far
    // (GPT-3 has 96) would only make the compiler run out of memory.
    if (m.numLayers > kMaxLayers)
      v.error({{"model"}, {"num_layers"}})
          << "num_layers (" << m.numLayers << ") exceeds gptc's limit of "
          << kMaxLayers << " unrolled blocks";
    if (m.modelDim % m.numHeads != 0)
      v.error({{"model"}, {"num_heads"}})
          << "num_heads (" << m.numHeads << ") must divide model_dim ("
          << m.modelDim << ")";
  }

  // 2. Training settings.
  if (!spec.has_training()) {
    v.error({}) << "missing required block 'training'";
  } else {
    const auto &t = spec.training();
    m.batchSize = v.positive(t, "training", "batch_size");
    m.seqLen = v.positive(t, "training", "seq_len");
    m.gradAccumSteps =
        v.positive(t, "training", "gradient_accumulation_steps", 1);
    m.steps = v.positive(t, "training", "steps", 1000);
    switch (t.precision()) {
    case Training::FP32:
      m.precision = Precision::FP32;
      break;
    case Training::BF16:
      m.precision = Precision::BF16;
      break;
    case Training::FP16:
      m.precision = Precision::FP16;
      break;
    default:
      v.error({{"training"}, {"precision"}}) << "unknown precision";
    }
    if (spec.has_model() && m.seqLen > m.contextLength)
      v.error({{"training"}, {"seq_len"}})
          << "seq_len (" << m.seqLen << ") exceeds the model's context_length ("
          << m.contextLength << ")";
    for (StringRef field :
         {"eval_interval", "checkpoint_interval", "keep_checkpoints"}) {
      const pb::FieldDescriptor *fd =
          t.GetDescriptor()->FindFieldByName(field.str());
      if (t.GetReflection()->GetInt64(t, fd) < 0)
        v.error({{"training"}, {field}})
            << "'" << field << "' must not be negative";
    }
    OptimizerConfig &opt = m.optimizer;
    opt.gradClip =
        v.real(t, {{"training"}, {"grad_clip"}}, 1.0, 0, INFINITY, false);
    if (t.has_loss_scaling()) {
      const auto &ls = t.loss_scaling();
      if (m.precision != Precision::FP16)
        v.error({{"training"}, {"loss_scaling"}})
            << "loss_scaling applies to precision FP16 only";
      m.initialLossScale =
          v.real(ls, {{"training"}, {"loss_scaling"}, {"initial_scale"}},
                 65536.0, 0, INFINITY, false, /*openBelow=*/true);
      if (ls.has_growth_interval()) {
        m.lossScaleGrowthInterval = ls.growth_interval();
        if (m.lossScaleGrowthInterval <= 0)
          v.error({{"training"}, {"loss_scaling"}, {"growth_interval"}})
              << "'growth_interval' must be positive, got "
              << m.lossScaleGrowthInterval;
      }
    }
    m.evalInterval = t.has_eval_interval() ? t.eval_interval() : 100;
    m.checkpointInterval = t.checkpoint_interval();
    m.keepCheckpoints = t.has_keep_checkpoints() ? t.keep_checkpoints() : 1;
    m.skipNonFinite = t.nan_policy() == Training::SKIP;
    m.dataSeed = t.seed();
    if (t.has_optimizer()) {
      const auto &o = t.optimizer();
      auto at = [](StringRef f) {
        return SmallVector<FieldRef>{{"training"}, {"optimizer"}, {f}};
      };
      opt.lr = v.real(o, at("lr"), 6e-4, 0, INFINITY, false);
      opt.beta1 = v.real(o, at("beta1"), 0.9, 0, 1, false);
      opt.beta2 = v.real(o, at("beta2"), 0.95, 0, 1, false);
      opt.eps = v.real(o, at("eps"), 1e-8, 0, INFINITY, false,
                       /*openBelow=*/true);
      opt.weightDecay = v.real(o, at("weight_decay"), 0.1, 0, INFINITY, false);
      opt.decayEmbeddings = o.decay_embeddings();
      // A rate for a reference batch, scaled to this one (Goyal et al.).
      opt.referenceLr = opt.lr;
      using Spec = ::gptc::spec::Optimizer;
      if (o.has_reference_batch_size() !=
          (o.has_lr_scaling() && o.lr_scaling() != Spec::NONE)) {
        if (o.has_reference_batch_size())
          v.error(at("reference_batch_size"))
              << "'reference_batch_size' needs 'lr_scaling' (LINEAR or SQRT): "
                 "how 'lr' scales from that batch to batch_size";
        else
          v.error(at("lr_scaling"))
              << "'lr_scaling' needs 'reference_batch_size': the batch "
                 "(sequences per step) that 'lr' is for";
      } else if (o.has_reference_batch_size()) {
        opt.referenceBatch = o.reference_batch_size();
        if (opt.referenceBatch <= 0) {
          v.error(at("reference_batch_size"))
              << "'reference_batch_size' must be positive, got "
              << opt.referenceBatch;
          opt.referenceBatch = 1;
        }
        double ratio = static_cast<double>(m.batchSize) /
                       static_cast<double>(opt.referenceBatch);
        opt.lrScaling = o.lr_scaling() == Spec::SQRT
                            ? OptimizerConfig::LrScaling::Sqrt
                            : OptimizerConfig::LrScaling::Linear;
        opt.lr =
            opt.referenceLr * (opt.lrScaling == OptimizerConfig::LrScaling::Sqrt
                                   ? std::sqrt(ratio)
                                   : ratio);
      }
    }
    if (t.has_lr_schedule()) {
      const auto &s = t.lr_schedule();
      if (s.warmup_steps() < 0)
        v.error({{"training"}, {"lr_schedule"}, {"warmup_steps"}})
            << "'warmup_steps' must not be negative";
      opt.warmupSteps = s.warmup_steps();
      opt.minLrRatio =
          v.real(s, {{"training"}, {"lr_schedule"}, {"min_lr_ratio"}}, 0.1, 0,
                 1, true);
      opt.decay =
          s.decay() == ::gptc::spec::LRSchedule::LINEAR     ? LrDecay::Linear
          : s.decay() == ::gptc::spec::LRSchedule::CONSTANT ? LrDecay::Constant
                                                            : LrDecay::Cosine;
    }
    if (opt.referenceBatch > 0 && opt.lr > opt.referenceLr && !opt.warmupSteps)
      emitWarning(locate({{"training"}, {"optimizer"}, {"lr_scaling"}}))
          << "'lr' is scaled " << compact(opt.lr / opt.referenceLr) << "x to "
          << compact(opt.lr) << " for batch_size " << m.batchSize
          << " with no warm-up; a rate scaled up is usually reached by a "
             "warm-up (Goyal et al.): set lr_schedule.warmup_steps";
  }

  // 3. The mesh: named axes, each of one parallel kind.
  llvm::StringSet<> names;
  int64_t devices = 1;
  bool seenKind[5] = {false, false, false, false, false};
  for (auto [i, axis] : llvm::enumerate(spec.mesh().axis())) {
    int idx = static_cast<int>(i);
    auto at = [&](StringRef f) {
      return SmallVector<FieldRef>{{"mesh"}, {"axis", idx}, {f}};
    };
    MeshAxis out;
    if (!axis.has_name())
      v.error({{"mesh"}, {"axis", idx}})
          << "mesh axis #" << i << " needs a 'name'";
    else if (!isIdentifier(axis.name()))
      v.error(at("name")) << "mesh axis name '" << axis.name()
                          << "' is not an identifier";
    else if (!names.insert(axis.name()).second)
      v.error(at("name")) << "duplicate mesh axis name '" << axis.name() << "'";
    out.name = axis.name();
    if (!axis.has_size())
      v.error({{"mesh"}, {"axis", idx}})
          << "mesh axis '" << axis.name() << "' needs a 'size'";
    else if (axis.size() <= 0)
      v.error(at("size")) << "mesh axis size must be positive, got "
                          << axis.size();
    else
      out.size = axis.size();
    if (__builtin_mul_overflow(devices, out.size, &devices)) {
      v.error(at("size")) << "the number of devices overflows 64 bits";
      devices = 1;
    }
    if (!axis.has_kind() || axis.kind() == Axis::UNSPECIFIED) {
      v.error(axis.has_kind() ? at("kind")
                              : SmallVector<FieldRef>{{"mesh"}, {"axis", idx}})
          << "mesh axis '" << axis.name()
          << "' needs a 'kind': DATA, TENSOR, PIPELINE or CONTEXT";
      continue;
    }
    int kind = axis.kind();
    if (seenKind[kind])
      v.error(at("kind")) << "more than one mesh axis of kind "
                          << Axis::Kind_Name(axis.kind());
    seenKind[kind] = true;
    out.kind = kind == Axis::DATA      ? MeshAxis::Kind::Data
               : kind == Axis::TENSOR  ? MeshAxis::Kind::Tensor
               : kind == Axis::CONTEXT ? MeshAxis::Kind::Context
                                       : MeshAxis::Kind::Pipeline;
    (kind == Axis::DATA      ? m.dataParallel
     : kind == Axis::TENSOR  ? m.tensorParallel
     : kind == Axis::CONTEXT ? m.contextParallel
                             : m.pipelineParallel) = out.size;
    axes.push_back(std::move(out));
  }

  // 4. What each parallel axis must divide.
  auto axisField = [&](MeshAxis::Kind kind) {
    for (auto [i, axis] : llvm::enumerate(axes))
      if (axis.kind == kind)
        return SmallVector<FieldRef>{
            {"mesh"}, {"axis", static_cast<int>(i)}, {"size"}};
    return SmallVector<FieldRef>{{"mesh"}};
  };
  if (spec.has_model()) {
    if (m.numHeads % m.tensorParallel != 0)
      v.error(axisField(MeshAxis::Kind::Tensor))
          << "tensor-parallel size " << m.tensorParallel
          << " does not divide num_heads (" << m.numHeads << ")";
    // tp | num_heads | model_dim | model_dim x mlp_ratio: the MLP width and
    // the attention width are then divisible too.
    // Stages may hold different numbers of layers, but each holds one.
    if (m.numLayers < m.pipelineParallel)
      v.error(axisField(MeshAxis::Kind::Pipeline))
          << "pipeline size " << m.pipelineParallel << " exceeds num_layers ("
          << m.numLayers << "): every stage needs a layer";
  }
  // Context parallelism: 2 x cp chunks of the sequence, two per rank.
  if (m.contextParallel > 1) {
    if (spec.has_training() && m.seqLen % (2 * m.contextParallel) != 0)
      v.error(axisField(MeshAxis::Kind::Context))
          << "context-parallel size " << m.contextParallel << " needs seq_len ("
          << m.seqLen << ") to be a multiple of 2 x " << m.contextParallel
          << " = " << 2 * m.contextParallel
          << " (each rank holds two of 2 x cp chunks)";
    if (m.pipelineParallel > 1)
      v.error(axisField(MeshAxis::Kind::Context))
          << "context parallelism does not run with a PIPELINE axis yet "
             "(docs/Limitations.md)";
  }
  if (spec.has_training()) {
    int64_t slots;
    if (__builtin_mul_overflow(m.dataParallel, m.gradAccumSteps, &slots) ||
        m.batchSize < slots)
      v.error({{"training"}, {"batch_size"}})
          << "batch_size (" << m.batchSize
          << ") is smaller than data-parallel size x accumulation steps ("
          << m.dataParallel << " x " << m.gradAccumSteps
          << "): some rank would hold no sequence";
    else
      m.microBatchSize = m.batchSize / slots + (m.batchSize % slots != 0);
  }

  // 5. Parallel strategy.
  if (spec.has_parallel()) {
    const auto &p = spec.parallel();
    m.zeroStage = p.zero_stage();
    m.sequenceParallel = p.sequence_parallel();
    m.contextAllGather = p.context_attention() == Parallelism::ALL_GATHER;
    if (p.has_context_attention() && !seenKind[Axis::CONTEXT])
      v.error({{"parallel"}, {"context_attention"}})
          << "context_attention sets context parallelism's attention, but "
             "the mesh has no CONTEXT axis";
    if (m.zeroStage < 0 || m.zeroStage > 3)
      v.error({{"parallel"}, {"zero_stage"}})
          << "zero_stage must be 0, 1, 2 or 3, got " << m.zeroStage;
    else if (m.zeroStage > 0 && !seenKind[Axis::DATA] &&
             !seenKind[Axis::CONTEXT])
      v.error({{"parallel"}, {"zero_stage"}})
          << "ZeRO shards over the data axis, but the mesh has no DATA axis";
    if (m.sequenceParallel && seenKind[Axis::CONTEXT])
      v.error({{"parallel"}, {"sequence_parallel"}})
          << "sequence parallelism and a CONTEXT axis both split the "
             "sequence; use one of them";
    else if (m.sequenceParallel && !seenKind[Axis::TENSOR])
      v.error({{"parallel"}, {"sequence_parallel"}})
          << "sequence parallelism needs a TENSOR axis in the mesh";
    else if (m.sequenceParallel && spec.has_training() &&
             m.seqLen % m.tensorParallel != 0)
      v.error({{"parallel"}, {"sequence_parallel"}})
          << "tensor-parallel size " << m.tensorParallel
          << " does not divide seq_len (" << m.seqLen
          << ") for sequence parallelism";
    // The pipeline's schedule and stage boundaries (the command line's
    // --pipeline-schedule, --virtual-stages and --pipeline-layers replace
    // them; planPipeline checks the combination).
    switch (p.pipeline_schedule()) {
    case Parallelism::GPIPE:
      m.pipelineSchedule = PipelineScheduleKind::GPipe;
      break;
    case Parallelism::INTERLEAVED:
      m.pipelineSchedule = PipelineScheduleKind::Interleaved;
      break;
    case Parallelism::ZB_H1:
      m.pipelineSchedule = PipelineScheduleKind::ZeroBubbleH1;
      break;
    default:
      m.pipelineSchedule = PipelineScheduleKind::OneFOneB;
      break;
    }
    if (p.has_virtual_stages()) {
      m.virtualStages = p.virtual_stages();
      if (m.virtualStages < 1)
        v.error({{"parallel"}, {"virtual_stages"}})
            << "virtual_stages must be >= 1, got " << m.virtualStages;
      else if (m.virtualStages > 1 &&
               m.pipelineSchedule != PipelineScheduleKind::Interleaved)
        v.error({{"parallel"}, {"virtual_stages"}})
            << "virtual_stages is for the INTERLEAVED schedule";
    }
    for (int i = 0; i < p.pipeline_layers_size(); ++i) {
      m.pipelineLayers.push_back(p.pipeline_layers(i));
      if (p.pipeline_layers(i) < 1)
        v.error({{"parallel"}, {"pipeline_layers", i}})
            << "every pipeline chunk needs a layer, got "
            << p.pipeline_layers(i);
    }
    bool pipelineFields = p.has_pipeline_schedule() || p.has_virtual_stages() ||
                          p.pipeline_layers_size();
    m.recompute = p.recompute() == Parallelism::FULL ? Recompute::Full
                  : p.recompute() == Parallelism::SELECTIVE
                      ? Recompute::Selective
                      : Recompute::None;
    if (seenKind[Axis::PIPELINE] && p.has_recompute() &&
        p.recompute() != Parallelism::FULL)
      v.error({{"parallel"}, {"recompute"}})
          << "pipeline stages recompute each chunk's forward in its "
             "backward (FULL); "
          << (m.recompute == Recompute::None ? "NONE" : "SELECTIVE")
          << " is for meshes without a PIPELINE axis";
    if (pipelineFields && !seenKind[Axis::PIPELINE])
      v.error({{"parallel"},
               {p.pipeline_layers_size() ? "pipeline_layers"
                : p.has_virtual_stages() ? "virtual_stages"
                                         : "pipeline_schedule"}})
          << "pipeline settings need a PIPELINE axis in the mesh";
  }

  // 6. Sizes that would overflow: the parameter count and the largest
  // activation (the logits, micro-batch x seq x vocab).
  if (!v.failed && !spec.has_onnx_model()) {
    if (!computeModelSize(m))
      v.error({{"model"}}) << "the model is too large: its parameter count, "
                              "FLOPs or state bytes overflow 64 bits";
    int64_t logits;
    if (__builtin_mul_overflow(m.microBatchSize, m.seqLen, &logits) ||
        __builtin_mul_overflow(logits, m.vocabSize, &logits))
      v.error({{"training"}, {"batch_size"}})
          << "the logits (micro-batch x seq_len x vocab_size) overflow 64 "
             "bits";
  }
  return failure(v.failed);
}

LogicalResult ModelDescription::checkSchedule(bool shortened) const {
  const OptimizerConfig &o = config.optimizer;
  if (o.warmupSteps <= config.steps)
    return success();
  Location at = locate({{"training"}, {"lr_schedule"}, {"warmup_steps"}});
  if (shortened) {
    emitWarning(at) << "the learning rate's warm-up (" << o.warmupSteps
                    << " steps) is longer than this run (" << config.steps
                    << " steps, --steps): the rate reaches "
                    << compact(100.0 * static_cast<double>(config.steps) /
                               static_cast<double>(o.warmupSteps))
                    << "% of 'lr' at its last step";
    return success();
  }
  emitError(at) << "the learning rate's warm-up (" << o.warmupSteps
                << " steps) is longer than the run (" << config.steps
                << " steps), so the rate would never reach 'lr': lower "
                   "'warmup_steps' (--warmup-steps) or raise 'steps' (--steps)";
  return failure();
}
