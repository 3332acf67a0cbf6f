//===- Trainer.cpp - The training loop of gptc's runtime -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Trainer.h"

#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/checkpoint.pb.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <sys/stat.h>

using namespace gptc;
using namespace gptc::runtime;

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

bool ByteDataset::load(const std::string &path, int64_t seqLen,
                       ByteDataset &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open the training data '" + path + "'";
    return false;
  }
  out.path = path;
  out.bytes.assign(std::istreambuf_iterator<char>(in),
                   std::istreambuf_iterator<char>());
  int64_t n = static_cast<int64_t>(out.bytes.size());
  if (n == 0) {
    error = "the training data '" + path + "' is empty";
    return false;
  }
  out.split = n * 9 / 10;
  // Each split must hold one window of seq_len + 1 tokens.
  if (out.split < seqLen + 1 || n - out.split < seqLen + 1) {
    error = "the training data '" + path + "' has " + std::to_string(n) +
            " bytes: too short for one sequence of " + std::to_string(seqLen) +
            " tokens in both the training (90%) and validation (10%) parts; "
            "it needs at least " + std::to_string(10 * (seqLen + 1)) + " bytes";
    return false;
  }
  return true;
}

void ByteDataset::sampleTrain(std::mt19937_64 &rng, int64_t batch,
                              int64_t seqLen, int32_t *tokens,
                              int32_t *labels) const {
  std::uniform_int_distribution<int64_t> start(0, split - seqLen - 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t s = start(rng);
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = bytes[s + t];
      labels[b * seqLen + t] = bytes[s + t + 1];
    }
  }
}

void ByteDataset::validationBatch(int64_t index, int64_t count, int64_t batch,
                                  int64_t seqLen, int32_t *tokens,
                                  int32_t *labels) const {
  int64_t windows = count * batch;
  int64_t span = validationSize() - seqLen - 1;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t w = index * batch + b;
    int64_t s = split + (windows > 1 ? span * w / (windows - 1) : 0);
    for (int64_t t = 0; t < seqLen; ++t) {
      tokens[b * seqLen + t] = bytes[s + t];
      labels[b * seqLen + t] = bytes[s + t + 1];
    }
  }
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

static const program::Function *findFunction(const program::Program &p,
                                             const std::string &name) {
  for (const auto &f : p.functions())
    if (f.name() == name)
      return &f;
  return nullptr;
}

static BlockLayout layoutOf(const program::Value &v) {
  BlockLayout l;
  if (v.has_sharding()) {
    l.shape.assign(v.sharding().shape().begin(), v.sharding().shape().end());
    for (const auto &a : v.sharding().axes())
      l.axes.emplace_back(a.axes().begin(), a.axes().end());
  } else {
    l.shape.assign(v.type().shape().begin(), v.type().shape().end());
    l.axes.resize(l.shape.size());
  }
  return l;
}

/// A "Vm...:" figure of /proc/self/status in bytes, or -1.
static int64_t statusBytes(const char *key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(status, line))
    if (line.compare(0, n, key) == 0)
      return std::atoll(line.c_str() + n) * 1024;
  return -1;
}

int64_t runtime::peakResidentBytes() { return statusBytes("VmHWM:"); }

int64_t runtime::residentBytes() { return statusBytes("VmRSS:"); }

bool runtime::resetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

std::unique_ptr<Trainer> Trainer::create(const program::Program &program,
                                         const TrainOptions &options,
                                         std::string &error,
                                         Communicator *comm) {
  if (program.format_version() != kProgramFormatVersion) {
    error = "the program has format version " +
            std::to_string(program.format_version()) + "; this runtime reads " +
            std::to_string(kProgramFormatVersion);
    return nullptr;
  }
  const program::Function *step = findFunction(program, "train_step");
  const program::Function *fwd = findFunction(program, "forward");
  if (!step || !fwd) {
    error = "the program has no @train_step or @forward";
    return nullptr;
  }
  std::unique_ptr<Trainer> t(new Trainer());
  t->options = options;
  t->comm = comm;
  t->grid.assign(step->grid_shape().begin(), step->grid_shape().end());
  int64_t devices = 1;
  for (int64_t d : t->grid)
    devices *= d;
  int processes = comm ? comm->size() : 1;
  if (devices != processes) {
    error = "the program is for " + std::to_string(devices) +
            " devices but " + std::to_string(processes) +
            " processes run it: start it with mpirun -np " +
            std::to_string(devices);
    return nullptr;
  }
  if (!program.kernel_library().empty()) {
    t->kernels = KernelLibrary::load(program.kernel_library(), error);
    if (!t->kernels)
      return nullptr;
  }
  t->trainStep = Executor::create(*step, error, t->kernels.get());
  t->forward = Executor::create(*fwd, error, t->kernels.get());
  if (!t->trainStep || !t->forward)
    return nullptr;
  t->trainStep->setCommunicator(comm);
  t->forward->setCommunicator(comm);
  // @train_step's inputs and outputs by role (program.proto's Role): the
  // parameters, their moments (paired by name), the step, scalar state
  // (fp16's loss scaler) and the data; each state output is the next value
  // of the input of its role and name.
  int nin = step->inputs_size();
  int nout = step->outputs_size();
  auto roleName = [](program::Role r) { return program::Role_Name(r); };
  std::map<std::pair<int, std::string>, int> stateInputs;
  for (int i = 0; i < nin; ++i) {
    const program::Value &v = step->values(step->inputs(i));
    std::vector<int64_t> shape(v.type().shape().begin(),
                               v.type().shape().end());
    switch (v.role()) {
    case program::ROLE_PARAMETER:
      t->inputSlots.push_back({Slot::State, -1});
      t->names.push_back(v.name());
      t->inits.push_back(v.init());
      t->params.emplace_back(v.type().dtype(), shape);
      break;
    case program::ROLE_MOMENT_M:
    case program::ROLE_MOMENT_V:
    case program::ROLE_STEP:
      t->inputSlots.push_back(
          {v.role() == program::ROLE_STEP ? Slot::Step : Slot::State, -1});
      break;
    case program::ROLE_LOSS_SCALE:
    case program::ROLE_LOSS_SCALE_GOOD_STEPS:
    case program::ROLE_OPTIMIZER_UPDATES: {
      if (!shape.empty()) {
        error = "@train_step's state '" + v.name() + "' is not a scalar";
        return nullptr;
      }
      t->inputSlots.push_back(
          {Slot::Scalar, static_cast<int>(t->scalars.size())});
      ScalarState state;
      state.name = v.name();
      state.role = v.role();
      state.value = Tensor(v.type().dtype(), {});
      state.init = v.init();
      t->scalars.push_back(std::move(state));
      break;
    }
    case program::ROLE_TOKENS:
    case program::ROLE_LABELS: {
      t->inputSlots.push_back(
          {Slot::Data, static_cast<int>(t->dataInputs.size())});
      DataInput in;
      in.name = v.name();
      in.labels = v.role() == program::ROLE_LABELS;
      in.shape = shape;
      if (v.has_batch()) {
        in.layout = v.batch();
      } else {
        in.layout.set_rows(in.shape.empty() ? 1 : in.shape[0]);
        in.layout.set_microbatches(1);
      }
      if (v.type().dtype() != program::I32 || in.shape.size() != 2 ||
          in.shape[1] != options.seqLen ||
          in.shape[0] % std::max<int64_t>(in.layout.microbatches(), 1) != 0) {
        error = "@train_step's input '" + in.name +
                "' is not a batch of token ids of the sequence length";
        return nullptr;
      }
      t->stepRows = in.layout.rows();
      t->dataInputs.push_back(in);
      break;
    }
    default:
      error = "@train_step's input #" + std::to_string(i) + " ('" + v.name() +
              "') has no role the trainer feeds (" + roleName(v.role()) + ")";
      return nullptr;
    }
    stateInputs[{v.role(), v.name()}] = i;
  }
  // The moments in the parameters' order, found by name.
  int n = static_cast<int>(t->names.size());
  t->stateIn.assign(3 * n, -1);
  for (int i = 0; i < n; ++i) {
    t->stateIn[i] = stateInputs.at({program::ROLE_PARAMETER, t->names[i]});
    for (int group = 1; group < 3; ++group) {
      auto it = stateInputs.find(
          {group == 1 ? program::ROLE_MOMENT_M : program::ROLE_MOMENT_V,
           (group == 1 ? "m:" : "v:") + t->names[i]});
      if (it == stateInputs.end()) {
        error = "@train_step takes no moments of '" + t->names[i] + "'";
        return nullptr;
      }
      t->stateIn[group * n + i] = it->second;
      const program::Value &g = step->values(step->inputs(it->second));
      std::vector<int64_t> shape(g.type().shape().begin(),
                                 g.type().shape().end());
      (group == 1 ? t->m : t->v).emplace_back(g.type().dtype(), shape);
    }
  }
  if (!stateInputs.count({program::ROLE_STEP, "step"}) || n == 0) {
    error = "@train_step does not have the training-step signature "
            "(parameters, moments and a step)";
    return nullptr;
  }
  // Outputs: the state's next values, by role and name, and the figures.
  t->stateOut.assign(3 * n, -1);
  for (int j = 0; j < nout; ++j) {
    const program::Value &v = step->values(step->outputs(j));
    switch (v.role()) {
    case program::ROLE_LOSS:
      t->lossOut = j;
      continue;
    case program::ROLE_GRAD_NORM:
      t->normOut = j;
      continue;
    case program::ROLE_LEARNING_RATE:
      t->lrOut = j;
      continue;
    case program::ROLE_OVERFLOW:
      t->overflowOut = j;
      continue;
    default:
      break;
    }
    // "new:<name>" is the output name of the state <name>.
    std::string name = v.name();
    if (name.rfind("new:", 0) == 0)
      name = name.substr(4);
    auto in = stateInputs.find({v.role(), name});
    if (in == stateInputs.end())
      continue;
    for (int k = 0; k < 3 * n; ++k)
      if (t->stateIn[k] == in->second)
        t->stateOut[k] = j;
    for (ScalarState &st : t->scalars)
      if (st.role == v.role())
        st.output = j;
  }
  if (t->lossOut < 0 || t->normOut < 0 || t->lrOut < 0) {
    error = "@train_step does not return its loss, gradient norm and "
            "learning rate";
    return nullptr;
  }
  for (int k = 0; k < 3 * n; ++k)
    if (t->stateOut[k] < 0) {
      error = "@train_step does not return the next value of '" +
              step->values(step->inputs(t->stateIn[k])).name() + "'";
      return nullptr;
    }
  for (const ScalarState &st : t->scalars)
    if (st.output < 0) {
      error = "@train_step takes the state '" + st.name +
              "' but does not return its next value";
      return nullptr;
    }
  std::ostringstream fp;
  for (int i = 0; i < n; ++i) {
    // The fingerprint is of the whole model, so that checkpoints move
    // between meshes.
    const program::Value &v = step->values(step->inputs(t->stateIn[i]));
    BlockLayout whole = layoutOf(v);
    fp << v.name() << ":";
    for (int64_t d : whole.shape)
      fp << d << "x";
    fp << dtypeName(v.type().dtype()) << ";";
  }
  if (fwd->inputs_size() != n + 2) {
    error = "@forward does not take the parameters, tokens and labels";
    return nullptr;
  }
  for (int i = 0; i < n; ++i)
    t->forwardLayouts.push_back(layoutOf(fwd->values(fwd->inputs(i))));
  t->layouts.resize(3 * n);
  for (int k = 0; k < 3 * n; ++k)
    t->layouts[k] = layoutOf(step->values(step->inputs(t->stateIn[k])));
  t->fingerprint = std::to_string(std::hash<std::string>()(fp.str()));
  return t;
}

int64_t Trainer::numParameters() const {
  int64_t n = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t e = 1;
    for (int64_t d : layouts[i].shape)
      e *= d;
    n += e;
  }
  return n;
}

bool Trainer::gather(const std::vector<Tensor> &group, int offset,
                     std::vector<Tensor> &out, std::string &error) const {
  out.clear();
  for (size_t i = 0; i < group.size(); ++i) {
    const BlockLayout &l = layouts[offset + i];
    if (!l.isSplit()) {
      out.push_back(group[i]);
      continue;
    }
    Tensor whole;
    if (!gatherBlocks(group[i], l, grid, comm, whole, error))
      return false;
    out.push_back(std::move(whole));
  }
  return true;
}

bool Trainer::wholeParameters(std::vector<Tensor> &out,
                              std::string &error) const {
  return gather(params, 0, out, error);
}

void Trainer::initialize() {
  // Every rank draws the whole model in the one-device order and keeps its
  // blocks, so that a mesh starts from the one-device initialization.
  std::mt19937_64 rng(options.initSeed);
  size_t n = params.size();
  for (size_t i = 0; i < n; ++i) {
    Tensor whole(params[i].dtype, layouts[i].shape);
    int64_t count = whole.numElements();
    const program::ParamInit &init = inits[i];
    std::normal_distribution<double> normal(0.0, init.std());
    // Padding rows (init.rows > 0) stay zero and draw nothing, so a padded
    // table starts as the unpadded one does.
    int64_t drawn = count;
    if (init.rows() > 0 && !layouts[i].shape.empty() && layouts[i].shape[0] > 0)
      drawn = std::min(count, init.rows() * (count / layouts[i].shape[0]));
    for (int64_t j = 0; j < count; ++j) {
      double x = j >= drawn ? 0.0
                 : init.kind() == program::ParamInit::NORMAL ? normal(rng)
                 : init.kind() == program::ParamInit::ONES ? 1.0
                                                           : 0.0;
      if (whole.dtype == program::F64)
        whole.data<double>()[j] = x;
      else
        whole.data<float>()[j] = static_cast<float>(x);
    }
    params[i] = layouts[i].isSplit() ? sliceBlock(whole, layouts[i], grid, rank())
                                     : std::move(whole);
    std::fill(m[i].raw(), m[i].raw() + m[i].byteSize(), std::byte{0});
    std::fill(v[i].raw(), v[i].raw() + v[i].byteSize(), std::byte{0});
  }
  initializeScalars();
  step = 0;
}

void Trainer::initializeScalars() {
  for (ScalarState &s : scalars) {
    double x = s.init.kind() == program::ParamInit::CONSTANT ? s.init.value()
               : s.init.kind() == program::ParamInit::ONES   ? 1.0
                                                             : 0.0;
    if (s.value.dtype == program::F32)
      s.value.data<float>()[0] = static_cast<float>(x);
    else if (s.value.dtype == program::F64)
      s.value.data<double>()[0] = x;
    else if (s.value.dtype == program::I32)
      s.value.data<int32_t>()[0] = static_cast<int32_t>(x);
    else if (s.value.dtype == program::I64)
      s.value.data<int64_t>()[0] = static_cast<int64_t>(x);
  }
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

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
  out.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
}

bool Trainer::saveCheckpoint(const std::string &path, int64_t stepsDone,
                             std::string &error) const {
  checkpoint::Checkpoint ck;
  ck.set_format_version(1);
  ck.set_model(options.model);
  ck.set_description(options.description);
  ck.set_fingerprint(fingerprint);
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
    // The entry's small fields through protobuf, its data straight from
    // the tensor: setting `data` would copy the tensor (GPT-2's embedding
    // is 154 MB) and serializing the message buffer it again.
    checkpoint::Tensor entry;
    entry.set_name(name);
    entry.set_dtype(t->dtype);
    for (int64_t d : t->shape)
      entry.add_shape(d);
    std::string head;
    if (!entry.SerializeToString(&head)) {
      error = "cannot write the checkpoint '" + tmp + "'";
      return false;
    }
    writeTensorField(out, head, t->raw(), t->byteSize());
    if (!out) {
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
  out.flush();
  out.close();
  if (!out) {
    error = "cannot write the checkpoint '" + tmp + "'";
    std::remove(tmp.c_str());
    return false;
  }
  // The rename replaces the previous checkpoint only once the new one is
  // complete.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot move the checkpoint into place at '" + path + "'";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool Trainer::loadCheckpoint(const std::string &path, std::string &error) {
  checkpoint::Checkpoint ck;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open the checkpoint '" + path + "'";
    return false;
  }
  if (!ck.ParseFromIstream(&in) || ck.format_version() != 1) {
    error = "'" + path + "' is not a gptc checkpoint (or a newer format)";
    return false;
  }
  if (ck.fingerprint() != fingerprint) {
    error = "the checkpoint '" + path + "' is of model '" + ck.model() +
            "' with other parameters; it does not fit '" + options.model + "'";
    return false;
  }
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
  return true;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

bool Trainer::evaluate(const ByteDataset &data, double &loss,
                       std::string &error) {
  Tensor tokens(program::I32, {options.batch, options.seqLen});
  Tensor labels(program::I32, {options.batch, options.seqLen});
  // @forward computes on its own blocks of the parameters (whole ones, or
  // a tensor-parallel rank's): gather what the step holds more finely
  // (ZeRO's slices over the data axis). Every rank runs the same batches.
  std::vector<Tensor> gathered(params.size());
  std::vector<const Tensor *> in;
  for (size_t i = 0; i < params.size(); ++i) {
    const BlockLayout &have = layouts[i], &want = forwardLayouts[i];
    BlockLayout extra;
    extra.shape = want.shape;
    bool needed = false;
    for (size_t d = 0; d < have.axes.size(); ++d) {
      std::vector<int64_t> axes;
      for (int64_t a : have.axes[d])
        if (d >= want.axes.size() ||
            std::find(want.axes[d].begin(), want.axes[d].end(), a) ==
                want.axes[d].end())
          axes.push_back(a);
      needed |= !axes.empty();
      extra.axes.push_back(axes);
    }
    if (!needed) {
      in.push_back(&params[i]);
      continue;
    }
    if (!gatherBlocks(params[i], extra, grid, comm, gathered[i], error))
      return false;
    in.push_back(&gathered[i]);
  }
  in.push_back(&tokens);
  in.push_back(&labels);
  double sum = 0;
  std::vector<Tensor> out;
  for (int64_t k = 0; k < options.evalBatches; ++k) {
    data.validationBatch(k, options.evalBatches, options.batch, options.seqLen,
                         tokens.data<int32_t>(), labels.data<int32_t>());
    if (!forward->run(in, out, error))
      return false;
    sum += out[0].dtype == program::F64 ? out[0].data<double>()[0]
                                        : out[0].data<float>()[0];
  }
  loss = sum / static_cast<double>(options.evalBatches);
  lastValLoss = loss;
  haveValLoss = true;
  return true;
}

/// "1:02:03" or "2:03".
static std::string clock(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream os;
  if (s >= 3600)
    os << s / 3600 << ":" << std::setw(2) << std::setfill('0')
       << (s % 3600) / 60 << ":";
  else
    os << s / 60 << ":";
  os << std::setw(2) << std::setfill('0') << s % 60;
  return os.str();
}

static double scalar(const Tensor &t) {
  return t.dtype == program::F64 ? t.data<double>()[0] : t.data<float>()[0];
}

void Trainer::layOutRows(const Tensor &whole,
                         const program::BatchLayout &layout, int32_t pad,
                         Tensor &out) const {
  // Rows dealt over the ranks of the layout's axes, then the microbatches;
  // the rest of each microbatch is padding (see program.proto).
  std::vector<int64_t> axes(layout.axes().begin(), layout.axes().end());
  int64_t ranks = groupSize(grid, axes);
  int64_t me = groupIndex(grid, axes, rank());
  int64_t rows = layout.rows(), micro = std::max<int64_t>(layout.microbatches(), 1);
  int64_t T = out.shape[1], slots = out.shape[0] / micro;
  int64_t mine = rows / ranks + (me < rows % ranks);
  int64_t first = me * (rows / ranks) + std::min(me, rows % ranks);
  int32_t *dst = out.data<int32_t>();
  std::fill(dst, dst + out.numElements(), pad);
  const int32_t *src = whole.data<int32_t>();
  int64_t row = first;
  for (int64_t i = 0; i < micro; ++i) {
    int64_t count = mine / micro + (i < mine % micro);
    for (int64_t r = 0; r < count && r < slots; ++r, ++row)
      std::copy(src + row * T, src + (row + 1) * T, dst + (i * slots + r) * T);
  }
}

bool Trainer::dumpFinal(std::string &error) const {
  std::vector<Tensor> whole;
  if (!wholeParameters(whole, error))
    return false;
  for (size_t i = 0; i < params.size(); ++i) {
    if (rank() == 0 &&
        !writeNpy(options.dumpDir + "/final." + names[i] + ".npy", whole[i],
                  error))
      return false;
    if (!grid.empty() &&
        !writeNpy(options.dumpDir + "/rank" + std::to_string(rank()) +
                      ".final." + names[i] + ".npy",
                  params[i], error))
      return false;
  }
  return true;
}

bool Trainer::train(const ByteDataset &data, std::ostream &log,
                    std::string &error) {
  int64_t n = static_cast<int64_t>(params.size());
  Tensor stepT(program::I32, {});
  // The step's whole batch, and this rank's rows of it per data input.
  int64_t T = options.seqLen;
  Tensor tokens(program::I32, {stepRows, T});
  Tensor labels(program::I32, {stepRows, T});
  std::vector<Tensor> local;
  for (const DataInput &d : dataInputs)
    local.emplace_back(program::I32, d.shape);
  // Batches depend on the data seed and the step only, so that a resumed
  // run sees the batches an uninterrupted one would.
  bool writer = rank() == 0;
  std::ofstream tsv;
  if (!options.dumpDir.empty()) {
    std::vector<Tensor> whole;
    if (!wholeParameters(whole, error))
      return false;
    ::mkdir(options.dumpDir.c_str(), 0755);
    if (writer) {
      for (int64_t i = 0; i < n; ++i)
        if (!writeNpy(options.dumpDir + "/param." + names[i] + ".npy",
                      whole[i], error))
          return false;
      tsv.open(options.dumpDir + "/steps.tsv");
      tsv << "step\tloss\tgrad_norm\tlr"
          << (overflowOut >= 0 ? "\tskipped\tloss_scale" : "") << "\n"
          << std::setprecision(9);
    }
  }

  int64_t tokensPerStep = stepRows * T;
  int64_t first = step, last = options.steps;
  int64_t stop = options.stopAfter >= 0 ? std::min(options.stopAfter, last) : last;
  if (options.profile)
    trainStep->enableProfiling();
  auto start = std::chrono::steady_clock::now();
  // The first step pays for page faults and cold caches; the steady rate
  // is measured from the end of it.
  auto afterFirst = start;
  std::vector<const Tensor *> in;
  // The outputs' buffers. A state tensor (parameter, moment) the step may
  // update in place (Executor::canOverwriteInput: its old value is read
  // only before the update) is written into its own buffer: `out` holds a
  // view of it. The others are double-buffered: `out` holds the state of
  // two steps ago, whose buffers receive this step's (no copies).
  const program::Function &stepFn = trainStep->getFunction();
  std::vector<Tensor> out(stepFn.outputs_size());
  std::vector<bool> inPlace(3 * n, false);
  auto stateTensor = [&](int64_t k) -> Tensor & {
    return k < n ? params[k] : k < 2 * n ? m[k - n] : v[k - 2 * n];
  };
  // (Views first: allocating every output and then replacing some would
  // hold the whole state twice for a moment.)
  auto typeOf = [&](int64_t j, program::DType &dtype,
                    std::vector<int64_t> &shape) {
    const program::Value &value =
        stepFn.values(stepFn.outputs(static_cast<int>(j)));
    dtype = value.type().dtype();
    shape.assign(value.type().shape().begin(), value.type().shape().end());
  };
  for (int64_t k = 0; k < 3 * n; ++k) {
    int j = stateOut[k];
    Tensor &state = stateTensor(k);
    program::DType dtype;
    std::vector<int64_t> shape;
    typeOf(j, dtype, shape);
    if (trainStep->canOverwriteInput(j, stateIn[k]) && state.dtype == dtype &&
        state.shape == shape) {
      inPlace[k] = true;
      out[j] = Tensor::view(state.dtype, state.shape, state.raw());
    }
  }
  for (int64_t j = 0; j < stepFn.outputs_size(); ++j) {
    if (out[j].raw())
      continue;
    program::DType dtype;
    std::vector<int64_t> shape;
    typeOf(j, dtype, shape);
    out[j] = Tensor(dtype, shape);
  }
  for (; step < stop; ++step) {
    std::mt19937_64 rng(options.dataSeed * 1000003 + step);
    data.sampleTrain(rng, stepRows, T, tokens.data<int32_t>(),
                     labels.data<int32_t>());
    stepT.data<int32_t>()[0] = static_cast<int32_t>(step);
    if (writer && !options.dumpDir.empty()) {
      std::string prefix = options.dumpDir + "/batch." + std::to_string(step);
      if (!writeNpy(prefix + ".tokens.npy", tokens, error) ||
          !writeNpy(prefix + ".labels.npy", labels, error))
        return false;
    }
    for (size_t i = 0; i < dataInputs.size(); ++i) {
      bool isLabels = dataInputs[i].labels;
      layOutRows(isLabels ? labels : tokens, dataInputs[i].layout,
                 isLabels ? -1 : 0, local[i]);
    }
    in.clear();
    for (const Slot &slot : inputSlots)
      in.push_back(slot.kind == Slot::Step     ? &stepT
                   : slot.kind == Slot::Scalar ? &scalars[slot.index].value
                   : slot.kind == Slot::Data   ? &local[slot.index]
                                               : nullptr);
    for (int64_t k = 0; k < 3 * n; ++k)
      in[stateIn[k]] = &stateTensor(k);
    if (step == options.injectOverflowStep &&
        rank() == options.injectOverflowRank) {
      // A gradient overflows on this rank: the norm's first input.
      bool poisonable = trainStep->injectInfinityBefore(program::GLOBAL_NORM) ||
                        trainStep->injectInfinityBefore(program::SUM_SQUARES);
      if (!poisonable) {
        error = "cannot inject an overflow: @train_step takes no gradient "
                "norm";
        return false;
      }
    }
    if (!trainStep->run(in, out, error))
      return false;
    for (ScalarState &s : scalars)
      std::swap(s.value, out[s.output]);
    if (step == first)
      afterFirst = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < 3 * n; ++k)
      if (!inPlace[k])
        std::swap(stateTensor(k), out[stateOut[k]]);
    double loss = scalar(out[lossOut]), norm = scalar(out[normOut]),
           lr = scalar(out[lrOut]);
    bool skipped = overflowOut >= 0 && scalar(out[overflowOut]) != 0;
    lastLoss = loss;
    if (!std::isfinite(loss)) {
      error = "the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite") +
              " at step " + std::to_string(step + 1) +
              " (gradient norm " + std::to_string(norm) +
              ", learning rate " + std::to_string(lr) + ")";
      return false;
    }
    const Tensor *lossScale = nullptr;
    for (const ScalarState &s : scalars)
      if (s.role == program::ROLE_LOSS_SCALE)
        lossScale = &s.value;
    if (tsv.is_open()) {
      tsv << step << "\t" << loss << "\t" << norm << "\t" << lr;
      if (overflowOut >= 0)
        tsv << "\t" << skipped << "\t"
            << (lossScale ? scalar(*lossScale) : 0.0);
      tsv << "\n";
    }

    // Progress: tokens/s over this run, ETA for the rest.
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    int64_t done = step + 1 - first;
    double tps = elapsed > 0 ? done * tokensPerStep / elapsed : 0;
    double eta = done ? elapsed / done * (stop - step - 1) : 0;
    std::ostringstream line;
    line << "step " << std::setw(5) << step + 1 << "/" << last << " | loss "
         << std::fixed << std::setprecision(4) << loss << " | lr "
         << std::scientific << std::setprecision(2) << lr << " | norm "
         << std::fixed << std::setprecision(2) << norm << " | "
         << std::setprecision(0) << tps << " tok/s | ETA " << clock(eta);
    // fp16: a skipped step says so; the scale shown is the next step's.
    if (skipped)
      line << " | overflow: step skipped";
    if (lossScale && (skipped || overflowOut >= 0))
      line << " | loss scale " << std::defaultfloat << std::setprecision(6)
           << scalar(*lossScale);
    bool logSkip = skipped;
    bool final = step + 1 == stop;
    bool logNow =
        (options.logInterval > 0 &&
         ((step + 1) % options.logInterval == 0 || final || step == first)) ||
        logSkip;
    if (!writer)
      ;
    else if (options.liveProgress)
      log << "\r" << line.str() << (logNow ? "\n" : "") << std::flush;
    else if (logNow)
      log << line.str() << "\n" << std::flush;

    bool evalNow = options.evalInterval > 0 &&
                   ((step + 1) % options.evalInterval == 0 || final);
    if (evalNow) {
      double val;
      if (!evaluate(data, val, error))
        return false;
      if (writer)
        log << "step " << std::setw(5) << step + 1 << "/" << last
          << " | validation loss " << std::fixed << std::setprecision(4) << val
          << "\n" << std::flush;
    }
    if (options.checkpointInterval > 0 &&
        (step + 1) % options.checkpointInterval == 0 && !final &&
        !options.checkpointPath.empty()) {
      // The checkpoint records the steps completed, this one included.
      if (!saveCheckpoint(options.checkpointPath, step + 1, error))
        return false;
    }
  }
  auto end = std::chrono::steady_clock::now();
  double total = std::chrono::duration<double>(end - start).count();
  if (!options.dumpDir.empty() && !dumpFinal(error))
    return false;
  if (!writer)
    return true;
  double steady = std::chrono::duration<double>(end - afterFirst).count();
  int64_t steps = stop - first;
  if (steps > 0) {
    log << "gptc: " << steps << " steps in " << std::fixed
        << std::setprecision(2) << total << " s";
    if (steps > 1 && steady > 0)
      log << "; " << std::setprecision(0)
          << (steps - 1) * tokensPerStep / steady
          << " tok/s after the first step";
    log << "\n" << std::flush;
  }
  if (options.profile && !trainStep->profile().empty()) {
    const std::vector<double> &sec = trainStep->profile();
    double sum = 0;
    for (double x : sec)
      sum += x;
    std::vector<int> order;
    for (int k = 0; k < static_cast<int>(sec.size()); ++k)
      if (sec[k] > 0)
        order.push_back(k);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return sec[a] > sec[b]; });
    log << "gptc: time in @train_step by kernel (" << std::setprecision(2)
        << sum << " s in kernels of " << total << " s):\n";
    for (int k : order)
      log << "  " << std::left << std::setw(24)
          << program::OpKind_Name(static_cast<program::OpKind>(k))
          << std::right << std::setw(7) << std::setprecision(1)
          << 100.0 * sec[k] / sum << "%  " << std::setw(8)
          << std::setprecision(3) << sec[k] << " s  "
          << trainStep->profileCalls()[k] << " calls\n";
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Sampling
//===----------------------------------------------------------------------===//

bool runtime::sampleText(Executor &logits,
                         const std::vector<const Tensor *> &params,
                         const std::string &prompt, int64_t length,
                         double temperature, int64_t topK, uint64_t seed,
                         std::string &text, std::string &error) {
  const program::Function &fn = logits.getFunction();
  const program::Value &tokIn = fn.values(fn.inputs(fn.inputs_size() - 1));
  if (tokIn.type().shape_size() != 2 || tokIn.type().shape(0) != 1) {
    error = "@logits must take one sequence of tokens";
    return false;
  }
  int64_t seqLen = tokIn.type().shape(1);
  std::vector<int32_t> context;
  for (unsigned char c : prompt)
    context.push_back(c);
  if (context.empty())
    context.push_back('\n');
  std::mt19937_64 rng(seed);
  Tensor tokens(program::I32, {1, seqLen});
  std::vector<const Tensor *> in(params);
  in.push_back(&tokens);
  std::vector<Tensor> out;
  text.clear();
  for (int64_t i = 0; i < length; ++i) {
    // The last seqLen tokens, left-aligned; positions after them are
    // padding that causal attention keeps from affecting earlier ones.
    int64_t n = std::min<int64_t>(context.size(), seqLen);
    int32_t *t = tokens.data<int32_t>();
    std::fill(t, t + seqLen, 0);
    std::copy(context.end() - n, context.end(), t);
    if (!logits.run(in, out, error))
      return false;
    int64_t vocab = out[0].shape.back();
    const float *row = out[0].data<float>() + (n - 1) * vocab;
    // Only byte tokens can be printed; restrict to the first 256 ids.
    int64_t usable = std::min<int64_t>(vocab, 256);
    std::vector<std::pair<double, int32_t>> scored;
    for (int64_t j = 0; j < usable; ++j)
      scored.push_back({row[j] / std::max(temperature, 1e-6), int32_t(j)});
    std::sort(scored.begin(), scored.end(), std::greater<>());
    if (topK > 0 && topK < static_cast<int64_t>(scored.size()))
      scored.resize(topK);
    double mx = scored.front().first, sum = 0;
    std::vector<double> weights;
    for (auto &[s, id] : scored)
      sum += weights.emplace_back(std::exp(s - mx));
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    int32_t next = scored[pick(rng)].second;
    context.push_back(next);
    text.push_back(static_cast<char>(next));
  }
  return true;
}
