//===- ModelSizeTest.cpp - Closed-form sizes ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/ModelSize.h"

#include <gtest/gtest.h>

using namespace mlir::gptc;

namespace {

ModelConfig gpt2(int64_t layers, int64_t heads, int64_t dim) {
  ModelConfig m;
  m.vocabSize = 50257;
  m.contextLength = 1024;
  m.numLayers = layers;
  m.numHeads = heads;
  m.modelDim = dim;
  m.mlpDim = 4 * dim;
  m.batchSize = 8;
  m.seqLen = 1024;
  m.microBatchSize = 8;
  return m;
}

/// The published (HuggingFace) parameter counts of the GPT-2 family.
TEST(ModelSize, PublishedGpt2Sizes) {
  EXPECT_EQ(computeModelSize(gpt2(12, 12, 768))->totalParams, 124439808);
  EXPECT_EQ(computeModelSize(gpt2(24, 16, 1024))->totalParams, 354823168);
  EXPECT_EQ(computeModelSize(gpt2(36, 20, 1280))->totalParams, 774030080);
  EXPECT_EQ(computeModelSize(gpt2(48, 25, 1600))->totalParams, 1557611200);
}

TEST(ModelSize, Gpt3Is175B) {
  ModelConfig m = gpt2(96, 96, 12288);
  m.contextLength = 2048;
  m.seqLen = 2048;
  int64_t n = computeModelSize(m)->totalParams;
  EXPECT_EQ(n, 174604259328);
  // "175B" within half a percent.
  EXPECT_NEAR(static_cast<double>(n) / 175e9, 1.0, 0.005);
}

TEST(ModelSize, UntiedHeadAddsOneTable) {
  ModelConfig m = gpt2(12, 12, 768);
  m.tiedEmbeddings = false;
  std::optional<ModelSize> s = computeModelSize(m);
  EXPECT_EQ(s->headParams, 50257 * 768);
  EXPECT_EQ(s->totalParams, 124439808 + 50257 * 768);
}

TEST(ModelSize, FlopsPerTokenIsSixNPlusAttention) {
  ModelConfig m = gpt2(12, 12, 768);
  std::optional<ModelSize> s = computeModelSize(m);
  EXPECT_EQ(s->flopsPerToken, 6 * 124439808LL + 12LL * 12 * 1024 * 768);
  EXPECT_EQ(s->tokensPerStep, 8 * 1024);
}

TEST(ModelSize, SixteenBytesPerParamOnOneDevice) {
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    ModelConfig m = gpt2(12, 12, 768);
    m.precision = p;
    std::optional<ModelSize> s = computeModelSize(m);
    EXPECT_EQ(s->bytesPerParam, 16);
    EXPECT_EQ(s->stateBytesPerDevice, 16 * 124439808LL);
  }
}

/// ZeRO divides optimizer state, then gradients, then weights by dp:
/// 16 -> 4 + 12/N -> 2 + 14/N -> 16/N bytes per sliced parameter (mixed
/// precision).
TEST(ModelSize, ZeroStagesDivideState) {
  ModelConfig m = gpt2(12, 12, 768);
  m.precision = Precision::BF16;
  m.dataParallel = 4;
  const int64_t n = 124439808;
  // ZeRO slices a tensor whose dimension 0 divides by the replicas, as
  // gptc-data-parallel does: the 50257-row wte stays whole, the rest (and
  // every other dimension 0 of GPT-2 small) divides by 4.
  const int64_t wte = 50257 * 768, sliced = (n - wte) / 4 + wte;
  int64_t expected[4] = {16 * n, 4 * n + 12 * sliced, 2 * n + 14 * sliced,
                         16 * sliced};
  for (int stage = 0; stage <= 3; ++stage) {
    m.zeroStage = stage;
    EXPECT_EQ(computeModelSize(m)->stateBytesPerDevice, expected[stage])
        << "stage " << stage;
  }
}

/// Megatron tensor parallelism: matrices and column-parallel biases split,
/// norms, row-parallel biases and wpe replicated, vocabulary padded.
TEST(ModelSize, TensorParallelShards) {
  ModelConfig m = gpt2(12, 12, 768);
  m.tensorParallel = 4;
  std::optional<ModelSize> s = computeModelSize(m);
  int64_t C = 768, F = 3072, V = 50260; // 50257 padded to a multiple of 4
  EXPECT_EQ(s->paddedVocabSize, V);
  int64_t block =
      4 * C + (3 * C * C + C * C + F * C + C * F) / 4 + (3 * C + F) / 4 + 2 * C;
  EXPECT_EQ(s->paramsPerDevice, 12 * block + V / 4 * C + 1024 * C + 2 * C);
}

/// Pipeline stages: the most loaded stage holds its blocks and the larger of
/// the embeddings (first stage) and ln_f + the tied head copy (last stage).
TEST(ModelSize, PipelineStages) {
  ModelConfig m = gpt2(12, 12, 768);
  m.pipelineParallel = 4;
  std::optional<ModelSize> s = computeModelSize(m);
  int64_t block = computeLayerParams(m).value();
  int64_t first = 50257 * 768 + 1024 * 768;
  EXPECT_EQ(s->paramsPerDevice, 3 * block + first);
}

TEST(ModelSize, OverflowIsReported) {
  ModelConfig m = gpt2(12, 12, 768);
  m.modelDim = int64_t(1) << 40;
  m.mlpDim = int64_t(1) << 42;
  EXPECT_FALSE(computeModelSize(m).has_value());
  EXPECT_FALSE(computeLayerParams(m).has_value());
}

} // namespace
