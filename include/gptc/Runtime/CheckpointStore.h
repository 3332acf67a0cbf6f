//===- CheckpointStore.h - Checkpoint directories ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Format 3 checkpoints (checkpoint.proto, docs/Checkpoints.md): a directory
// of step directories, each a manifest and one raw data file per writing
// rank. Writing is collective: every rank writes the blocks it is the first
// holder of, in parallel; rank 0 writes the manifest and makes the step
// current by renames. Reading gives any box of any tensor, so a checkpoint
// loads on any mesh. Tensor data never passes through protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CHECKPOINTSTORE_H
#define GPTC_RUNTIME_CHECKPOINTSTORE_H

#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Tensor.h"
#include "gptc/Runtime/checkpoint.pb.h"
#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

/// The newest checkpoint format the runtime reads; it writes format 3
/// (directories, below) and reads 1 and 2 (single files).
constexpr int32_t kCheckpointFormatVersion = 3;

/// Checks every tensor of `ck` (read from `path`) against its CRC-32C;
/// format 1 has none to check.
bool verifyCheckpointTensors(const checkpoint::Checkpoint &ck,
                             const std::string &path, std::string &error);

/// The model's signature: the parameters' names, whole shapes and dtypes,
/// in the model's order (checkpoints move between meshes). `logical`: a
/// table of the vocabulary padded for a mesh (its init's `rows` > 0) counts
/// its real rows, so that every mesh has the same signature.
std::string modelFingerprint(const std::vector<const program::Value *> &params,
                             const std::vector<std::vector<int64_t>> &shapes,
                             bool logical = true);

/// The rows of `param`'s vocabulary table that CheckpointReader::read
/// treats as the vocabulary's (its init's `rows` where the table is padded,
/// else dimension 0 where that is `vocab`); 0 for any other tensor.
int64_t vocabularyRows(const program::Value &param,
                       const std::vector<int64_t> &shape, int64_t vocab);

/// The fingerprint a checkpoint stores for a model's signature: a 64-bit
/// FNV-1a, the same in every build.
std::string checkpointFingerprint(const std::string &signature);

class Communicator;

/// A block of a tensor this rank holds: the box of `whole` starting at
/// `start` with `data`'s shape.
struct HeldBlock {
  std::string name;
  std::vector<int64_t> whole;
  std::vector<int64_t> start;
  const Tensor *data = nullptr;
};

/// Writes a file into `dir` and removes it: 0 where that worked, else the
/// errno that stopped it (the checks before the first step).
int writeProbe(const std::string &dir);

/// Before the first step: the directory checkpoints at `path` go into (the
/// path itself, or the directory holding a step directory or an older
/// single-file checkpoint) is created (the directories created for the
/// check are removed after it), a file is written and removed in it,
/// and its free space is compared with `bytes` (one checkpoint). False with
/// `error` where it cannot be created or written or cannot hold one
/// checkpoint; `warning` set where it cannot hold two (a new checkpoint is
/// complete before the previous one goes).
bool checkCheckpointDirectory(const std::string &path, int64_t bytes,
                              std::string &error, std::string &warning);

/// Faults a test injects into the checkpoints this process writes (gptc
/// train's hidden --inject-checkpoint-error and --assume-free-bytes).
struct CheckpointFaults {
  /// The checkpoint of this step fails on rank `failRank` with errno
  /// `failErrno` after half of its first block is written (-1: none).
  int64_t failStep = -1;
  int failErrno = 0;
  int failRank = 0;
  /// The free space checkCheckpointDirectory sees (< 0: statvfs's).
  double freeBytes = -1;
};
void setCheckpointFaultsForTesting(const CheckpointFaults &faults);

/// The checkpoints a fresh run at `path` would write over: "step 200 (and
/// 2 older step directories)" for a directory holding `latest` or step
/// directories, "a checkpoint file" for an older single-file checkpoint,
/// "a step directory" for one; "" where there are none.
std::string existingCheckpoints(const std::string &path);

/// Whether checkpoints may go to `path`: false with `error` naming what is
/// there where it is a file gptc did not write (only a format 1 or 2
/// checkpoint file may be replaced), neither a file nor a directory, the
/// root or the home directory, or (`replacing`: its checkpoints are to be
/// removed) the working directory.
bool checkCheckpointPath(const std::string &path, bool replacing,
                         std::string &error);

/// Removes the checkpoints existingCheckpoints() finds at `path` (the
/// step directories and `latest`, or the file), nothing else, and only
/// where all of it is gptc's: a step directory holding anything but its
/// manifest and shard files, a `latest` that names no step, a file that is
/// no checkpoint, or a protected directory (checkCheckpointPath) is
/// refused, naming what is there, and nothing is removed.
bool removeCheckpoints(const std::string &path, std::string &error);

/// Writes one checkpoint: `PATH/step-<N>/` with `header`'s fields and every
/// block of `blocks` (this rank's: each rank passes the blocks it writes),
/// then points `PATH/latest` at it and removes all but the newest `keep`
/// step directories at or before this step (`keep` < 1: keep all).
/// Collective over `comm` (null: one process): every rank calls it, all
/// return the same result. Every file is fsynced before the renames that
/// publish it, so a crash at any moment leaves the previous checkpoint.
bool writeCheckpointDirectory(const std::string &path,
                              const checkpoint::Manifest &header,
                              const std::vector<HeldBlock> &blocks, int keep,
                              Communicator *comm, std::string &error);

/// A run's settings as TrainSettings.recipe lists them: description paths
/// and values, in order.
using Recipe = std::vector<std::pair<std::string, std::string>>;

/// Which differences from a checkpoint's settings a resumed run accepts.
struct ResumePolicy {
  /// --resume-changed: any (each named in the notes).
  bool anyChange = false;
  /// A schedule of another length (--steps): gptc train accepts it and
  /// says what the learning rate does; the C API asks to be told.
  bool stepsChange = true;
  /// What a refusal tells the user to do.
  std::string whatToDo = "Continue it with these settings by "
                         "--resume-changed, or start afresh: another "
                         "--checkpoint directory, or --overwrite";
};

/// Reads a checkpoint of any format: a directory (format 3: its `latest`
/// step, or a step directory itself) or a single file (formats 1 and 2).
class CheckpointReader {
public:
  static std::unique_ptr<CheckpointReader> open(const std::string &path,
                                                std::string &error);
  ~CheckpointReader();

  /// The checkpoint's fields (for formats 1 and 2, converted; `tensors`
  /// lists names, dtypes and shapes).
  const checkpoint::Manifest &manifest() const { return header; }
  /// Where the data was read from (the step directory or the file).
  const std::string &location() const { return where; }
  const checkpoint::TensorRecord *find(const std::string &name) const;

  /// Fills `block` (its dtype and shape set) with the box of tensor `name`
  /// starting at `start`. Verifies the CRC-32C of every shard it reads;
  /// fails naming the tensor when the data is damaged, when the tensor is
  /// missing, or when its dtype or whole shape differs from `whole`.
  /// `vocabRows` > 0: the tensor is a table of the vocabulary's rows
  /// (dimension 0) that a mesh may pad (tensor parallelism pads 50257 to a
  /// multiple of its size): a checkpoint's table of any padding loads into
  /// any other, the rows past the vocabulary zero.
  bool read(const std::string &name, const std::vector<int64_t> &whole,
            const std::vector<int64_t> &start, Tensor &block,
            std::string &error, int64_t vocabRows = 0);

  /// Reads every shard of every tensor and checks its CRC-32C, and that
  /// each moment (`m:X`, `v:X`) has its parameter's dtype and shape (for
  /// readers that use only some tensors, such as `gptc sample`).
  bool verifyAll(std::string &error);

  /// Checks that the checkpoint is of the model with `signature`
  /// (modelFingerprint) named `model`; where not, the error names the
  /// architecture's settings that differ from `recipe`'s (when the
  /// checkpoint records them).
  /// `legacy`: a signature older checkpoints of the same model may carry
  /// (the padded vocabulary's shapes; "" for none).
  bool checkModel(const std::string &signature, const std::string &model,
                  const Recipe &recipe, std::string &error,
                  const std::string &legacy = "") const;

  /// Whether a run of `model` whose schedule spans `steps` and whose
  /// settings are `recipe` may continue this checkpoint
  /// (docs/Checkpoints.md): never from past the schedule's end or with
  /// another architecture; with the same settings, yes; with others, only
  /// where `policy` allows them, `notes` then saying what changed (and,
  /// for the schedule's length, what the learning rate does next).
  /// Settings only one side records are not compared.
  bool checkSettings(const Recipe &recipe, const std::string &model,
                     int64_t steps, const ResumePolicy &policy,
                     std::string &notes, std::string &error) const;

private:
  CheckpointReader() = default;
  bool readShard(const checkpoint::TensorRecord &t, int s, std::string &bytes,
                 std::string &error);

  checkpoint::Manifest header;
  std::string where;
  /// Formats 1 and 2: the whole file, whose tensors are verified on open.
  std::unique_ptr<checkpoint::Checkpoint> legacy;
  std::map<std::string, const checkpoint::TensorRecord *> records;
  std::map<std::string, const checkpoint::Tensor *> legacyData;
  /// Format 3: open data files by name.
  std::map<std::string, int> files;
};

/// Checks a format 3 manifest's structure: known dtypes, shards inside
/// their tensor, disjoint, covering it, with byte counts that match.
bool verifyManifest(const checkpoint::Manifest &manifest,
                    const std::string &path, std::string &error);

/// Where the block of `layout` held by `rank` of `grid` starts.
std::vector<int64_t> blockStart(const BlockLayout &layout,
                                const std::vector<int64_t> &grid, int64_t rank);
/// Whether `rank` is the lowest rank of `grid` holding its block of
/// `layout` (the one that writes it to a checkpoint).
bool firstHolder(const BlockLayout &layout, const std::vector<int64_t> &grid,
                 int64_t rank);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CHECKPOINTSTORE_H
