//===- Sampling.cpp - Text generation ---------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;

bool runtime::sampleTokens(Executor &logits,
                           const std::vector<const Tensor *> &params,
                           std::vector<int32_t> context, int64_t length,
                           double temperature, int64_t topK, uint64_t seed,
                           int64_t usable, std::vector<int32_t> &generated,
                           std::string &error) {
  const program::Function &fn = logits.getFunction();
  const program::Value &tokIn = fn.values(fn.inputs(fn.inputs_size() - 1));
  // One sequence (an imported graph's batch may be larger: its first row
  // is sampled, the others are padding).
  if (tokIn.type().shape_size() != 2 || tokIn.type().shape(0) < 1) {
    error = "@logits must take a batch of token sequences";
    return false;
  }
  int64_t rows = tokIn.type().shape(0);
  int64_t seqLen = tokIn.type().shape(1);
  if (context.empty()) {
    error = "sampling needs a prompt of at least one token";
    return false;
  }
  std::mt19937_64 rng(seed);
  Tensor tokens(program::I32, {rows, seqLen});
  std::vector<const Tensor *> in(params);
  in.push_back(&tokens);
  std::vector<Tensor> out;
  generated.clear();
  for (int64_t i = 0; i < length; ++i) {
    // The last seqLen tokens, left-aligned; positions after them are
    // padding that causal attention keeps from affecting earlier ones.
    int64_t n = std::min<int64_t>(context.size(), seqLen);
    int32_t *t = tokens.data<int32_t>();
    std::fill(t, t + rows * seqLen, 0);
    std::copy(context.end() - n, context.end(), t);
    if (!logits.run(in, out, error))
      return false;
    int64_t vocab = out[0].shape.back();
    const float *row = out[0].data<float>() + (n - 1) * vocab;
    std::vector<std::pair<double, int32_t>> scored;
    for (int64_t j = 0; j < std::min(vocab, usable); ++j)
      scored.push_back({row[j] / std::max(temperature, 1e-6), int32_t(j)});
    std::sort(scored.begin(), scored.end(), std::greater<>());
    if (topK > 0 && topK < static_cast<int64_t>(scored.size()))
      scored.resize(topK);
    double mx = scored.front().first, sum = 0;
    std::vector<double> weights;
    for (auto &[s, id] : scored)
      sum += weights.emplace_back(std::exp(s - mx));
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    int32_t next = scored[pick(rng)].second;
    context.push_back(next);
    generated.push_back(next);
  }
  return true;
}

bool runtime::sampleText(Executor &logits,
                         const std::vector<const Tensor *> &params,
                         const std::string &prompt, int64_t length,
                         double temperature, int64_t topK, uint64_t seed,
                         std::string &text, std::string &error) {
  std::vector<int32_t> context;
  for (unsigned char c : prompt)
    context.push_back(c);
  if (context.empty())
    context.push_back('\n');
  std::vector<int32_t> generated;
  // Only byte tokens can be printed: the first 256 ids.
  if (!sampleTokens(logits, params, std::move(context), length, temperature,
                    topK, seed, 256, generated, error))
    return false;
  text.clear();
  for (int32_t id : generated)
    text.push_back(static_cast<char>(id));
  return true;
}
