//===- ModelSize.h - Closed-form model size and memory --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Parameter count, training FLOPs and per-device model-state bytes of a
// GPT-2-style decoder, from its hyper-parameters and parallel layout. The
// same figures are also counted from the IR (ModelStats.h); the two are
// cross-checked in the tests.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_MODELSIZE_H
#define GPTC_ANALYSIS_MODELSIZE_H

// Precision and LrDecay: the dialect's enums (GptcAttrs.td), one
// vocabulary from the description to the IR.
#include "gptc/Analysis/PipelineSchedule.h"
#include "gptc/Dialect/Gptc/IR/GptcDialect.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gptc {

/// AdamW, clipping and the learning-rate schedule, defaults applied.
struct OptimizerConfig {
  /// The peak learning rate the step uses (the description's `lr`, scaled
  /// to the batch when it gives a reference batch).
  double lr = 6e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  /// `reference_batch_size` and `lr_scaling`: the description's `lr` is
  /// for this many sequences per step (0: for the batch as it is), scaled
  /// linearly or by the square root of batch_size / referenceBatch.
  int64_t referenceBatch = 0;
  enum class LrScaling { None, Linear, Sqrt } lrScaling = LrScaling::None;
  double referenceLr = 6e-4;
  bool decayEmbeddings = false;
  double gradClip = 1.0;
  int64_t warmupSteps = 0;
  double minLrRatio = 0.1;
  /// The decay after warm-up (the dialect's LrDecay, as #gptc.optimizer).
  LrDecay decay = LrDecay::Cosine;
};

/// A model description with every default applied and every derived size
/// computed. Built (and validated) by the frontend.
struct ModelConfig {
  // Architecture.
  int64_t vocabSize = 0, contextLength = 0, numLayers = 0, numHeads = 0,
          modelDim = 0, mlpDim = 0;
  bool tiedEmbeddings = true, bias = true;
  double layerNormEpsilon = 1e-5;
  double initStd = 0.02;
  bool scaleResidualInit = true;
  uint64_t initSeed = 0;
  // Training.
  int64_t batchSize = 0, seqLen = 0, gradAccumSteps = 1, steps = 1000;
  /// Sequences per rank per micro-step: ceil(batch / (dp * accum)).
  int64_t microBatchSize = 0;
  Precision precision = Precision::FP32;
  /// FP16's dynamic loss scaling: the first scale, and the good steps in a
  /// row that double it.
  double initialLossScale = 65536.0;
  int64_t lossScaleGrowthInterval = 2000;
  OptimizerConfig optimizer;
  int64_t evalInterval = 100, checkpointInterval = 0;
  /// Checkpoint step directories kept (0: all).
  int64_t keepCheckpoints = 1;
  /// training.nan_policy: skip non-finite steps instead of stopping.
  bool skipNonFinite = false;
  uint64_t dataSeed = 0;
  // Parallel layout (1 when the mesh has no such axis).
  int64_t dataParallel = 1, tensorParallel = 1, pipelineParallel = 1;
  /// Context parallelism: the sequence split over this many ranks.
  int64_t contextParallel = 1;
  /// Context parallelism's attention gathers the keys and values instead
  /// of passing them around a ring.
  bool contextAllGather = false;
  /// Every device of the mesh.
  int64_t devices() const {
    return dataParallel * tensorParallel * pipelineParallel * contextParallel;
  }
  int zeroStage = 0;
  bool sequenceParallel = false;
  /// The pipeline's schedule (one type from the description to the
  /// artifact's plan), chunks per
  /// stage (0: the schedule's default) and, when fixed by the description,
  /// each chunk's layer count.
  PipelineScheduleKind pipelineSchedule = PipelineScheduleKind::OneFOneB;
  int64_t virtualStages = 0;
  std::vector<int64_t> pipelineLayers;
  /// Activation recomputation (pipeline stages always recompute each
  /// chunk: full).
  mlir::gptc::Recompute recompute = mlir::gptc::Recompute::None;
};

/// Figures derived from a ModelConfig.
struct ModelSize {
  // Whole-model parameter counts.
  int64_t embeddingParams = 0; ///< wte + wpe
  int64_t layerParams = 0;     ///< one transformer block
  int64_t finalNormParams = 0; ///< ln_f
  int64_t headParams = 0;      ///< untied lm_head; 0 when tied
  int64_t totalParams = 0;
  /// Training FLOPs per token: 6 N + 12 L T C (PaLM / llm.c convention).
  int64_t flopsPerToken = 0;
  /// Tokens per optimizer step: batch x seq_len.
  int64_t tokensPerStep = 0;
  /// Vocabulary rows after padding to a multiple of the tensor size.
  int64_t paddedVocabSize = 0;

  // Model state on the most loaded device.
  int64_t paramsPerDevice = 0;
  int64_t weightBytes = 0, gradBytes = 0, optimizerBytes = 0;
  int64_t stateBytesPerDevice = 0;
  /// Bytes per parameter of weights + gradients + optimizer state before
  /// ZeRO (16 for AdamW in fp32 and in mixed precision).
  int64_t bytesPerParam = 16;
};

/// Computes the figures, or std::nullopt when one of them overflows 64 bits.
std::optional<ModelSize> computeModelSize(const ModelConfig &config);

/// The peak learning rate, where it comes from and its schedule: "1.20e-03
/// (6.00e-04 for a batch of 256, scaled linearly to 512), warm-up 100
/// steps, then cosine to 1.20e-04 at step 2000".
std::string describeLearningRate(const ModelConfig &config);

/// Parameters of one block, for the checks that do not need the whole size.
std::optional<int64_t> computeLayerParams(const ModelConfig &config);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_MODELSIZE_H
