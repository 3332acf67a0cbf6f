//===- Dataset.cpp - Training data of the runtime ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Dataset.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
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

bool Dataset::expandPaths(const std::string &spec,
                          std::vector<std::string> &paths, std::string &error) {
  paths.clear();
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t comma = spec.find(',', begin);
    if (comma == std::string::npos)
      comma = spec.size();
    std::string entry = spec.substr(begin, comma - begin);
    begin = comma + 1;
    if (entry.empty()) {
      error = "'" + spec + "' has an empty entry in its list of files";
      return false;
    }
    if (entry.find_first_of("*?[") == std::string::npos) {
      paths.push_back(entry);
      continue;
    }
    glob_t matches;
    int rc = ::glob(entry.c_str(), GLOB_ERR, nullptr, &matches);
    if (rc != 0) {
      if (rc != GLOB_NOMATCH)
        ::globfree(&matches);
      error = "'" + entry + "' matches no file";
      return false;
    }
    // glob(3) sorts its matches by name: train_000001.bin, ...
    for (size_t i = 0; i < matches.gl_pathc; ++i)
      paths.push_back(matches.gl_pathv[i]);
    ::globfree(&matches);
  }
  return true;
}

/// Maps the files of `spec` and appends their tokens to `stream`; `tokens`
/// is set from the first file (text or token ids) and every other must be
/// of its kind.
static bool openStream(const std::string &spec, const std::string &what,
                       int64_t vocab, int &tokens,
                       std::vector<std::shared_ptr<MappedFile>> &files,
                       std::vector<std::pair<const void *, int64_t>> &pieces,
                       std::string &error) {
  std::vector<std::string> paths;
  if (!Dataset::expandPaths(spec, paths, error)) {
    error = what + ": " + error;
    return false;
  }
  std::string first;
  for (const std::string &path : paths) {
    std::shared_ptr<MappedFile> file = mapFile(path, what, error);
    if (!file)
      return false;
    int isTokens = isTokenFile(path, *file) ? 1 : 0;
    if (tokens < 0) {
      tokens = isTokens;
      first = path;
    } else if (isTokens != tokens) {
      error = what + " '" + path + "' is " +
              (isTokens ? "a token file" : "text") + "; " +
              (first.empty() ? "the training data is "
                             : "'" + first + "' before it is ") +
              (tokens ? "a token file" : "text");
      return false;
    }
    if (tokens) {
      const void *data = nullptr;
      int64_t count = 0;
      if (!tokenSpan(path, what, *file, vocab, data, count, error))
        return false;
      pieces.push_back({data, count});
    } else {
      pieces.push_back({file->base, static_cast<int64_t>(file->size)});
    }
    files.push_back(std::move(file));
  }
  return true;
}

bool Dataset::open(const std::string &path, const std::string &valPath,
                   int64_t seqLen, int64_t vocab, Dataset &out,
                   std::string &error) {
  out = Dataset();
  out.path = path;
  int tokens = -1;
  std::vector<std::pair<const void *, int64_t>> trainPieces, valPieces;
  if (!openStream(path, "the training data", vocab, tokens, out.files,
                  trainPieces, error))
    return false;
  if (!tokens && vocab < 256) {
    error = "byte-level training (text data '" + path +
            "') needs vocab_size >= 256, got " + std::to_string(vocab);
    return false;
  }
  out.train.width = tokens ? 2 : 1;
  for (auto [data, n] : trainPieces)
    out.train.append(data, n);
  if (!valPath.empty()) {
    if (!openStream(valPath, "the validation data", vocab, tokens, out.files,
                    valPieces, error))
      return false;
    out.validation.width = out.train.width;
    for (auto [data, n] : valPieces)
      out.validation.append(data, n);
  } else {
    // The last 10% of the training data.
    int64_t n = out.train.count, split = n * 9 / 10;
    out.validation = out.train.slice(split, n);
    out.train = out.train.slice(0, split);
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

Dataset::Stream Dataset::Stream::slice(int64_t begin, int64_t end) const {
  Stream out;
  out.width = width;
  for (const Piece &p : pieces) {
    int64_t lo = std::max(begin, p.start),
            hi = std::min(end, p.start + p.count);
    if (lo < hi)
      out.append(static_cast<const uint8_t *>(p.data) + (lo - p.start) * width,
                 hi - lo);
  }
  return out;
}

void Dataset::Stream::read(int64_t at, int64_t n, int32_t *out) const {
  // The piece holding `at`: the last that starts at or before it.
  auto it =
      std::upper_bound(pieces.begin(), pieces.end(), at,
                       [](int64_t x, const Piece &p) { return x < p.start; });
  size_t k = static_cast<size_t>(it - pieces.begin()) - 1;
  while (n > 0) {
    const Piece &p = pieces[k++];
    int64_t from = at - p.start, take = std::min(n, p.count - from);
    if (width == 1) {
      const auto *b = static_cast<const uint8_t *>(p.data) + from;
      for (int64_t i = 0; i < take; ++i)
        out[i] = b[i];
    } else {
      const auto *u = static_cast<const uint16_t *>(p.data) + from;
      for (int64_t i = 0; i < take; ++i)
        out[i] = u[i];
    }
    out += take;
    at += take;
    n -= take;
  }
}

void Dataset::sampleTrain(std::mt19937_64 &rng, int64_t batch, int64_t seqLen,
                          int32_t *tokens, int32_t *labels) const {
  std::uniform_int_distribution<int64_t> start(0, train.count - seqLen - 1);
  std::vector<int32_t> window(static_cast<size_t>(seqLen + 1));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t s = start(rng);
    train.read(s, seqLen + 1, window.data());
    std::copy(window.begin(), window.end() - 1, tokens + b * seqLen);
    std::copy(window.begin() + 1, window.end(), labels + b * seqLen);
  }
}

void Dataset::validationBatch(int64_t index, int64_t count, int64_t batch,
                              int64_t seqLen, int32_t *tokens,
                              int32_t *labels) const {
  int64_t windows = count * batch;
  int64_t span = validation.count - seqLen - 1;
  std::vector<int32_t> window(static_cast<size_t>(seqLen + 1));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t w = index * batch + b;
    int64_t s = windows > 1 ? span * w / (windows - 1) : 0;
    validation.read(s, seqLen + 1, window.data());
    std::copy(window.begin(), window.end() - 1, tokens + b * seqLen);
    std::copy(window.begin() + 1, window.end(), labels + b * seqLen);
  }
}
