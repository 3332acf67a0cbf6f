//===- Dataset.h - Training data of the runtime -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The training data: a text file whose bytes are the tokens (the default
// job), or token files users already have: flat little-endian uint16 ids
// (nanoGPT's train.bin / val.bin) or llm.c's .bin (a 1024-byte header,
// magic 20240520, then uint16 ids), memory-mapped. The training split's
// random windows and the validation split's fixed batches.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATASET_H
#define GPTC_RUNTIME_DATASET_H

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace gptc::runtime {

/// A read-only memory map of a file (unmapped on destruction).
class MappedFile;

class Dataset {
public:
  /// Opens the training data at `path`: a token file (llm.c's header, or
  /// the `.bin` extension: flat uint16 ids) or else a text file (bytes
  /// 0..255, needing `vocab` >= 256). With `valPath`, validation comes from
  /// that file (of the same kind); without it, from the last 10% of
  /// `path`. Fails, saying why, on a missing, empty or odd-sized file, a
  /// token id >= `vocab` (naming it and its position), or a split too short
  /// for one sequence of `seqLen` + 1 tokens.
  static bool open(const std::string &path, const std::string &valPath,
                   int64_t seqLen, int64_t vocab, Dataset &out,
                   std::string &error);

  /// `batch` random windows of the training split: tokens and the labels
  /// (the same window shifted by one).
  void sampleTrain(std::mt19937_64 &rng, int64_t batch, int64_t seqLen,
                   int32_t *tokens, int32_t *labels) const;
  /// The `index`-th fixed validation batch (evenly spaced windows).
  void validationBatch(int64_t index, int64_t count, int64_t batch,
                       int64_t seqLen, int32_t *tokens, int32_t *labels) const;

  int64_t trainSize() const { return train.count; }
  int64_t validationSize() const { return validation.count; }
  const std::string &getPath() const { return path; }
  /// "text" or "uint16 tokens".
  const char *kind() const {
    return train.width == 1 ? "text" : "uint16 tokens";
  }

private:
  /// `count` tokens of `width` bytes (1: text, 2: uint16 ids) at `data`.
  struct Span {
    const void *data = nullptr;
    int width = 1;
    int64_t count = 0;
    int32_t at(int64_t i) const {
      return width == 1 ? static_cast<const uint8_t *>(data)[i]
                        : static_cast<const uint16_t *>(data)[i];
    }
  };

  std::string path;
  std::shared_ptr<MappedFile> trainFile, valFile;
  Span train, validation;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_DATASET_H
