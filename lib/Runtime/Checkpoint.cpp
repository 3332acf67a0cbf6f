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
  for (const auto &[name, value] : options.recipe) {
    checkpoint::Setting *setting = h.add_recipe();
    setting->set_name(name);
    setting->set_value(value);
  }
  return h;
}

bool TrainingRun::checkResume(const CheckpointReader &reader,
                              const std::string &signature, std::string &error,
                              const std::string &legacy) {
  const TrainOptions &o = runOptions();
  resumeNotes.clear();
  return reader.checkModel(signature, o.model, o.recipe, error, legacy) &&
         reader.checkSettings(o.recipe, o.model, o.steps, o.resumePolicy,
                              resumeNotes, error);
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
                                options.keepCheckpoints, comm, error)) {
    errorOnEveryRank = true;
    return false;
  }
  checkpointStep = stepsDone;
  return true;
}

bool Trainer::loadCheckpoint(const std::string &path, std::string &error) {
  auto reader = CheckpointReader::open(path, error);
  if (!reader || !checkResume(*reader, fingerprint, error, paddedSignature))
    return false;
  // Each rank reads its blocks, from whichever shards hold them: a
  // checkpoint of any mesh loads on any other (a vocabulary table padded
  // for another mesh too).
  auto fill = [&](const std::string &name, Tensor &t, const BlockLayout &l,
                  int64_t vocabRows) {
    Tensor block(t.dtype, l.isSplit() ? l.blockShape(grid) : l.shape);
    return reader->read(name, l.shape, blockStart(l, grid, rank()), block,
                        error, vocabRows) &&
           (t = std::move(block), true);
  };
  size_t n = params.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t rows =
        inits[i].rows() > 0 && !layouts[i].shape.empty() &&
                inits[i].rows() < layouts[i].shape[0]
            ? inits[i].rows()
        : !layouts[i].shape.empty() && layouts[i].shape[0] == options.vocab
            ? options.vocab
            : 0;
    if (!fill(names[i], params[i], layouts[i], rows) ||
        !fill("m:" + names[i], m[i], layouts[n + i], rows) ||
        !fill("v:" + names[i], v[i], layouts[2 * n + i], rows))
      return false;
  }
  // The scalar state (fp16's loss scaler) resumes where it was; a
  // checkpoint of a run without it (fp32 or bf16) starts it afresh.
  initializeScalars();
  for (ScalarState &s : scalars)
    if (reader->find(s.name) &&
        !fill(s.name, s.value, BlockLayout{s.value.shape, {}}, 0))
      return false;
  step = reader->manifest().step();
  checkpointStep = step;
  lastLoss = reader->manifest().train_loss();
  keepStateResident();
  return true;
}
