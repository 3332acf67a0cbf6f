//===- ModelSize.cpp - Closed-form model size and memory ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Parameter layout (per block, C = model width, F = MLP width):
//   ln_1, ln_2           2 x (C + C)          replicated under TP
//   attn.c_attn          3C x C  (+ 3C)       column-parallel
//   attn.c_proj          C x C   (+ C)        row-parallel, bias replicated
//   mlp.c_fc             F x C   (+ F)        column-parallel
//   mlp.c_proj           C x F   (+ C)        row-parallel, bias replicated
// plus wte (V x C, vocabulary-parallel), wpe (T x C, replicated), ln_f (2C)
// and an untied lm_head (V x C, vocabulary-parallel).
//
// Pipeline stages hold num_layers / pp blocks; the first also the
// embeddings, the last ln_f and the head (with tied embeddings and pp > 1 a
// copy of wte, as Megatron keeps one). ZeRO stage s divides the optimizer
// state (s >= 1), the gradients (s >= 2) and the weights (s >= 3) by the
// data-parallel size, rounding up.
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/ModelSize.h"

#include <algorithm>

using namespace mlir::gptc;

namespace {
/// 64-bit arithmetic that remembers whether anything overflowed.
class Checked {
public:
  bool overflowed = false;

  int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    overflowed |= __builtin_mul_overflow(a, b, &r);
    return r;
  }
  int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    overflowed |= __builtin_add_overflow(a, b, &r);
    return r;
  }
  template <typename... Ts>
  int64_t add(int64_t a, int64_t b, Ts... rest) {
    return add(add(a, b), rest...);
  }
  static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
};
} // namespace

/// Parameters of one block on one tensor-parallel rank (t = 1: all of them).
static int64_t blockParams(Checked &c, const ModelConfig &m, int64_t t) {
  int64_t C = m.modelDim, F = m.mlpDim;
  int64_t norms = c.mul(4, C);
  int64_t weights = c.add(c.mul(c.mul(3, C), C), c.mul(C, C), c.mul(F, C),
                          c.mul(C, F)) /
                    t;
  int64_t biases = 0;
  if (m.bias)
    biases = c.add(c.add(c.mul(3, C), F) / t, c.mul(2, C));
  return c.add(norms, weights, biases);
}

std::optional<int64_t> mlir::gptc::computeLayerParams(const ModelConfig &m) {
  Checked c;
  int64_t n = blockParams(c, m, 1);
  if (c.overflowed)
    return std::nullopt;
  return n;
}

std::optional<ModelSize> mlir::gptc::computeModelSize(const ModelConfig &m) {
  Checked c;
  ModelSize s;
  int64_t C = m.modelDim, t = m.tensorParallel, p = m.pipelineParallel;
  int64_t d = m.dataParallel;

  // 1. Whole-model counts.
  s.embeddingParams = c.add(c.mul(m.vocabSize, C), c.mul(m.contextLength, C));
  s.layerParams = blockParams(c, m, 1);
  s.finalNormParams = c.mul(2, C);
  s.headParams = m.tiedEmbeddings ? 0 : c.mul(m.vocabSize, C);
  s.totalParams = c.add(s.embeddingParams, c.mul(m.numLayers, s.layerParams),
                        s.finalNormParams, s.headParams);
  s.flopsPerToken =
      c.add(c.mul(6, s.totalParams),
            c.mul(c.mul(12, m.numLayers), c.mul(m.seqLen, C)));
  s.tokensPerStep = c.mul(m.batchSize, m.seqLen);

  // 2. The most loaded device under tensor and pipeline parallelism.
  s.paddedVocabSize = c.mul(Checked::ceilDiv(m.vocabSize, t), t);
  int64_t vocabShard = c.mul(s.paddedVocabSize / t, C);
  int64_t stageLayers = Checked::ceilDiv(m.numLayers, p);
  int64_t blocks = c.mul(stageLayers, blockParams(c, m, t));
  int64_t first = c.add(vocabShard, c.mul(m.contextLength, C));
  int64_t last = s.finalNormParams;
  if (!m.tiedEmbeddings || p > 1)
    last = c.add(last, vocabShard);
  s.paramsPerDevice = p == 1 ? c.add(blocks, first, last)
                             : c.add(blocks, std::max(first, last));

  // 3. Bytes of model state: weights, gradients, AdamW state.
  bool mixed = m.precision != Precision::FP32;
  int64_t weightWidth = mixed ? 2 : 4;
  int64_t optimizerWidth = mixed ? 12 : 8; // (fp32 master +) m + v
  s.bytesPerParam = 2 * weightWidth + optimizerWidth;
  int64_t n = s.paramsPerDevice;
  auto zero = [&](int stage, int64_t count) {
    return m.zeroStage >= stage ? Checked::ceilDiv(count, d) : count;
  };
  s.weightBytes = c.mul(zero(3, n), weightWidth);
  s.gradBytes = c.mul(zero(2, n), weightWidth);
  s.optimizerBytes = c.mul(zero(1, n), optimizerWidth);
  s.stateBytesPerDevice = c.add(s.weightBytes, s.gradBytes, s.optimizerBytes);

  if (c.overflowed)
    return std::nullopt;
  return s;
}
