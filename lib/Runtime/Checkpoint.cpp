//===- Checkpoint.cpp - The trainer's checkpoints ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trainer::saveCheckpoint and loadCheckpoint: the whole training state,
// gathered from the ranks' blocks, in checkpoint.proto's format; a
// checkpoint written on one mesh loads on any other.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Trainer.h"

#include "gptc/Runtime/Checksum.h"
#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/Progress.h"
#include "gptc/Runtime/checkpoint.pb.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <sys/stat.h>

using namespace gptc;
using namespace gptc::runtime;

bool Trainer::saveCheckpoint(const std::string &path,
                             std::string &error) const {
  return saveCheckpoint(path, step, error);
}

/// Writes `value` as a protobuf varint.
static void writeVarint(std::ostream &out, uint64_t value) {
  char bytes[10];
  int n = 0;
  do {
    bytes[n++] = static_cast<char>((value & 0x7f) | (value > 0x7f ? 0x80 : 0));
    value >>= 7;
  } while (value);
  out.write(bytes, n);
}

/// Appends one `Checkpoint.tensors` entry in protobuf's wire format: the
/// entry's other fields (`head`, a serialized checkpoint::Tensor without
/// data) followed by its `data` field from `data`. A parser reads fields in
/// any order, so this is the message protobuf would write, without holding
/// a copy of the data.
static void writeTensorField(std::ostream &out, const std::string &head,
                             const void *data, int64_t bytes) {
  // Tags: (field number << 3) | 2, length-delimited.
  constexpr uint64_t kTensorsTag = (7 << 3) | 2, kDataTag = (4 << 3) | 2;
  auto varintSize = [](uint64_t v) {
    int n = 1;
    while (v > 0x7f) {
      v >>= 7;
      ++n;
    }
    return n;
  };
  uint64_t size = static_cast<uint64_t>(bytes);
  uint64_t entrySize = head.size() + 1 + varintSize(size) + size;
  writeVarint(out, kTensorsTag);
  writeVarint(out, entrySize);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  writeVarint(out, kDataTag);
  writeVarint(out, size);
  out.write(static_cast<const char *>(data),
            static_cast<std::streamsize>(size));
}

/// Closes the temporary file `tmp` and renames it to `path`: the rename
/// replaces the previous checkpoint only once the new one is complete.
static bool commitCheckpoint(std::ofstream &out, const std::string &tmp,
                             const std::string &path, std::string &error) {
  out.flush();
  out.close();
  if (!out) {
    error = "cannot write the checkpoint '" + tmp + "'";
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot move the checkpoint into place at '" + path + "'";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

/// One `tensors` entry for `t` named `name`; false when it cannot be
/// written.
static bool appendTensor(std::ostream &out, const std::string &name,
                         const Tensor &t) {
  // The entry's small fields through protobuf, its data straight from
  // the tensor: setting `data` would copy the tensor (GPT-2's embedding
  // is 154 MB) and serializing the message buffer it again.
  checkpoint::Tensor entry;
  entry.set_name(name);
  entry.set_dtype(t.dtype);
  for (int64_t d : t.shape)
    entry.add_shape(d);
  entry.set_crc32c(crc32c(0, t.raw(), static_cast<size_t>(t.byteSize())));
  std::string head;
  if (!entry.SerializeToString(&head))
    return false;
  writeTensorField(out, head, t.raw(), t.byteSize());
  return bool(out);
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

bool gptc::runtime::readCheckpointFile(const std::string &path,
                                       const std::string &signature,
                                       const std::string &model,
                                       checkpoint::Checkpoint &ck,
                                       std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open the checkpoint '" + path + "'";
    return false;
  }
  if (!ck.ParseFromIstream(&in) || ck.format_version() < 1 ||
      ck.format_version() > kCheckpointFormatVersion) {
    error = "'" + path + "' is not a gptc checkpoint (or a newer format)";
    return false;
  }
  // Format 1 stored std::hash of the signature (this build's, for
  // compatibility with the checkpoints it wrote).
  std::string expected =
      ck.format_version() == 1
          ? std::to_string(std::hash<std::string>()(signature))
          : checkpointFingerprint(signature);
  if (ck.fingerprint() != expected) {
    error = "the checkpoint '" + path + "' is of model '" + ck.model() +
            "' with other parameters; it does not fit '" + model + "'";
    return false;
  }
  return verifyCheckpointTensors(ck, path, error);
}

bool gptc::runtime::writeCheckpointFile(
    const std::string &path, const checkpoint::Checkpoint &header,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    std::string &error) {
  std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  bool ok = out && header.SerializeToOstream(&out);
  for (const auto &[name, t] : tensors)
    ok = ok && appendTensor(out, name, *t);
  if (!ok) {
    error = "cannot write the checkpoint '" + tmp + "'";
    std::remove(tmp.c_str());
    return false;
  }
  return commitCheckpoint(out, tmp, path, error);
}

std::string gptc::runtime::modelFingerprint(
    const std::vector<const program::Value *> &params,
    const std::vector<std::vector<int64_t>> &shapes) {
  std::ostringstream fp;
  for (size_t i = 0; i < params.size(); ++i) {
    fp << params[i]->name() << ":";
    for (int64_t d : shapes[i])
      fp << d << "x";
    fp << dtypeName(params[i]->type().dtype()) << ";";
  }
  return fp.str();
}

bool Trainer::saveCheckpoint(const std::string &path, int64_t stepsDone,
                             std::string &error) const {
  if (!syncState(error))
    return false;
  checkpoint::Checkpoint ck;
  ck.set_format_version(kCheckpointFormatVersion);
  ck.set_model(options.model);
  ck.set_description(options.description);
  ck.set_fingerprint(checkpointFingerprint(fingerprint));
  ck.set_step(stepsDone);
  ck.set_data_seed(options.dataSeed);
  ck.set_train_loss(lastLoss);
  ck.set_val_loss(haveValLoss ? lastValLoss : NAN);
  // The whole state, gathered from the ranks' blocks: a checkpoint fits
  // any mesh. Every rank takes part in the gathers; rank 0 writes.
  //
  // Written one tensor at a time: the header, then per tensor one
  // `tensors` entry. Concatenated protobuf messages parse as their merge
  // (repeated fields append), so the file is one Checkpoint; writing it
  // holds no copy of a tensor (only a gathered one under ZeRO).
  std::string tmp = path + ".tmp";
  std::ofstream out;
  if (rank() == 0) {
    out.open(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !ck.SerializeToOstream(&out)) {
      error = "cannot write the checkpoint '" + tmp + "'";
      std::remove(tmp.c_str());
      return false;
    }
  }
  auto write = [&](const std::string &name, const Tensor &block,
                   const BlockLayout &layout) {
    // The whole tensor: the block itself unless it is split over ranks.
    Tensor whole;
    const Tensor *t = &block;
    if (layout.isSplit()) {
      if (!gatherBlocks(block, layout, grid, comm, whole, error))
        return false;
      t = &whole;
    }
    if (rank() != 0)
      return true;
    if (!appendTensor(out, name, *t)) {
      error = "cannot write the checkpoint '" + tmp + "'";
      return false;
    }
    return true;
  };
  int n = static_cast<int>(params.size());
  for (int i = 0; i < n; ++i)
    if (!write(names[i], params[i], layouts[i]) ||
        !write("m:" + names[i], m[i], layouts[n + i]) ||
        !write("v:" + names[i], v[i], layouts[2 * n + i])) {
      if (rank() == 0)
        std::remove(tmp.c_str());
      return false;
    }
  // The scalar state is the same on every rank.
  for (const ScalarState &s : scalars)
    if (!write(s.name, s.value, BlockLayout{})) {
      if (rank() == 0)
        std::remove(tmp.c_str());
      return false;
    }
  if (rank() != 0)
    return true;
  return commitCheckpoint(out, tmp, path, error);
}

bool Trainer::loadCheckpoint(const std::string &path, std::string &error) {
  checkpoint::Checkpoint ck;
  if (!readCheckpointFile(path, fingerprint, options.model, ck, error))
    return false;
  std::map<std::string, const checkpoint::Tensor *> byName;
  for (const auto &t : ck.tensors())
    byName[t.name()] = &t;
  // Checkpoints hold whole tensors; each rank keeps its blocks.
  auto fill = [&](const std::string &name, Tensor &t, const BlockLayout &l) {
    auto it = byName.find(name);
    Tensor whole(t.dtype, l.shape);
    if (it == byName.end() ||
        static_cast<int64_t>(it->second->data().size()) != whole.byteSize()) {
      error = "the checkpoint '" + path + "' lacks or mis-sizes '" + name + "'";
      return false;
    }
    std::memcpy(whole.raw(), it->second->data().data(), whole.byteSize());
    t = l.isSplit() ? sliceBlock(whole, l, grid, rank()) : std::move(whole);
    return true;
  };
  size_t n = params.size();
  for (size_t i = 0; i < n; ++i)
    if (!fill(names[i], params[i], layouts[i]) ||
        !fill("m:" + names[i], m[i], layouts[n + i]) ||
        !fill("v:" + names[i], v[i], layouts[2 * n + i]))
      return false;
  // The scalar state (fp16's loss scaler) resumes where it was; a
  // checkpoint of a run without it (fp32 or bf16) starts it afresh.
  initializeScalars();
  for (ScalarState &s : scalars)
    if (byName.count(s.name) && !fill(s.name, s.value, BlockLayout{}))
      return false;
  step = ck.step();
  lastLoss = ck.train_loss();
  keepStateResident();
  return true;
}
