//===- Sampling.h - Text generation -----------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc sample`: generates text with a compiled @logits function.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SAMPLING_H
#define GPTC_RUNTIME_SAMPLING_H

#include "gptc/Runtime/Executor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::runtime {

/// Generates `length` token ids after `context` with @logits (the first
/// row of its batch): each drawn from softmax(logits / temperature) over the
/// first `usable` ids, restricted to the `topK` most likely (0: all), with a
/// seeded generator. The context slides when it outgrows the compiled
/// sequence length.
bool sampleTokens(Executor &logits, const std::vector<const Tensor *> &params,
                  std::vector<int32_t> context, int64_t length,
                  double temperature, int64_t topK, uint64_t seed,
                  int64_t usable, std::vector<int32_t> &generated,
                  std::string &error);

/// sampleTokens with bytes: `length` bytes after `prompt` (ids 0-255).
bool sampleText(Executor &logits, const std::vector<const Tensor *> &params,
                const std::string &prompt, int64_t length, double temperature,
                int64_t topK, uint64_t seed, std::string &text,
                std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_SAMPLING_H
