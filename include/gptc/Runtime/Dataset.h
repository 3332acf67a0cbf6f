//===- Dataset.h - Training data of the runtime -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A byte-level text dataset: the training split's random windows and the
// validation split's fixed batches.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATASET_H
#define GPTC_RUNTIME_DATASET_H

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gptc::runtime {

/// The bytes of a text file, as token ids 0..255, split into training (the
/// first 90%) and validation (the rest) data.
class ByteDataset {
public:
  /// Loads `path`; fails when it does not exist, is empty, or is too short
  /// to hold one sequence of `seqLen` + 1 tokens in each split.
  static bool load(const std::string &path, int64_t seqLen, ByteDataset &out,
                   std::string &error);

  /// `batch` random windows of the training split: tokens and the labels
  /// (the same window shifted by one).
  void sampleTrain(std::mt19937_64 &rng, int64_t batch, int64_t seqLen,
                   int32_t *tokens, int32_t *labels) const;
  /// The `index`-th fixed validation batch (evenly spaced windows).
  void validationBatch(int64_t index, int64_t count, int64_t batch,
                       int64_t seqLen, int32_t *tokens, int32_t *labels) const;

  int64_t trainSize() const { return split; }
  int64_t validationSize() const {
    return static_cast<int64_t>(bytes.size()) - split;
  }
  const std::string &getPath() const { return path; }

private:
  std::string path;
  std::vector<uint8_t> bytes;
  int64_t split = 0;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_DATASET_H
