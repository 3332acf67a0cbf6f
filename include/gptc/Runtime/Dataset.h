//===- Dataset.h - Training data of the runtime -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The training data: a text file whose bytes are the tokens (the default
// job), or token files users already have: flat little-endian uint16 ids
// (nanoGPT's train.bin / val.bin) or llm.c's .bin (a 1024-byte header,
// magic 20240520, then uint16 ids), memory-mapped; one file or many shards
// (a list or a glob), read as their concatenation in order. The training
// split's random windows and the validation split's fixed batches.
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
  /// 0..255, needing `vocab` >= 256). `path` may name several files, read
  /// as one stream in order: a comma-separated list, each entry a file or a
  /// glob (`data/train_*.bin`, its matches in name order); token files of
  /// both layouts mix, text and tokens do not. With `valPath` (the same
  /// syntax), validation comes from those files; without it, from the last
  /// 10% of the stream. Fails, saying why, on a missing, empty or odd-sized
  /// file, a glob matching nothing, a token id >= `vocab` (naming its file
  /// and position), or a split too short for one sequence of `seqLen` + 1
  /// tokens.
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

  /// The number of files the training stream reads.
  size_t trainShards() const { return train.pieces.size(); }
  /// What a checkpoint records of the training data (TrainOptions::recipe's
  /// "data"): its size and files, not their paths, which move between
  /// hosts ("1048576 tokens in 3 files").
  std::string identity() const {
    return std::to_string(trainSize()) +
           (std::string(kind()) == "text" ? " bytes" : " tokens") + " in " +
           std::to_string(trainShards()) +
           (trainShards() == 1 ? " file" : " files");
  }

  /// The files `spec` names (a comma-separated list of files and globs),
  /// in order; fails on a glob matching nothing or an empty entry.
  static bool expandPaths(const std::string &spec,
                          std::vector<std::string> &paths, std::string &error);

private:
  /// Tokens of `width` bytes (1: text, 2: uint16 ids), one piece per file,
  /// read as one sequence.
  struct Stream {
    struct Piece {
      const void *data = nullptr;
      int64_t start = 0, count = 0;
    };
    std::vector<Piece> pieces;
    int width = 1;
    int64_t count = 0;
    void append(const void *data, int64_t n) {
      pieces.push_back({data, count, n});
      count += n;
    }
    /// Tokens [begin, end) as a stream of their own.
    Stream slice(int64_t begin, int64_t end) const;
    /// Tokens [at, at + n) into `out` (across pieces).
    void read(int64_t at, int64_t n, int32_t *out) const;
  };

  std::string path;
  std::vector<std::shared_ptr<MappedFile>> files;
  Stream train, validation;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_DATASET_H
