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

/// Generates `length` bytes after `prompt` with @logits (batch 1): each new
/// token is drawn from softmax(logits / temperature) restricted to the
/// `topK` most likely (0: all), with a seeded generator. The context slides
/// when it outgrows the compiled sequence length.
bool sampleText(Executor &logits, const std::vector<const Tensor *> &params,
                const std::string &prompt, int64_t length, double temperature,
                int64_t topK, uint64_t seed, std::string &text,
                std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_SAMPLING_H
