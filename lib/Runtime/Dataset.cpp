//===- Dataset.cpp - Training data of the runtime ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Dataset.h"

#include <fstream>
#include <iterator>
#include <sys/stat.h>

using namespace gptc;
using namespace gptc::runtime;

bool ByteDataset::load(const std::string &path, int64_t seqLen,
                       ByteDataset &out, std::string &error) {
  // A directory opens as a stream whose first read throws: say so first.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = "the training data '" + path + "' is not a file" +
            (S_ISDIR(st.st_mode) ? " (a directory)" : "");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open the training data '" + path + "'";
    return false;
  }
  out.path = path;
  out.bytes.assign(std::istreambuf_iterator<char>(in),
                   std::istreambuf_iterator<char>());
  int64_t n = static_cast<int64_t>(out.bytes.size());
  if (n == 0) {
    error = "the training data '" + path + "' is empty";
    return false;
  }
  out.split = n * 9 / 10;
  // Each split must hold one window of seq_len + 1 tokens.
  if (out.split < seqLen + 1 || n - out.split < seqLen + 1) {
    error = "the training data '" + path + "' has " + std::to_string(n) +
            " bytes: too short for one sequence of " + std::to_string(seqLen) +
            " tokens in both the training (90%) and validation (10%) parts; "
            "it needs at least " +
            std::to_string(10 * (seqLen + 1)) + " bytes";
    return false;
  }
  return true;
}

void ByteDataset::sampleTrain(std::mt19937_64 &rng, int64_t batch,
                              int64_t seqLen, int32_t *tokens,
                              int32_t *labels) const {
  std::uniform_int_distribution<int64_t> start(0, split - seqLen - 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t s = start(rng);
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = bytes[s + t];
      labels[b * seqLen + t] = bytes[s + t + 1];
    }
  }
}

void ByteDataset::validationBatch(int64_t index, int64_t count, int64_t batch,
                                  int64_t seqLen, int32_t *tokens,
                                  int32_t *labels) const {
  int64_t windows = count * batch;
  int64_t span = validationSize() - seqLen - 1;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t w = index * batch + b;
    int64_t s = split + (windows > 1 ? span * w / (windows - 1) : 0);
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = bytes[s + t];
      labels[b * seqLen + t] = bytes[s + t + 1];
    }
  }
}
