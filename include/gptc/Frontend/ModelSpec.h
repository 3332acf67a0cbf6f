//===- ModelSpec.h - Parse and validate model descriptions ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Reads a `.pbtxt` model description (schema: model_spec.proto), keeps the
// line:col of every field, applies defaults and checks everything the
// compiler relies on. Every problem is an MLIR diagnostic at the offending
// field.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_MODELSPEC_H
#define GPTC_FRONTEND_MODELSPEC_H

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Frontend/TextProto.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace gptc::spec {
class ModelSpec;
} // namespace gptc::spec

namespace mlir::gptc {

struct ParallelPlan;

/// A named axis of the device mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  /// The axis's role: the dialect's own kind (`#gptc.mesh_info`'s), so
  /// that the description, the IR and the planner name it with one type.
  using Kind = MeshAxisKind;
  Kind kind = Kind::Data;
};

/// Command-line replacements for the description's parallel and
/// learning-rate settings (`gptc train --mesh dp=2,tp=2 --zero-stage 1
/// --grad-accum 4 --lr 3e-4 --warmup-steps 100`); they are validated with
/// the rest of the description, and an error in one is reported at its flag.
struct DescriptionOverrides {
  std::optional<std::vector<MeshAxis>> mesh;
  std::optional<int> zeroStage;
  std::optional<int64_t> accumulation;
  /// Drop the description's pipeline settings (gptc plan, which replaces
  /// the mesh, chooses its own).
  bool dropPipelineSettings = false;
  /// A pipeline's schedule and virtual stages (--mesh auto's choice).
  std::optional<PipelineScheduleKind> pipelineSchedule;
  std::optional<int64_t> virtualStages;
  std::optional<bool> sequenceParallel;
  /// Context parallelism's attention: all-gather (true) or ring (false).
  std::optional<bool> contextAllGather;
  /// "none", "selective" or "full".
  std::optional<mlir::gptc::Recompute> recompute;
  /// training.optimizer.lr (the reference batch's when the description
  /// scales it), lr_schedule.warmup_steps, .decay and .min_lr_ratio.
  std::optional<double> lr;
  std::optional<int64_t> warmupSteps;
  std::optional<mlir::gptc::LrDecay> lrDecay;
  std::optional<double> minLrRatio;

  /// One device, no ZeRO, sequence parallelism, recomputation or
  /// accumulation, no pipeline settings: what a planner starts from (gptc
  /// plan, --mesh auto).
  static DescriptionOverrides unplanned();
  /// The parallel settings of a planner's choice (--mesh auto): its mesh,
  /// ZeRO stage, sequence parallelism, microbatches and pipeline schedule
  /// or recomputation.
  LogicalResult setFromPlan(const ParallelPlan &plan, std::string &error);

  /// Parses `dp=2,tp=2` (axis kinds dp/data, tp/tensor, pp/pipeline; the
  /// key is the axis name) into `mesh`; an empty string or "1" means one
  /// device.
  LogicalResult parseMesh(llvm::StringRef text, std::string &error);
};

/// A parsed, validated model description.
class ModelDescription {
public:
  ModelDescription(ModelDescription &&) noexcept;
  ModelDescription &operator=(ModelDescription &&) noexcept;
  ~ModelDescription();

  /// Parses the main buffer of `sourceMgr` as a description, reporting
  /// syntax and validation errors through `context`'s diagnostic engine.
  static FailureOr<ModelDescription> parse(llvm::SourceMgr &sourceMgr,
                                           MLIRContext *context);

  /// Same, for an in-memory text named `fileName` in locations.
  static FailureOr<ModelDescription>
  parse(llvm::StringRef text, llvm::StringRef fileName, MLIRContext *context,
        const DescriptionOverrides &overrides = {});
  static FailureOr<ModelDescription>
  parse(llvm::SourceMgr &sourceMgr, MLIRContext *context,
        const DescriptionOverrides &overrides);

  const ::gptc::spec::ModelSpec &getSpec() const;
  /// The description with defaults applied and derived sizes computed.
  const ModelConfig &getConfig() const { return config; }
  /// The mesh axes in grid order (empty for one device).
  llvm::ArrayRef<MeshAxis> getMeshAxes() const { return axes; }
  /// Overrides `training.steps` (the learning-rate schedule spans them).
  void setSteps(int64_t steps) { config.steps = steps; }
  /// The schedule once its length is final (after setSteps): an error at
  /// `lr_schedule.warmup_steps` where the warm-up is longer than the run
  /// (the rate would never reach `lr`); a warning instead with
  /// `shortened` (a run made shorter than its description's warm-up by
  /// --steps: a short trial of a longer schedule).
  LogicalResult checkSchedule(bool shortened = false) const;
  /// --nan-policy: skip (true) or stop at a non-finite step.
  void setSkipNonFinite(bool skip) { config.skipNonFinite = skip; }

  /// `onnx_model`: the ONNX model's path, resolved against the
  /// description's directory; empty for gptc's own GPT.
  std::string getOnnxModelPath() const;
  /// For an ONNX model: the vocabulary and context its graph fixes (the
  /// description has no `model` block to say them).
  void setImportedModel(int64_t vocabSize, int64_t contextLength) {
    config.vocabSize = vocabSize;
    config.contextLength = contextLength;
  }
  /// For an ONNX model: the architecture its raised graph has (what
  /// --emit=summary sizes).
  void setImportedArchitecture(int64_t numLayers, int64_t numHeads,
                               int64_t modelDim, int64_t mlpDim, bool tied,
                               bool bias) {
    config.numLayers = numLayers;
    config.numHeads = numHeads;
    config.modelDim = modelDim;
    config.mlpDim = mlpDim;
    config.tiedEmbeddings = tied;
    config.bias = bias;
  }

  /// The model's name (the file's stem when the description has none).
  llvm::StringRef getName() const { return name; }

  /// Why the parallel settings are what they are, when a planner chose
  /// them (--mesh auto); the importer keeps it on the module
  /// (`gptc.plan`).
  llvm::StringRef getPlanNote() const { return planNote; }
  void setPlanNote(std::string note) { planNote = std::move(note); }

  /// Location of the field at `path`, e.g. `{{"model"}, {"num_heads"}}`.
  /// When the field is absent, the closest enclosing field that is present;
  /// the start of the file when none is.
  Location locate(llvm::ArrayRef<FieldRef> path) const;

  /// The parsed text, its positions and the protobuf message.
  struct Impl;

private:
  explicit ModelDescription(std::unique_ptr<Impl> impl);
  LogicalResult validate();

  std::unique_ptr<Impl> impl;
  ModelConfig config;
  std::vector<MeshAxis> axes;
  std::string name;
  std::string planNote;
};

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_MODELSPEC_H
