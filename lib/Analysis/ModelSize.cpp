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

#include <vector>

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

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
  /// ceil(a / b) for a >= 0, b > 0, without the overflow of a + b - 1.
  static int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }
};
} // namespace

/// Parameters of one block on one tensor-parallel rank (t = 1: all of them).
static int64_t blockParams(Checked &c, const ModelConfig &m, int64_t t) {
  int64_t C = m.modelDim, F = m.mlpDim;
  int64_t norms = c.mul(4, C);
  int64_t weights =
      c.add(c.mul(c.mul(3, C), C), c.mul(C, C), c.mul(F, C), c.mul(C, F)) / t;
  int64_t biases = 0;
  if (m.bias)
    biases = c.add(c.add(c.mul(3, C), F) / t, c.mul(2, C));
  return c.add(norms, weights, biases);
}

namespace {
/// A tensor on one rank: its dimension 0 (what ZeRO slices) and elements.
struct RankTensor {
  int64_t dim0, elements;
};
} // namespace

/// The tensors of one block on a tensor rank, as the importer lays them
/// out ([out, in] weights; column-parallel q, k, v and c_fc split their
/// rows, row-parallel projections their columns).
static std::vector<RankTensor> blockTensors(Checked &c, const ModelConfig &m,
                                            int64_t t) {
  int64_t C = m.modelDim, F = m.mlpDim;
  std::vector<RankTensor> out(4, {C, C}); // the two norms' weights, biases
  for (int i = 0; i < 3; ++i)
    out.push_back({C / t, c.mul(C, C) / t}); // q, k, v
  out.push_back({C, c.mul(C, C) / t});       // attention output
  out.push_back({F / t, c.mul(F, C) / t});   // MLP up
  out.push_back({C, c.mul(C, F) / t});       // MLP down
  if (m.bias) {
    for (int i = 0; i < 3; ++i)
      out.push_back({C / t, C / t});
    out.push_back({C, C});
    out.push_back({F / t, F / t});
    out.push_back({C, C});
  }
  return out;
}

/// Elements of `tensors` on one device after ZeRO: those whose dimension 0
/// divides by the replicas are sliced (as gptc-data-parallel and the
/// pipeline runtime slice them), the rest stay whole.
static int64_t zeroElements(Checked &c, const std::vector<RankTensor> &tensors,
                            int64_t replicas, bool sliced) {
  int64_t n = 0;
  for (const RankTensor &x : tensors)
    n = c.add(n, sliced && replicas > 1 && x.dim0 % replicas == 0
                     ? x.elements / replicas
                     : x.elements);
  return n;
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
  // ZeRO's group: the data axis and the context axis together.
  int64_t d = m.dataParallel * m.contextParallel;

  // 1. Whole-model counts.
  s.embeddingParams = c.add(c.mul(m.vocabSize, C), c.mul(m.contextLength, C));
  s.layerParams = blockParams(c, m, 1);
  s.finalNormParams = c.mul(2, C);
  s.headParams = m.tiedEmbeddings ? 0 : c.mul(m.vocabSize, C);
  s.totalParams = c.add(s.embeddingParams, c.mul(m.numLayers, s.layerParams),
                        s.finalNormParams, s.headParams);
  s.flopsPerToken = c.add(c.mul(6, s.totalParams),
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
  // ZeRO slices a tensor over the replicas only where its dimension 0
  // divides by them (GPT-2's 50257-row wte at dp=8 stays whole).
  std::vector<RankTensor> block = blockTensors(c, m, t);
  std::vector<RankTensor> firstTensors = {
      {s.paddedVocabSize / t, vocabShard},
      {m.contextLength, c.mul(m.contextLength, C)}};
  std::vector<RankTensor> lastTensors = {{C, C}, {C, C}};
  if (!m.tiedEmbeddings || p > 1)
    lastTensors.push_back({s.paddedVocabSize / t, vocabShard});
  auto zero = [&](int stage) {
    bool sliced = m.zeroStage >= stage;
    int64_t blocksOnDevice =
        c.mul(stageLayers, zeroElements(c, block, d, sliced));
    int64_t f = zeroElements(c, firstTensors, d, sliced);
    int64_t l = zeroElements(c, lastTensors, d, sliced);
    return p == 1 ? c.add(blocksOnDevice, f, l)
                  : c.add(blocksOnDevice, std::max(f, l));
  };
  s.weightBytes = c.mul(zero(3), weightWidth);
  s.gradBytes = c.mul(zero(2), weightWidth);
  s.optimizerBytes = c.mul(zero(1), optimizerWidth);
  s.stateBytesPerDevice = c.add(s.weightBytes, s.gradBytes, s.optimizerBytes);

  if (c.overflowed)
    return std::nullopt;
  return s;
}

std::string mlir::gptc::describeLearningRate(const ModelConfig &m) {
  const OptimizerConfig &o = m.optimizer;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.2e", o.lr);
  if (o.referenceBatch > 0)
    os << " (" << llvm::format("%.2e", o.referenceLr) << " for a batch of "
       << o.referenceBatch << ", scaled "
       << (o.lrScaling == OptimizerConfig::LrScaling::Sqrt
               ? "by the square root"
               : "linearly")
       << " to " << m.batchSize << ")";
  if (o.warmupSteps > 0)
    os << ", warm-up " << o.warmupSteps << " steps";
  if (o.decay == LrDecay::Constant)
    os << (o.warmupSteps > 0 ? ", then constant" : ", constant");
  else
    os << (o.warmupSteps > 0 ? ", then " : ", ")
       << (o.decay == LrDecay::Linear ? "linear" : "cosine") << " to "
       << llvm::format("%.2e", o.lr * o.minLrRatio) << " at step " << m.steps;
  return text;
}
