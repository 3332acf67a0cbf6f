//===- CheckpointStore.cpp - Checkpoint directories -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Writing and reading format 3 checkpoints (CheckpointStore.h); the older
// single-file formats are read through the same interface.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CheckpointStore.h"

#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Checksum.h"
#include "gptc/Runtime/Communicator.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

using namespace gptc;
using namespace gptc::runtime;
namespace fs = std::filesystem;

namespace {
constexpr int32_t kDirectoryFormat = 3;
constexpr const char *kManifest = "manifest.pb";
constexpr const char *kLatest = "latest";

std::string stepName(int64_t step) {
  std::ostringstream os;
  os << "step-" << std::setw(8) << std::setfill('0') << step;
  return os.str();
}

/// The step of a step directory's name, or -1.
int64_t stepOf(const std::string &name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0)
    return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10)
      return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string systemError(const std::string &what, const std::string &path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

/// Writes all of `bytes` at `data` to `fd`.
bool writeAll(int fd, const void *data, uint64_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, std::min<uint64_t>(bytes, 1u << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<uint64_t>(n);
  }
  return true;
}

/// Writes `text` to `path` and fsyncs it.
bool writeFileSynced(const std::string &path, const std::string &text,
                     std::string &error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = systemError("cannot create", path);
    return false;
  }
  bool ok = writeAll(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  if (!ok)
    error = systemError("cannot write", path);
  if (::close(fd) != 0 && ok) {
    error = systemError("cannot write", path);
    ok = false;
  }
  return ok;
}

/// Makes a directory's entries (renames, new files) durable.
void syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// All ranks agree: true when every rank's `ok` is. Where one failed,
/// every rank's `error` is the same: the lowest failing rank's, named
/// ("rank 1: cannot write ..."), so that one rank can say it for all.
bool agree(bool ok, Communicator *comm, std::string &error) {
  if (!comm || comm->size() == 1)
    return ok;
  int32_t failed = ok ? 0 : 1;
  std::string commError;
  if (!comm->allReduceMax(&failed, 1, program::I32, {comm->size()}, {0},
                          commError)) {
    error = commError;
    return false;
  }
  if (!failed)
    return true;
  // Each rank's message (empty where it succeeded), to every rank.
  constexpr int64_t kWords = 256; // 1 KiB a rank
  int n = comm->size();
  std::vector<int32_t> mine(kWords, 0), all(kWords * n);
  if (!ok)
    std::memcpy(mine.data(), error.data(),
                std::min<size_t>(error.size(), kWords * 4 - 1));
  if (!comm->allGather(mine.data(), all.data(), kWords, program::I32, {n}, {0},
                       commError)) {
    error = commError;
    return false;
  }
  for (int r = 0; r < n; ++r) {
    const char *text = reinterpret_cast<const char *>(all.data() + r * kWords);
    if (*text) {
      error = "rank " + std::to_string(r) + ": " +
              std::string(text, strnlen(text, kWords * 4));
      return false;
    }
  }
  error = "a rank could not write its part of the checkpoint";
  return false;
}

/// Every rank's `mine` in rank order, on rank 0 (others get nothing).
bool gatherToRankZero(const std::string &mine, Communicator *comm,
                      std::vector<std::string> &all, std::string &error) {
  if (!comm || comm->size() == 1) {
    all = {mine};
    return true;
  }
  int n = comm->size();
  std::vector<int64_t> sizes(n);
  int64_t size = static_cast<int64_t>(mine.size());
  if (!comm->allGather(&size, sizes.data(), 1, program::I64, {n}, {0}, error))
    return false;
  int64_t words = 1;
  for (int64_t s : sizes)
    words = std::max(words, (s + 3) / 4);
  std::vector<int32_t> in(words, 0), out(words * n);
  std::memcpy(in.data(), mine.data(), mine.size());
  if (!comm->allGather(in.data(), out.data(), words, program::I32, {n}, {0},
                       error))
    return false;
  all.clear();
  if (comm->rank() == 0)
    for (int r = 0; r < n; ++r)
      all.emplace_back(reinterpret_cast<const char *>(out.data() + r * words),
                       sizes[r]);
  return true;
}

int64_t volume(const std::vector<int64_t> &shape) {
  int64_t v = 1;
  for (int64_t d : shape)
    v *= d;
  return v;
}

/// Copies the intersection of box `src` (at `srcStart` with `srcShape`)
/// and box `dst` between their buffers, C order, element size `es`.
/// Returns the elements copied.
int64_t copyOverlap(const std::byte *src, const std::vector<int64_t> &srcStart,
                    const std::vector<int64_t> &srcShape, std::byte *dst,
                    const std::vector<int64_t> &dstStart,
                    const std::vector<int64_t> &dstShape, int64_t es) {
  size_t rank = srcShape.size();
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(srcStart[d], dstStart[d]);
    hi[d] = std::min(srcStart[d] + srcShape[d], dstStart[d] + dstShape[d]);
    if (hi[d] <= lo[d])
      return 0;
  }
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return 1;
  }
  // Strides in elements.
  std::vector<int64_t> ss(rank, 1), ds(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    ss[d - 1] = ss[d] * srcShape[d];
    ds[d - 1] = ds[d] * dstShape[d];
  }
  int64_t row = hi[rank - 1] - lo[rank - 1], copied = 0;
  std::vector<int64_t> at(lo);
  while (true) {
    int64_t so = 0, dof = 0;
    for (size_t d = 0; d < rank; ++d) {
      so += (at[d] - srcStart[d]) * ss[d];
      dof += (at[d] - dstStart[d]) * ds[d];
    }
    std::memcpy(dst + dof * es, src + so * es, row * es);
    copied += row;
    // The next row: advance the outer coordinates, last fastest.
    int d = static_cast<int>(rank) - 2;
    for (; d >= 0; --d) {
      if (++at[d] < hi[d])
        break;
      at[d] = lo[d];
    }
    if (d < 0)
      return copied;
  }
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}
} // namespace

//===----------------------------------------------------------------------===//
// Blocks on the grid
//===----------------------------------------------------------------------===//

std::vector<int64_t> runtime::blockStart(const BlockLayout &layout,
                                         const std::vector<int64_t> &grid,
                                         int64_t rank) {
  std::vector<int64_t> start(layout.shape.size(), 0);
  if (!layout.isSplit())
    return start;
  std::vector<int64_t> block = layout.blockShape(grid);
  for (size_t d = 0; d < layout.axes.size() && d < start.size(); ++d)
    if (groupSize(grid, layout.axes[d]) > 1)
      start[d] = groupIndex(grid, layout.axes[d], rank) * block[d];
  return start;
}

bool runtime::firstHolder(const BlockLayout &layout,
                          const std::vector<int64_t> &grid, int64_t rank) {
  std::vector<int64_t> mine = blockStart(layout, grid, rank);
  for (int64_t r = 0; r < rank; ++r)
    if (blockStart(layout, grid, r) == mine)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// Where a run resumed from a step directory (`PATH/step-N`, holding a
/// manifest) writes its steps: the directory beside it. None for any other
/// path.
static std::optional<std::string> besideStepDirectory(const std::string &path) {
  if (::access((path + "/" + kManifest).c_str(), F_OK) != 0)
    return std::nullopt;
  fs::path step = fs::path(path).lexically_normal();
  if (step.filename().empty())
    step = step.parent_path();
  return step.parent_path().empty() ? std::string(".")
                                    : step.parent_path().string();
}

/// The step directories in `dir`, by step.
static std::map<int64_t, std::string> stepDirectories(const std::string &dir) {
  std::map<int64_t, std::string> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    int64_t step = stepOf(it->path().filename().string());
    if (step >= 0 && it->is_directory(ec))
      steps[step] = it->path().string();
  }
  return steps;
}

//===----------------------------------------------------------------------===//
// What gptc may remove: its own checkpoints only
//===----------------------------------------------------------------------===//

/// `text` as a message can show it: printable ASCII kept, anything else
/// (control bytes, a damaged file's binary) as \xNN, at most `most` bytes.
static std::string printable(const std::string &text, size_t most = 64) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < most; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (text.size() > most)
    out += "...";
  return out;
}

/// A shard file's name as the writer makes it: rank-<digits>.bin.
static bool isShardFileName(const std::string &name) {
  constexpr size_t kPrefix = 5, kSuffix = 4; // "rank-", ".bin"
  if (name.size() <= kPrefix + kSuffix || name.compare(0, kPrefix, "rank-") ||
      name.compare(name.size() - kSuffix, kSuffix, ".bin"))
    return false;
  for (size_t i = kPrefix; i < name.size() - kSuffix; ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  return true;
}

/// The entries of step directory `dir` that gptc did not write (anything
/// but regular files named manifest.pb, rank-<digits>.bin or named by its
/// manifest), at most three named ("'mine.txt', 'notes/'"); "" where every
/// entry is gptc's. `needManifest`: a directory without a manifest is not
/// a step gptc published, and is named as such.
static std::string foreignEntries(const std::string &dir, bool needManifest) {
  std::set<std::string> named;
  {
    std::ifstream in(dir + "/" + kManifest, std::ios::binary);
    checkpoint::Manifest m;
    if (in && m.ParseFromIstream(&in))
      for (const checkpoint::TensorRecord &t : m.tensors())
        for (const checkpoint::Shard &s : t.shards())
          named.insert(s.file());
  }
  std::vector<std::string> foreign;
  size_t count = 0;
  bool manifest = false;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec)
    return "nothing gptc can list (" + ec.message() + ")";
  for (fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec)
      return "nothing gptc can list (" + ec.message() + ")";
    std::string name = it->path().filename().string();
    fs::file_status st = it->symlink_status(ec);
    bool regular = !ec && fs::is_regular_file(st);
    if (regular && name == kManifest) {
      manifest = true;
      continue;
    }
    if (regular && (isShardFileName(name) || named.count(name)))
      continue;
    if (++count <= 3)
      foreign.push_back("'" + printable(name) +
                        (fs::is_directory(st) ? "/'" : "'"));
  }
  std::string text;
  for (size_t i = 0; i < foreign.size(); ++i)
    text += (i ? ", " : "") + foreign[i];
  if (count > foreign.size())
    text += " and " + std::to_string(count - foreign.size()) + " more";
  if (text.empty() && needManifest && !manifest)
    text = "no " + std::string(kManifest);
  return text;
}

/// Why `dir` is not gptc's to remove, from foreignEntries' `foreign`.
static std::string notOurs(const std::string &dir, const std::string &foreign) {
  if (foreign.rfind("no ", 0) == 0)
    return "'" + dir + "' has " + foreign + ": it is not a step gptc wrote";
  return "'" + dir + "' holds " + foreign + ", which gptc did not write";
}

/// Removes step directory `dir` where every entry in it is gptc's; else
/// false with `error` naming what is there (nothing removed).
static bool removeOwnStepDirectory(const std::string &dir, bool needManifest,
                                   std::string &error) {
  std::string foreign = foreignEntries(dir, needManifest);
  if (!foreign.empty()) {
    error = notOurs(dir, foreign) +
            ": gptc removes only its own checkpoints (move those away, or "
            "name another --checkpoint)";
    return false;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) {
    error = "cannot remove '" + dir + "': " + ec.message();
    return false;
  }
  return true;
}

/// The directories a checkpoint never goes into or replaces: "/", the home
/// directory and (`workingToo`) the working directory, by what they are
/// (names through links and "..": the same directory). "" for any other.
static std::string protectedDirectory(const std::string &path,
                                      bool workingToo) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec || p.empty())
    return "";
  auto same = [&](const fs::path &other) {
    std::error_code e;
    return !other.empty() && fs::exists(other, e) &&
           fs::equivalent(p, other, e) && !e;
  };
  if (same("/"))
    return "the root directory";
  if (const char *home = std::getenv("HOME"); home && *home && same(home))
    return "the home directory";
  if (workingToo && same(fs::current_path(ec)))
    return "the working directory";
  return "";
}

/// A regular file at `path` is a checkpoint gptc wrote (format 1 or 2, its
/// tensors intact); `why` says what it is otherwise.
static bool isCheckpointFile(const std::string &path, std::string &why) {
  std::string error;
  if (CheckpointReader::open(path, error))
    return true;
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  why = "a file gptc did not write (" +
        (ec ? std::string("unreadable") : std::to_string(size) + " bytes") +
        ", not a gptc checkpoint)";
  return false;
}

bool runtime::checkCheckpointPath(const std::string &path, bool replacing,
                                  std::string &error) {
  struct stat st;
  if (path.empty()) {
    error = "the checkpoint path is empty (--checkpoint names a directory)";
    return false;
  }
  if (::lstat(path.c_str(), &st) != 0)
    return true; // created by the first checkpoint
  std::string why;
  if (!S_ISDIR(st.st_mode) && ::stat(path.c_str(), &st) == 0 &&
      S_ISREG(st.st_mode)) {
    if (isCheckpointFile(path, why))
      return true;
    error = "'" + path + "' is " + why +
            ": gptc writes and replaces only its own checkpoints; name "
            "another place with --checkpoint";
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    error = "'" + path +
            "' is neither a directory nor a checkpoint file: name another "
            "place with --checkpoint";
    return false;
  }
  std::string root = besideStepDirectory(path).value_or(path);
  std::string what = protectedDirectory(root, replacing);
  if (!what.empty()) {
    error = "'" + path + "' is " + what +
            (root == path ? "" : "'s step directory") +
            ": checkpoints go into a directory of their own (name one with "
            "--checkpoint)";
    return false;
  }
  return true;
}

std::string runtime::existingCheckpoints(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "";
  if (!S_ISDIR(st.st_mode)) {
    std::string why;
    return S_ISREG(st.st_mode) && isCheckpointFile(path, why)
               ? "a checkpoint file"
               : "";
  }
  if (besideStepDirectory(path))
    return "a step directory";
  std::map<int64_t, std::string> steps = stepDirectories(path);
  std::ifstream latest(path + "/" + kLatest);
  std::string current;
  if (latest)
    std::getline(latest, current);
  if (steps.empty() && current.empty())
    return "";
  int64_t step = stepOf(current);
  if (step < 0 && !steps.empty())
    step = steps.rbegin()->first;
  std::string text =
      step >= 0 ? "step " + std::to_string(step) : "a 'latest' file";
  size_t others = steps.size() - (steps.count(step) ? 1 : 0);
  if (others)
    text += " (and " + std::to_string(others) + " other step director" +
            (others == 1 ? "y" : "ies") + ")";
  return text;
}

bool runtime::removeCheckpoints(const std::string &path, std::string &error) {
  std::error_code ec;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return true;
  if (!checkCheckpointPath(path, /*replacing=*/true, error))
    return false;
  if (!S_ISDIR(st.st_mode)) {
    // A format 1 or 2 file (checkCheckpointPath read it as one).
    if (!fs::remove(path, ec) && ec) {
      error = "cannot remove the checkpoint '" + path + "': " + ec.message();
      return false;
    }
    return true;
  }
  if (besideStepDirectory(path)) {
    error = "'" + path +
            "' is one step directory of a checkpoint: name the checkpoint "
            "directory holding it to start over there";
    return false;
  }
  // Everything that goes is checked before anything goes: the step
  // directories (a manifest and shard files only) and `latest` (a step's
  // name). Other entries of the directory stay as they are.
  std::map<int64_t, std::string> steps = stepDirectories(path);
  for (const auto &[step, dir] : steps) {
    std::string foreign = foreignEntries(dir, /*needManifest=*/true);
    if (!foreign.empty()) {
      error = notOurs(dir, foreign) +
              ": gptc removes only its own checkpoints, so it removed "
              "nothing (move those away, or name another --checkpoint)";
      return false;
    }
  }
  std::string latest = path + "/" + kLatest;
  bool hasLatest = ::lstat(latest.c_str(), &st) == 0;
  if (hasLatest) {
    std::string name;
    std::ifstream in(latest);
    std::getline(in, name);
    if (!S_ISREG(st.st_mode) || st.st_size > 64 || stepOf(name) < 0) {
      error = "'" + latest + "' is not a checkpoint's 'latest' file (it " +
              (S_ISREG(st.st_mode) ? "holds '" + printable(name) + "'"
                                   : std::string("is not a file")) +
              "): gptc removes only its own checkpoints, so it removed "
              "nothing";
      return false;
    }
  }
  for (const auto &[step, dir] : steps)
    if (!removeOwnStepDirectory(dir, /*needManifest=*/true, error))
      return false;
  if (hasLatest && !fs::remove(latest, ec) && ec) {
    error = "cannot remove '" + latest + "': " + ec.message();
    return false;
  }
  return true;
}

/// Two byte counts in one unit that shows how they differ: KiB, MiB or
/// GiB by the larger, with as many decimals as it takes ("1.9 MiB" and
/// "2.2 MiB", not "0.002 GiB" twice).
static std::pair<std::string, std::string> sizesApart(double a, double b) {
  double larger = std::max(a, b);
  double unit = larger < (1 << 20)   ? 1024.0
                : larger < (1 << 30) ? 1048576.0
                                     : 1073741824.0;
  const char *name = unit == 1024.0      ? " KiB"
                     : unit == 1048576.0 ? " MiB"
                                         : " GiB";
  auto text = [&](double bytes, int decimals) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(decimals) << bytes / unit << name;
    return os.str();
  };
  int decimals = 1;
  while (decimals < 6 && a != b && text(a, decimals) == text(b, decimals))
    ++decimals;
  return {text(a, decimals), text(b, decimals)};
}

static CheckpointFaults injected;

void runtime::setCheckpointFaultsForTesting(const CheckpointFaults &faults) {
  injected = faults;
}

int runtime::writeProbe(const std::string &dir) {
  std::string probe = dir + "/.gptc-write-test-" + std::to_string(::getpid());
  int fd =
      ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = fd >= 0 && ::write(fd, "gptc\n", 5) == 5;
  int err = written ? 0 : errno;
  if (fd >= 0) {
    if (::close(fd) != 0 && !err)
      err = errno;
    ::unlink(probe.c_str());
  }
  return err;
}

bool runtime::checkCheckpointDirectory(const std::string &path, int64_t bytes,
                                       std::string &error,
                                       std::string &warning) {
  std::error_code ec;
  std::string root = path;
  struct stat st;
  if (!checkCheckpointPath(path, /*replacing=*/false, error))
    return false;
  if (std::optional<std::string> beside = besideStepDirectory(path)) {
    root = *beside;
  } else if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    fs::path parent = fs::path(path).parent_path();
    root = parent.empty() ? "." : parent.string();
  }
  // The directories this check creates go again after it: a run that
  // writes no checkpoint (it fails first) leaves none behind.
  fs::path created;
  for (fs::path p = fs::path(root).lexically_normal();
       !p.empty() && !fs::exists(p, ec); p = p.parent_path())
    created = p;
  struct RemoveCreated {
    const fs::path &dir;
    ~RemoveCreated() {
      std::error_code ignored;
      if (!dir.empty())
        fs::remove_all(dir, ignored);
    }
  } removeCreated{created};
  fs::create_directories(root, ec);
  if (ec) {
    error = "cannot create the checkpoint directory '" + root +
            "': " + ec.message() + " (--checkpoint names where it goes)";
    return false;
  }
  if (int err = writeProbe(root)) {
    error = "cannot write a checkpoint into '" + root +
            "': " + std::strerror(err) + " (--checkpoint names where it goes)";
    return false;
  }
  struct statvfs vfs;
  if (injected.freeBytes >= 0 || ::statvfs(root.c_str(), &vfs) == 0) {
    double free = injected.freeBytes >= 0
                      ? injected.freeBytes
                      : double(vfs.f_bavail) * double(vfs.f_frsize);
    if (free < double(bytes)) {
      auto [need, have] = sizesApart(double(bytes), free);
      error = "a checkpoint of this run needs about " + need + " and '" + root +
              "' has " + have +
              " free: free space there or name another place with "
              "--checkpoint";
      return false;
    }
    if (free < 2.0 * double(bytes))
      warning = "'" + root + "' has " +
                sizesApart(free, 2.0 * double(bytes)).first +
                " free, less than two checkpoints of this run (about " +
                sizesApart(double(bytes), free).first +
                " each): a checkpoint is complete before the previous one "
                "is removed, so the second one will not fit";
  }
  return true;
}

bool runtime::writeCheckpointDirectory(const std::string &path,
                                       const checkpoint::Manifest &header,
                                       const std::vector<HeldBlock> &blocks,
                                       int keep, Communicator *comm,
                                       std::string &error) {
  int rank = comm ? comm->rank() : 0;
  std::string name = stepName(header.step());
  std::string tmpDir = path + "/" + name + ".tmp";
  std::error_code ec;
  // 1. Rank 0 prepares an empty temporary step directory. A format 1 or 2
  //    file at `path` is replaced once the new checkpoint is complete.
  bool ok = true;
  std::string root = path;
  if (rank == 0) {
    struct stat st;
    // Only into a directory of its own, and over nothing but a checkpoint
    // file gptc wrote (checkCheckpointPath).
    ok = checkCheckpointPath(path, /*replacing=*/false, error);
    if (std::optional<std::string> beside = besideStepDirectory(path))
      root = *beside;
    else if (ok && ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      root = path + ".format3.tmp";
    tmpDir = root + "/" + name + ".tmp";
    if (ok)
      fs::create_directories(root, ec);
    // A step directory left by a write that failed goes, where it holds
    // only what gptc writes; and the step is written over only where so.
    std::string final = root + "/" + name, foreign;
    if (ok && !ec && fs::exists(tmpDir, ec))
      ok = removeOwnStepDirectory(tmpDir, /*needManifest=*/false, error);
    if (ok && !ec && fs::exists(final, ec) &&
        !(foreign = foreignEntries(final, /*needManifest=*/false)).empty()) {
      error = "'" + final + "' holds " + foreign +
              ", which gptc did not write: gptc writes over only its own "
              "checkpoints (move those away, or name another --checkpoint)";
      ok = false;
    }
    if (ok && !ec)
      fs::create_directory(tmpDir, ec);
    if (ok && ec) {
      error = "cannot create the checkpoint directory '" + tmpDir +
              "': " + ec.message();
      ok = false;
    }
  }
  if (!agree(ok, comm, error))
    return false;
  // Every rank learns the directory rank 0 made.
  if (comm && comm->size() > 1) {
    std::vector<std::string> unused;
    std::vector<char> text(4096, 0);
    if (rank == 0)
      std::strncpy(text.data(), tmpDir.c_str(), text.size() - 1);
    if (!comm->broadcast(text.data(), static_cast<int64_t>(text.size()),
                         {comm->size()}, {0}, error))
      return false;
    tmpDir = text.data();
  }

  // 2. Each rank writes its blocks to its own file, in parallel.
  checkpoint::Manifest mine;
  if (!blocks.empty()) {
    std::ostringstream fileName;
    fileName << "rank-" << std::setw(5) << std::setfill('0') << rank << ".bin";
    std::string file = tmpDir + "/" + fileName.str();
    int fd =
        ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      error = systemError("cannot create", file);
      ok = false;
    }
    uint64_t offset = 0;
    for (const HeldBlock &b : blocks) {
      if (!ok)
        break;
      checkpoint::TensorRecord *t = mine.add_tensors();
      t->set_name(b.name);
      t->set_dtype(b.data->dtype);
      for (int64_t d : b.whole)
        t->add_shape(d);
      checkpoint::Shard *s = t->add_shards();
      for (int64_t d : b.start)
        s->add_start(d);
      for (int64_t d : b.data->shape)
        s->add_extent(d);
      s->set_file(fileName.str());
      s->set_offset(offset);
      uint64_t bytes = static_cast<uint64_t>(b.data->byteSize());
      s->set_bytes(bytes);
      s->set_crc32c(crc32c(0, b.data->raw(), bytes));
      if (injected.failStep == header.step() && injected.failRank == rank) {
        // A write that fails midway: half of the block reaches the file.
        writeAll(fd, b.data->raw(), bytes / 2);
        errno = injected.failErrno;
        error = systemError("cannot write", file);
        ok = false;
      } else if (!writeAll(fd, b.data->raw(), bytes)) {
        error = systemError("cannot write", file);
        ok = false;
      }
      offset += bytes;
    }
    if (fd >= 0) {
      if (ok && ::fsync(fd) != 0) {
        error = systemError("cannot write", file);
        ok = false;
      }
      ::close(fd);
    }
  }
  if (!agree(ok, comm, error)) {
    // The previous checkpoint and `latest` are as they were; the partial
    // step goes.
    if (rank == 0)
      fs::remove_all(tmpDir, ec);
    return false;
  }

  // 3. Rank 0 collects where every block went and writes the manifest.
  std::string mineText;
  if (!mine.SerializeToString(&mineText)) {
    error = "cannot serialize the checkpoint's shard records";
    return false;
  }
  std::vector<std::string> all;
  if (!gatherToRankZero(mineText, comm, all, error))
    return false;
  if (rank == 0) {
    checkpoint::Manifest manifest = header;
    manifest.set_format_version(kDirectoryFormat);
    manifest.set_ranks(comm ? comm->size() : 1);
    std::map<std::string, checkpoint::TensorRecord *> byName;
    for (const std::string &text : all) {
      checkpoint::Manifest part;
      if (!part.ParseFromString(text)) {
        error = "cannot read a rank's shard records";
        ok = false;
        break;
      }
      for (const checkpoint::TensorRecord &t : part.tensors()) {
        checkpoint::TensorRecord *&rec = byName[t.name()];
        if (!rec) {
          rec = manifest.add_tensors();
          rec->set_name(t.name());
          rec->set_dtype(t.dtype());
          *rec->mutable_shape() = t.shape();
        }
        for (const checkpoint::Shard &s : t.shards())
          *rec->add_shards() = s;
      }
    }
    std::string text;
    if (ok && !verifyManifest(manifest, tmpDir, error))
      ok = false;
    if (ok && !manifest.SerializeToString(&text)) {
      error = "cannot serialize the checkpoint's manifest";
      ok = false;
    }
    // 4. Publish: the complete step directory under its name, then
    //    `latest` (replaced by a rename), each fsynced first.
    ok = ok && writeFileSynced(tmpDir + "/" + kManifest, text, error);
    if (ok) {
      syncDirectory(tmpDir);
      std::string final = root + "/" + name, old = final + ".old";
      if (fs::exists(old, ec) &&
          !removeOwnStepDirectory(old, /*needManifest=*/false, error))
        ok = false;
      if (ok && fs::exists(final, ec))
        fs::rename(final, old, ec);
      if (ok && !ec)
        fs::rename(tmpDir, final, ec);
      if (ok && ec) {
        error = "cannot move the checkpoint into place at '" + final +
                "': " + ec.message();
        ok = false;
      }
      ok = ok &&
           writeFileSynced(root + "/" + kLatest + ".tmp", name + "\n", error);
      if (ok && ::rename((root + "/" + kLatest + ".tmp").c_str(),
                         (root + "/" + kLatest).c_str()) != 0) {
        error = systemError("cannot update", root + "/" + kLatest);
        ok = false;
      }
      if (ok)
        syncDirectory(root);
      fs::remove_all(old, ec);
      // A single-file checkpoint of an older format at `path` goes now.
      if (ok && root == path + ".format3.tmp") {
        fs::remove(path, ec);
        fs::rename(root, path, ec);
        if (ec) {
          error = "cannot replace the older checkpoint file '" + path +
                  "': " + ec.message();
          ok = false;
        }
        root = path;
      }
    }
    // 5. The newest `keep` steps up to this one stay. Steps after it (an
    //    abandoned later run) are left alone.
    if (ok && keep > 0) {
      int kept = 0;
      std::map<int64_t, std::string> steps = stepDirectories(root);
      for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        if (it->first > header.step() || ++kept <= keep)
          continue;
        // Pruned only where it holds nothing but what gptc writes.
        std::string prune;
        if (!removeOwnStepDirectory(it->second, /*needManifest=*/true, prune))
          std::cerr << "gptc: warning: --keep-checkpoints kept " << prune
                    << "\n";
      }
    }
    if (!ok)
      fs::remove_all(tmpDir, ec);
  }
  return agree(ok, comm, error);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

bool runtime::verifyManifest(const checkpoint::Manifest &manifest,
                             const std::string &path, std::string &error) {
  auto bad = [&](const std::string &what) {
    error = "the checkpoint '" + path + "' has a damaged manifest: " + what;
    return false;
  };
  std::set<std::string> names;
  for (const checkpoint::TensorRecord &t : manifest.tensors()) {
    if (!names.insert(t.name()).second)
      return bad("'" + t.name() + "' appears twice");
    if (!program::DType_IsValid(t.dtype()) ||
        elementSize(static_cast<program::DType>(t.dtype())) == 0)
      return bad("'" + t.name() + "' has an unknown dtype");
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    // Sizes must fit: every dimension and the total bytes under 2^62.
    int64_t es = elementSize(static_cast<program::DType>(t.dtype()));
    int64_t total = 1;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && total > (int64_t(1) << 62) / es / d))
        return bad("'" + t.name() + "' has the shape " + shapeText(shape));
      total *= d;
    }
    int64_t covered = 0;
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes;
    for (const checkpoint::Shard &s : t.shards()) {
      std::vector<int64_t> start(s.start().begin(), s.start().end()),
          extent(s.extent().begin(), s.extent().end());
      if (start.size() != shape.size() || extent.size() != shape.size())
        return bad("a block of '" + t.name() + "' has another rank");
      for (size_t d = 0; d < shape.size(); ++d)
        if (start[d] < 0 || extent[d] < 0 || start[d] > shape[d] ||
            extent[d] > shape[d] - start[d])
          return bad("a block of '" + t.name() + "' lies outside it");
      int64_t v = volume(extent);
      if (s.bytes() != static_cast<uint64_t>(v * es))
        return bad("a block of '" + t.name() + "' has " +
                   std::to_string(s.bytes()) + " bytes for " +
                   std::to_string(v) + " elements");
      if (s.file().empty() || s.file().find('/') != std::string::npos ||
          s.file() == "." || s.file() == "..")
        return bad("a block of '" + t.name() + "' names the file '" + s.file() +
                   "'");
      for (const auto &[bs, be] : boxes) {
        bool overlap = v > 0;
        for (size_t d = 0; d < shape.size() && overlap; ++d)
          overlap = start[d] < bs[d] + be[d] && bs[d] < start[d] + extent[d];
        if (overlap)
          return bad("two blocks of '" + t.name() + "' overlap");
      }
      if (boxes.size() > 4096)
        return bad("'" + t.name() + "' has too many blocks");
      boxes.push_back({start, extent});
      covered += v;
    }
    if (covered != total)
      return bad("the blocks of '" + t.name() + "' do not cover it");
  }
  return true;
}

CheckpointReader::~CheckpointReader() {
  for (auto &[name, fd] : files)
    ::close(fd);
}

std::unique_ptr<CheckpointReader>
CheckpointReader::open(const std::string &path, std::string &error) {
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error =
        "cannot open the checkpoint '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  if (!S_ISDIR(st.st_mode)) {
    // Formats 1 and 2: one protobuf message, read whole.
    r->legacy = std::make_unique<checkpoint::Checkpoint>();
    checkpoint::Checkpoint &ck = *r->legacy;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = "cannot open the checkpoint '" + path + "'";
      return nullptr;
    }
    if (!ck.ParseFromIstream(&in) || ck.format_version() < 1 ||
        ck.format_version() > 2) {
      error = "'" + path + "' is not a gptc checkpoint (or a newer format)";
      return nullptr;
    }
    if (!verifyCheckpointTensors(ck, path, error))
      return nullptr;
    checkpoint::Manifest &h = r->header;
    h.set_format_version(ck.format_version());
    h.set_model(ck.model());
    h.set_description(ck.description());
    h.set_fingerprint(ck.fingerprint());
    h.set_step(ck.step());
    h.set_data_seed(ck.data_seed());
    h.set_train_loss(ck.train_loss());
    h.set_val_loss(ck.val_loss());
    for (const checkpoint::Tensor &t : ck.tensors()) {
      checkpoint::TensorRecord *rec = h.add_tensors();
      rec->set_name(t.name());
      rec->set_dtype(t.dtype());
      *rec->mutable_shape() = t.shape();
      r->legacyData[t.name()] = &t;
    }
    for (const checkpoint::TensorRecord &t : h.tensors())
      r->records[t.name()] = &t;
    r->where = path;
    return r;
  }
  // Format 3: PATH/latest names the step directory, or PATH is one.
  std::string dir = path;
  std::ifstream latest(path + "/" + kLatest);
  if (latest) {
    std::string name;
    std::getline(latest, name);
    if (stepOf(name) < 0) {
      error = "the checkpoint directory '" + path +
              "' has a damaged 'latest' file (it names '" + printable(name) +
              "')";
      return nullptr;
    }
    dir = path + "/" + name;
  } else if (::access((path + "/" + kManifest).c_str(), F_OK) != 0) {
    error = "'" + path + "' holds no checkpoint (neither 'latest' nor '" +
            kManifest + "')";
    return nullptr;
  }
  std::ifstream in(dir + "/" + kManifest, std::ios::binary);
  if (!in) {
    error =
        "cannot open the checkpoint's manifest '" + dir + "/" + kManifest + "'";
    return nullptr;
  }
  if (!r->header.ParseFromIstream(&in) ||
      r->header.format_version() != kDirectoryFormat) {
    error = "'" + dir + "' is not a gptc checkpoint (or a newer format)";
    return nullptr;
  }
  if (!verifyManifest(r->header, dir, error))
    return nullptr;
  for (const checkpoint::TensorRecord &t : r->header.tensors())
    r->records[t.name()] = &t;
  r->where = dir;
  return r;
}

const checkpoint::TensorRecord *
CheckpointReader::find(const std::string &name) const {
  auto it = records.find(name);
  return it == records.end() ? nullptr : it->second;
}

namespace {
/// A setting the checkpoint and the run both record, with two values.
struct Difference {
  std::string name, before, now;
};
} // namespace

/// The settings of `recipe` the manifest records with another value, in
/// the recipe's order; only those whose name starts with `prefix`.
static std::vector<Difference> differences(const checkpoint::Manifest &m,
                                           const Recipe &recipe,
                                           const std::string &prefix = "") {
  std::map<std::string, std::string> recorded;
  for (const checkpoint::Setting &s : m.recipe())
    recorded[s.name()] = s.value();
  std::vector<Difference> out;
  for (const auto &[name, value] : recipe) {
    auto it = recorded.find(name);
    if (name.rfind(prefix, 0) == 0 && it != recorded.end() &&
        it->second != value)
      out.push_back({name, it->second, value});
  }
  return out;
}

static std::string describe(const std::vector<Difference> &changes) {
  std::string text;
  for (const Difference &d : changes)
    text += (text.empty() ? "" : "; ") + d.name + " was " + d.before +
            ", now " + d.now;
  return text;
}

bool CheckpointReader::checkModel(const std::string &signature,
                                  const std::string &model,
                                  const Recipe &recipe, std::string &error,
                                  const std::string &legacy) const {
  // Format 1 stored std::hash of the signature (this build's, for
  // compatibility with the checkpoints it wrote).
  std::string expected =
      header.format_version() == 1
          ? std::to_string(std::hash<std::string>()(signature))
          : checkpointFingerprint(signature);
  if (header.fingerprint() == expected ||
      (!legacy.empty() && header.format_version() > 1 &&
       header.fingerprint() == checkpointFingerprint(legacy)))
    return true;
  error = "the checkpoint '" + where + "' is of model '" + header.model() +
          "' with other parameters; it does not fit this '" + model + "'";
  std::vector<Difference> arch = differences(header, recipe, "model.");
  std::string what = describe(arch);
  // Else the parameters themselves: the signature lists "name:AxBxdtype;".
  if (what.empty()) {
    std::vector<std::string> found;
    size_t count = 0;
    std::set<std::string> mine;
    for (size_t at = 0; at < signature.size();) {
      size_t end = signature.find(';', at);
      std::string entry = signature.substr(at, end - at);
      at = end == std::string::npos ? signature.size() : end + 1;
      size_t colon = entry.find(':');
      if (colon == std::string::npos)
        continue;
      std::string name = entry.substr(0, colon), dims = entry.substr(colon + 1);
      mine.insert(name);
      const checkpoint::TensorRecord *t = find(name);
      std::string theirs;
      if (t) {
        for (int64_t d : t->shape())
          theirs += std::to_string(d) + "x";
        theirs += dtypeName(static_cast<program::DType>(t->dtype()));
      }
      if (t && theirs == dims)
        continue;
      if (++count <= 3)
        found.push_back(t ? "'" + name + "' is " + theirs + " there, " + dims +
                                " here"
                          : "it has no '" + name + "'");
    }
    for (const checkpoint::TensorRecord &t : header.tensors())
      if (t.name().rfind("m:", 0) != 0 && t.name().rfind("v:", 0) != 0 &&
          t.shape_size() > 0 && !mine.count(t.name()) && ++count <= 3)
        found.push_back("this model has no '" + t.name() + "'");
    for (const std::string &f : found)
      what += (what.empty() ? "" : "; ") + f;
    if (count > found.size())
      what += " and " + std::to_string(count - found.size()) + " more";
  }
  if (!what.empty())
    error += " (" + what + ")";
  return false;
}

/// A recipe's value as a number (0 where it does not read as one).
static double number(const Recipe &recipe, const std::string &name) {
  for (const auto &[n, v] : recipe)
    if (n == name)
      return std::strtod(v.c_str(), nullptr);
  return 0;
}

/// The learning rate of 0-based step `step` under `recipe`'s schedule of
/// `total` steps.
static double rateAt(const Recipe &recipe, int64_t step, int64_t total) {
  double peak = number(recipe, "training.optimizer.lr");
  std::string decay;
  for (const auto &[n, v] : recipe)
    if (n == "training.lr_schedule.decay")
      decay = v;
  return cpu::learningRate(
      step, peak, peak * number(recipe, "training.lr_schedule.min_lr_ratio"),
      static_cast<int64_t>(number(recipe, "training.lr_schedule.warmup_steps")),
      total,
      decay == "LINEAR"     ? 1
      : decay == "CONSTANT" ? 2
                            : 0);
}

static std::string rateText(double lr) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", lr);
  return buf;
}

bool CheckpointReader::checkSettings(const Recipe &recipe,
                                     const std::string &model, int64_t steps,
                                     const ResumePolicy &policy,
                                     std::string &notes,
                                     std::string &error) const {
  int64_t at = header.step();
  if (at > steps) {
    error = "the checkpoint '" + where + "' is at step " + std::to_string(at) +
            ", past the end of this run's schedule of " +
            std::to_string(steps) +
            " steps: continue it with a schedule of more steps (--steps; a "
            "trainer's steps)";
    return false;
  }
  if (header.recipe_size() == 0) {
    notes = "the checkpoint '" + where +
            "' records no training settings (written before gptc recorded "
            "them): they are not compared";
    return true;
  }
  // Another architecture is another model: nothing continues it.
  std::vector<Difference> arch = differences(header, recipe, "model.");
  if (!arch.empty()) {
    error = "the checkpoint '" + where + "' is of model '" + header.model() +
            "' with another architecture (" + describe(arch) +
            "); it does not fit '" + model + "'";
    return false;
  }
  std::vector<Difference> changes = differences(header, recipe);
  std::optional<Difference> length;
  for (auto it = changes.begin(); it != changes.end(); ++it)
    if (it->name == "training.steps") {
      length = *it;
      changes.erase(it);
      break;
    }
  // A schedule of another length: what the learning rate does next.
  std::string lengthNote;
  if (length) {
    Recipe recorded;
    for (const checkpoint::Setting &setting : header.recipe())
      recorded.emplace_back(setting.name(), setting.value());
    int64_t before = std::strtoll(length->before.c_str(), nullptr, 10);
    std::string old = at < before
                          ? "; the checkpoint's schedule of " + length->before +
                                " steps would give " +
                                rateText(rateAt(recorded, at, before))
                          : "; the checkpoint's schedule of " + length->before +
                                " steps ended at " +
                                rateText(rateAt(recorded, before - 1, before));
    lengthNote = "the schedule now spans " + length->now + " steps, not " +
                 length->before;
    // (A schedule that ends at the checkpoint's step has no next step.)
    if (at < steps)
      lengthNote += ": step " + std::to_string(at + 1) +
                    "'s learning rate is " +
                    rateText(rateAt(recipe, at, steps)) + old;
  }
  bool accepted =
      policy.anyChange || (changes.empty() && (!length || policy.stepsChange));
  if (!accepted) {
    std::vector<Difference> all = changes;
    if (length)
      all.insert(all.begin(), *length);
    error = "the checkpoint '" + where + "' was trained with other settings (" +
            describe(all) + ")" + (length ? ": " + lengthNote : "") + ". " +
            policy.whatToDo;
    return false;
  }
  if (!changes.empty())
    notes = "--resume-changed: continuing with other settings than the "
            "checkpoint's (" +
            describe(changes) + ")";
  if (length)
    notes += (notes.empty() ? "" : "\n") + lengthNote;
  return true;
}

bool CheckpointReader::verifyAll(std::string &error) {
  for (const checkpoint::TensorRecord &t : header.tensors()) {
    for (const char *prefix : {"m:", "v:"})
      if (t.name().rfind(prefix, 0) == 0) {
        const checkpoint::TensorRecord *p = find(t.name().substr(2));
        if (!p || p->dtype() != t.dtype() ||
            !std::equal(p->shape().begin(), p->shape().end(), t.shape().begin(),
                        t.shape().end())) {
          error = "the checkpoint '" + where + "' is damaged: '" + t.name() +
                  "' does not match its parameter's dtype and shape";
          return false;
        }
      }
    if (legacy)
      continue; // verified as the file was opened
    std::string bytes;
    for (int s = 0; s < t.shards_size(); ++s)
      if (!readShard(t, s, bytes, error))
        return false;
  }
  return true;
}

bool CheckpointReader::readShard(const checkpoint::TensorRecord &t, int s,
                                 std::string &bytes, std::string &error) {
  const checkpoint::Shard &shard = t.shards(s);
  std::string file = where + "/" + shard.file();
  auto it = files.find(shard.file());
  if (it == files.end()) {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "the checkpoint '" + where + "' lacks the data of '" + t.name() +
              "': " + systemError("cannot open", file);
      return false;
    }
    it = files.emplace(shard.file(), fd).first;
  }
  bytes.resize(shard.bytes());
  uint64_t done = 0;
  while (done < shard.bytes()) {
    ssize_t n = ::pread(it->second, bytes.data() + done,
                        std::min<uint64_t>(shard.bytes() - done, 1u << 30),
                        static_cast<off_t>(shard.offset() + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = "the checkpoint '" + where + "' is truncated: the data of '" +
              t.name() + "' ends early in '" + shard.file() + "'";
      return false;
    }
    done += static_cast<uint64_t>(n);
  }
  uint32_t crc = crc32c(0, bytes.data(), bytes.size());
  if (crc != shard.crc32c()) {
    std::ostringstream os;
    os << "the checkpoint '" << where << "' is corrupt: the data of '"
       << t.name() << "' (" << bytes.size() << " bytes in " << shard.file()
       << ") does not match its checksum (CRC-32C " << std::hex << std::setw(8)
       << std::setfill('0') << crc << ", recorded " << std::setw(8)
       << shard.crc32c() << ")";
    error = os.str();
    return false;
  }
  return true;
}

bool CheckpointReader::read(const std::string &name,
                            const std::vector<int64_t> &whole,
                            const std::vector<int64_t> &start, Tensor &block,
                            std::string &error, int64_t vocabRows) {
  const checkpoint::TensorRecord *t = find(name);
  std::vector<int64_t> shape;
  if (t)
    shape.assign(t->shape().begin(), t->shape().end());
  bool dtypeDiffers = t && t->dtype() != block.dtype;
  // A vocabulary table padded otherwise: the rows both have are copied,
  // those past the checkpoint's are zero (padding rows are zero).
  bool padded = t && shape != whole && vocabRows > 0 && !shape.empty() &&
                shape.size() == whole.size() &&
                std::equal(shape.begin() + 1, shape.end(), whole.begin() + 1) &&
                shape[0] >= vocabRows && whole[0] >= vocabRows;
  if (!t || (shape != whole && !padded) || dtypeDiffers) {
    error = "the checkpoint '" + where + "' lacks or mis-sizes '" + name + "'";
    if (t && shape != whole)
      error += ": it holds " + shapeText(shape) + ", the model has " +
               shapeText(whole);
    else if (dtypeDiffers)
      error += std::string(": it holds ") +
               dtypeName(static_cast<program::DType>(t->dtype())) +
               ", the model has " + dtypeName(block.dtype);
    return false;
  }
  // The elements of `block` the checkpoint holds (all but padding rows it
  // lacks).
  int64_t expected = block.numElements();
  if (padded) {
    std::fill(block.raw(), block.raw() + block.byteSize(), std::byte{0});
    int64_t perRow = block.shape.empty() || block.shape[0] == 0
                         ? 0
                         : block.numElements() / block.shape[0];
    int64_t rows = std::clamp<int64_t>(shape[0] - start[0], 0, block.shape[0]);
    expected = rows * perRow;
  }
  if (legacy) {
    const checkpoint::Tensor *data = legacyData.at(name);
    Tensor src = Tensor::view(
        block.dtype, shape,
        reinterpret_cast<std::byte *>(const_cast<char *>(data->data().data())));
    if (static_cast<int64_t>(data->data().size()) != src.byteSize()) {
      error =
          "the checkpoint '" + where + "' lacks or mis-sizes '" + name + "'";
      return false;
    }
    copyOverlap(src.raw(), std::vector<int64_t>(shape.size(), 0), shape,
                block.raw(), start, block.shape, elementSize(block.dtype));
    return true;
  }
  int64_t es = elementSize(block.dtype), copied = 0;
  std::string bytes;
  for (int s = 0; s < t->shards_size(); ++s) {
    const checkpoint::Shard &shard = t->shards(s);
    std::vector<int64_t> sStart(shard.start().begin(), shard.start().end()),
        sExtent(shard.extent().begin(), shard.extent().end());
    bool overlaps = true;
    for (size_t d = 0; d < whole.size() && overlaps; ++d)
      overlaps = sStart[d] < start[d] + block.shape[d] &&
                 start[d] < sStart[d] + sExtent[d];
    if (!overlaps || volume(sExtent) == 0)
      continue;
    if (!readShard(*t, s, bytes, error))
      return false;
    copied += copyOverlap(reinterpret_cast<const std::byte *>(bytes.data()),
                          sStart, sExtent, block.raw(), start, block.shape, es);
  }
  if (copied != expected) {
    error = "the checkpoint '" + where + "' lacks part of '" + name + "'";
    return false;
  }
  return true;
}

std::string gptc::runtime::checkpointFingerprint(const std::string &signature) {
  std::ostringstream os;
  os << "fnv1a64:" << std::hex << std::setw(16) << std::setfill('0')
     << fnv1a64(signature);
  return os.str();
}

bool gptc::runtime::verifyCheckpointTensors(const checkpoint::Checkpoint &ck,
                                            const std::string &path,
                                            std::string &error) {
  if (ck.format_version() < 2)
    return true;
  for (const checkpoint::Tensor &t : ck.tensors()) {
    if (!t.has_crc32c()) {
      error = "the checkpoint '" + path + "' has no checksum for '" + t.name() +
              "'";
      return false;
    }
    uint32_t crc = crc32c(0, t.data().data(), t.data().size());
    if (crc != t.crc32c()) {
      std::ostringstream os;
      os << "the checkpoint '" << path << "' is corrupt: the data of '"
         << t.name() << "' (" << t.data().size()
         << " bytes) does not match its checksum (CRC-32C " << std::hex
         << std::setw(8) << std::setfill('0') << crc << ", recorded "
         << std::setw(8) << t.crc32c() << ")";
      error = os.str();
      return false;
    }
  }
  return true;
}

int64_t gptc::runtime::vocabularyRows(const program::Value &param,
                                      const std::vector<int64_t> &shape,
                                      int64_t vocab) {
  if (shape.empty())
    return 0;
  if (param.init().rows() > 0 && param.init().rows() < shape[0])
    return param.init().rows();
  return vocab > 0 && shape[0] == vocab ? vocab : 0;
}

std::string gptc::runtime::modelFingerprint(
    const std::vector<const program::Value *> &params,
    const std::vector<std::vector<int64_t>> &shapes, bool logical) {
  std::ostringstream fp;
  for (size_t i = 0; i < params.size(); ++i) {
    fp << params[i]->name() << ":";
    int64_t rows = params[i]->init().rows();
    for (size_t d = 0; d < shapes[i].size(); ++d)
      fp << (d == 0 && logical && rows > 0 && rows < shapes[i][0]
                 ? rows
                 : shapes[i][d])
         << "x";
    fp << dtypeName(params[i]->type().dtype()) << ";";
  }
  return fp.str();
}
