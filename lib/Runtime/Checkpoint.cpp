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

#include "gptc/Runtime/CheckpointStore.h"
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

checkpoint::Manifest Trainer::checkpointHeader(int64_t stepsDone) const {
  checkpoint::Manifest h;
  h.set_model(options.model);
  h.set_description(options.description);
  h.set_fingerprint(checkpointFingerprint(fingerprint));
  h.set_step(stepsDone);
  h.set_data_seed(options.dataSeed);
  h.set_train_loss(lastLoss);
  h.set_val_loss(haveValLoss ? lastValLoss : NAN);
  for (int64_t d : grid)
    h.add_grid(d);
  return h;
}

bool Trainer::saveCheckpoint(const std::string &path, int64_t stepsDone,
                             std::string &error) const {
  if (!syncState(error))
    return false;
  LongPhase longPhase(comm);
  // Each rank writes the blocks it is the first holder of: under tensor
  // parallelism and ZeRO every rank writes its part, in parallel;
  // replicas write nothing twice.
  std::vector<HeldBlock> blocks;
  auto add = [&](const std::string &name, const Tensor &block,
                 const BlockLayout &layout) {
    if (!firstHolder(layout, grid, rank()))
      return;
    blocks.push_back(
        {name, layout.shape, blockStart(layout, grid, rank()), &block});
  };
  int n = static_cast<int>(params.size());
  for (int i = 0; i < n; ++i) {
    add(names[i], params[i], layouts[i]);
    add("m:" + names[i], m[i], layouts[n + i]);
    add("v:" + names[i], v[i], layouts[2 * n + i]);
  }
  // The scalar state (fp16's loss scaler) is the same on every rank.
  for (const ScalarState &s : scalars)
    if (rank() == 0)
      blocks.push_back({s.name, s.value.shape,
                        std::vector<int64_t>(s.value.shape.size(), 0),
                        &s.value});
  if (!writeCheckpointDirectory(path, checkpointHeader(stepsDone), blocks,
                                options.keepCheckpoints, comm, error))
    return false;
  checkpointStep = stepsDone;
  return true;
}

bool Trainer::loadCheckpoint(const std::string &path, std::string &error) {
  auto reader = CheckpointReader::open(path, error);
  if (!reader || !reader->checkModel(fingerprint, options.model, error))
    return false;
  // Each rank reads its blocks, from whichever shards hold them: a
  // checkpoint of any mesh loads on any other.
  auto fill = [&](const std::string &name, Tensor &t, const BlockLayout &l) {
    Tensor block(t.dtype, l.isSplit() ? l.blockShape(grid) : l.shape);
    return reader->read(name, l.shape, blockStart(l, grid, rank()), block,
                        error) &&
           (t = std::move(block), true);
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
    if (reader->find(s.name) &&
        !fill(s.name, s.value, BlockLayout{s.value.shape, {}}))
      return false;
  step = reader->manifest().step();
  checkpointStep = step;
  lastLoss = reader->manifest().train_loss();
  keepStateResident();
  return true;
}
