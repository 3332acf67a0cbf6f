//===- Dataset.cpp - Training data of the runtime ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Dataset.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace gptc;
using namespace gptc::runtime;

class gptc::runtime::MappedFile {
public:
  ~MappedFile() {
    if (base)
      ::munmap(base, size);
  }
  void *base = nullptr;
  size_t size = 0;
};

/// Maps `path` read-only; fails on a missing or empty file or a directory.
static std::shared_ptr<MappedFile>
mapFile(const std::string &path, const std::string &what, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = "cannot open " + what + " '" + path + "'";
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    error = what + " '" + path + "' is not a file" +
            (S_ISDIR(st.st_mode) ? " (a directory)" : "");
    return nullptr;
  }
  if (st.st_size == 0) {
    error = what + " '" + path + "' is empty";
    return nullptr;
  }
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    error = "cannot open " + what + " '" + path + "'";
    return nullptr;
  }
  auto file = std::make_shared<MappedFile>();
  file->size = static_cast<size_t>(st.st_size);
  void *base = ::mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    error = "cannot map " + what + " '" + path + "' into memory";
    return nullptr;
  }
  file->base = base;
  return file;
}

/// llm.c's token files start with 256 int32: magic 20240520, version 1
/// (uint16 ids), the token count.
static constexpr int32_t kLlmcMagic = 20240520;
static constexpr size_t kLlmcHeader = 256 * sizeof(int32_t);

static bool isTokenFile(const std::string &path, const MappedFile &file) {
  int32_t magic = 0;
  if (file.size >= sizeof(magic))
    std::memcpy(&magic, file.base, sizeof(magic));
  return magic == kLlmcMagic ||
         (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0);
}

/// The uint16 ids of a token file, every one checked against `vocab`.
static bool tokenSpan(const std::string &path, const std::string &what,
                      const MappedFile &file, int64_t vocab, const void *&data,
                      int64_t &count, std::string &error) {
  const auto *bytes = static_cast<const uint8_t *>(file.base);
  size_t offset = 0;
  int32_t header[3] = {0, 0, 0};
  if (file.size >= sizeof(header))
    std::memcpy(header, bytes, sizeof(header));
  if (header[0] == kLlmcMagic) {
    if (header[1] != 1) {
      error = what + " '" + path + "' is an llm.c token file of version " +
              std::to_string(header[1]) + "; gptc reads version 1 (uint16)";
      return false;
    }
    offset = kLlmcHeader;
    if (file.size < offset ||
        static_cast<uint64_t>(header[2]) * 2 != file.size - offset) {
      error = what + " '" + path + "': its header says " +
              std::to_string(header[2]) + " tokens, the file holds " +
              std::to_string(file.size < offset ? 0 : (file.size - offset) / 2);
      return false;
    }
  } else if (file.size % 2) {
    error = what + " '" + path + "' has an odd size (" +
            std::to_string(file.size) + " bytes): not uint16 token ids";
    return false;
  }
  data = bytes + offset;
  count = static_cast<int64_t>((file.size - offset) / 2);
  const auto *ids = static_cast<const uint16_t *>(data);
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] >= vocab) {
      error = what + " '" + path + "' has token id " + std::to_string(ids[i]) +
              " at position " + std::to_string(i) +
              ", outside the model's vocabulary [0, " + std::to_string(vocab) +
              ")";
      return false;
    }
  return true;
}

bool Dataset::open(const std::string &path, const std::string &valPath,
                   int64_t seqLen, int64_t vocab, Dataset &out,
                   std::string &error) {
  out = Dataset();
  out.path = path;
  out.trainFile = mapFile(path, "the training data", error);
  if (!out.trainFile)
    return false;
  bool tokens = isTokenFile(path, *out.trainFile);
  if (tokens) {
    out.train.width = 2;
    if (!tokenSpan(path, "the training data", *out.trainFile, vocab,
                   out.train.data, out.train.count, error))
      return false;
  } else {
    if (vocab < 256) {
      error = "byte-level training (text data '" + path +
              "') needs vocab_size >= 256, got " + std::to_string(vocab);
      return false;
    }
    out.train.data = out.trainFile->base;
    out.train.count = static_cast<int64_t>(out.trainFile->size);
  }
  if (!valPath.empty()) {
    out.valFile = mapFile(valPath, "the validation data", error);
    if (!out.valFile)
      return false;
    if (isTokenFile(valPath, *out.valFile) != tokens) {
      error = "the validation data '" + valPath + "' is " +
              (tokens ? "text" : "a token file") + "; the training data is " +
              (tokens ? "a token file" : "text");
      return false;
    }
    out.validation.width = out.train.width;
    if (tokens) {
      if (!tokenSpan(valPath, "the validation data", *out.valFile, vocab,
                     out.validation.data, out.validation.count, error))
        return false;
    } else {
      out.validation.data = out.valFile->base;
      out.validation.count = static_cast<int64_t>(out.valFile->size);
    }
  } else {
    // The last 10% of the training data.
    int64_t n = out.train.count, split = n * 9 / 10;
    out.validation = out.train;
    out.validation.data =
        static_cast<const uint8_t *>(out.train.data) + split * out.train.width;
    out.validation.count = n - split;
    out.train.count = split;
  }
  // Each split must hold one window of seq_len + 1 tokens.
  if (out.train.count < seqLen + 1 || out.validation.count < seqLen + 1) {
    const char *unit = tokens ? " tokens" : " bytes";
    error = "the training data '" + path + "' has " +
            std::to_string(out.train.count) + unit +
            (valPath.empty() ? " for training (90%) and "
                             : " and '" + valPath + "' ") +
            std::to_string(out.validation.count) +
            " for validation: each needs one sequence of " +
            std::to_string(seqLen) + " tokens and its next token (" +
            std::to_string(seqLen + 1) + unit + ")" +
            (valPath.empty() ? "; it needs at least " +
                                   std::to_string(10 * (seqLen + 1)) + unit
                             : std::string());
    return false;
  }
  return true;
}

void Dataset::sampleTrain(std::mt19937_64 &rng, int64_t batch, int64_t seqLen,
                          int32_t *tokens, int32_t *labels) const {
  std::uniform_int_distribution<int64_t> start(0, train.count - seqLen - 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t s = start(rng);
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = train.at(s + t);
      labels[b * seqLen + t] = train.at(s + t + 1);
    }
  }
}

void Dataset::validationBatch(int64_t index, int64_t count, int64_t batch,
                              int64_t seqLen, int32_t *tokens,
                              int32_t *labels) const {
  int64_t windows = count * batch;
  int64_t span = validation.count - seqLen - 1;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t w = index * batch + b;
    int64_t s = windows > 1 ? span * w / (windows - 1) : 0;
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = validation.at(s + t);
      labels[b * seqLen + t] = validation.at(s + t + 1);
    }
  }
}
