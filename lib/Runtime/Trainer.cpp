//===- Trainer.cpp - The training loop of gptc's runtime -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Trainer.h"

#include "gptc/Runtime/KernelProfile.h"
#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/ProcessMemory.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/Progress.h"
#include "gptc/Runtime/Trace.h"
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

/// A "Vm...:" figure of /proc/self/status in bytes, or -1.
std::unique_ptr<Trainer> Trainer::create(const program::Program &program,
                                         const TrainOptions &options,
                                         std::string &error, Communicator *comm,
                                         std::unique_ptr<Backend> backend) {
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
    error = "the program is for " + std::to_string(devices) + " devices but " +
            std::to_string(processes) +
            " processes run it: start it with mpirun -np " +
            std::to_string(devices);
    return nullptr;
  }
  t->backend = backend ? std::move(backend) : createCpuBackend(program, error);
  if (!t->backend)
    return nullptr;
  t->trainStep = t->backend->createRunner(*step, error);
  if (!t->trainStep)
    return nullptr;
  t->forward = t->backend->createRunner(*fwd, error);
  if (!t->forward)
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
  // The fingerprint is of the whole model, so that checkpoints move
  // between meshes.
  std::vector<const program::Value *> fpValues;
  std::vector<std::vector<int64_t>> fpShapes;
  for (int i = 0; i < n; ++i) {
    const program::Value &v = step->values(step->inputs(t->stateIn[i]));
    fpValues.push_back(&v);
    fpShapes.push_back(layoutOf(v).shape);
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
  t->fingerprint = modelFingerprint(fpValues, fpShapes);
  t->paddedSignature = modelFingerprint(fpValues, fpShapes, /*logical=*/false);
  if (t->paddedSignature == t->fingerprint)
    t->paddedSignature.clear();
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
  return syncState(error) && gather(params, 0, out, error);
}

void Trainer::keepStateResident() {
  // The host copies are new (initialized or loaded): the backend forgets
  // what it held and takes these.
  backend->hostChanged();
  // (The scalar state, fp16's loss scaler, stays on the host: the loop
  // reads it every step and it is a few bytes.)
  for (std::vector<Tensor> *group : {&params, &m, &v})
    for (const Tensor &t : *group)
      backend->keepResident(t);
}

bool Trainer::syncState(std::string &error) const {
  return backend->syncToHost(error);
}

void Trainer::initialize() {
  // Every rank draws the whole model in the one-device order and keeps its
  // blocks, so that a mesh starts from the one-device initialization.
  std::mt19937_64 rng(options.initSeed);
  size_t n = params.size();
  for (size_t i = 0; i < n; ++i) {
    Tensor whole(params[i].dtype, layouts[i].shape);
    int64_t count = whole.numElements();
    if (auto given = initialValues.find(names[i]);
        given != initialValues.end()) {
      std::memcpy(whole.raw(), given->second.data(), given->second.size());
      params[i] = layouts[i].isSplit()
                      ? sliceBlock(whole, layouts[i], grid, rank())
                      : std::move(whole);
      std::fill(m[i].raw(), m[i].raw() + m[i].byteSize(), std::byte{0});
      std::fill(v[i].raw(), v[i].raw() + v[i].byteSize(), std::byte{0});
      continue;
    }
    const program::ParamInit &init = inits[i];
    std::normal_distribution<double> normal(0.0, init.std());
    // Padding rows (init.rows > 0) stay zero and draw nothing, so a padded
    // table starts as the unpadded one does.
    int64_t drawn = count;
    if (init.rows() > 0 && !layouts[i].shape.empty() && layouts[i].shape[0] > 0)
      drawn = std::min(count, init.rows() * (count / layouts[i].shape[0]));
    for (int64_t j = 0; j < count; ++j) {
      double x = j >= drawn                                  ? 0.0
                 : init.kind() == program::ParamInit::NORMAL ? normal(rng)
                 : init.kind() == program::ParamInit::ONES   ? 1.0
                                                             : 0.0;
      if (whole.dtype == program::F64)
        whole.data<double>()[j] = x;
      else
        whole.data<float>()[j] = static_cast<float>(x);
    }
    params[i] = layouts[i].isSplit()
                    ? sliceBlock(whole, layouts[i], grid, rank())
                    : std::move(whole);
    std::fill(m[i].raw(), m[i].raw() + m[i].byteSize(), std::byte{0});
    std::fill(v[i].raw(), v[i].raw() + v[i].byteSize(), std::byte{0});
  }
  initializeScalars();
  step = 0;
  keepStateResident();
}

bool Trainer::setInitialValues(std::map<std::string, std::string> values,
                               std::string &error) {
  for (const auto &[name, bytes] : values) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      error = "the program has no parameter '" + name + "' to initialize";
      return false;
    }
    size_t i = static_cast<size_t>(it - names.begin());
    Tensor whole(params[i].dtype, layouts[i].shape);
    if (static_cast<int64_t>(bytes.size()) != whole.byteSize()) {
      error = "the initial value of parameter '" + name + "' has " +
              std::to_string(bytes.size()) + " bytes; the parameter needs " +
              std::to_string(whole.byteSize());
      return false;
    }
  }
  initialValues = std::move(values);
  return true;
}

TrainingRun::~TrainingRun() = default;

TrainOptions TrainOptions::fromProgram(const program::Program &program) {
  const program::TrainSettings &s = program.train();
  TrainOptions o;
  o.model = program.model();
  o.description = s.description();
  o.batch = s.micro_batch();
  o.seqLen = s.seq_len();
  o.vocab = s.vocab();
  o.steps = s.steps();
  o.stopAfter = s.steps();
  o.evalInterval = s.eval_interval();
  o.checkpointInterval = s.checkpoint_interval();
  o.keepCheckpoints = static_cast<int>(s.keep_checkpoints());
  o.skipNonFinite = s.skip_non_finite();
  o.initSeed = s.init_seed();
  o.dataSeed = s.data_seed();
  o.checkpointPath = o.model + ".ckpt";
  for (const program::Setting &setting : s.recipe())
    o.recipe.emplace_back(setting.name(), setting.value());
  return o;
}

bool TrainingRun::trainSteps(const Dataset &data, int64_t count,
                             std::ostream &log, std::string &error) {
  TrainOptions &options = runOptions();
  if (count < 1) {
    error = "the step count must be at least 1, got " + std::to_string(count);
    return false;
  }
  if (getStep() >= options.steps) {
    error = "training has reached the schedule's last step (" +
            std::to_string(options.steps) + ")";
    return false;
  }
  if (getStep() + count > options.steps) {
    error = std::to_string(count) + " steps from step " +
            std::to_string(getStep()) + " pass the end of the schedule (" +
            std::to_string(options.steps) +
            " steps): " + std::to_string(options.steps - getStep()) +
            " are left (a longer run is a trainer with more steps, which "
            "loads this one's checkpoint)";
    return false;
  }
  int64_t saved = options.stopAfter;
  options.stopAfter = getStep() + count;
  bool ok = train(data, log, error);
  options.stopAfter = saved;
  return ok;
}

bool TrainingRun::trainBatch(Tensor &tokens, Tensor &labels, double &loss,
                             double &norm, std::string &error) {
  TrainOptions &options = runOptions();
  if (getStep() >= options.steps) {
    error = "training has reached the schedule's last step (" +
            std::to_string(options.steps) + ")";
    return false;
  }
  std::vector<int64_t> shape = {batchRows(), options.seqLen};
  for (const Tensor *t : {&tokens, &labels})
    if (t->shape != shape || t->dtype != program::I32) {
      error = "a step's batch is " + std::to_string(shape[0]) + " x " +
              std::to_string(shape[1]) + " token ids (tokens and labels)";
      return false;
    }
  // A transaction: a step that fails leaves the step, the parameters, the
  // optimizer state and the loss scale as they were.
  if (!beginSteps(step, step + 1, nullptr, error))
    return false;
  if (!keepForRollBack(error)) {
    endSteps();
    return false;
  }
  StepResult r;
  guardNonFinite = true;
  bool ok = runStep(step, tokens, labels, r, error);
  guardNonFinite = false;
  endSteps();
  // fp16's overflow is a step skipped as loss scaling does (the scale
  // lowered), not a failure; any other non-finite step is.
  bool finite = std::isfinite(r.loss) &&
                (hasLossScale() ? r.skipped || std::isfinite(r.norm)
                                : !r.skipped && std::isfinite(r.norm));
  if (ok && !finite)
    error = "the step's loss or gradient norm is not finite (loss " +
            std::to_string(r.loss) + ", norm " + std::to_string(r.norm) +
            "): the update was not applied, and the trainer is as it was at "
            "step " +
            std::to_string(step);
  if (!ok || !finite) {
    rollBack();
    return false;
  }
  loss = r.loss;
  norm = r.norm;
  lastLoss = r.loss;
  ++step;
  return true;
}

bool Trainer::keepForRollBack(std::string &error) {
  keptScalars.clear();
  keptState.clear();
  for (const ScalarState &s : scalars)
    keptScalars.push_back(s.value);
  // A program with the skip flag (overflowOut) leaves the parameters and
  // moments as they were on a non-finite step; without it, they are kept
  // here (a host copy).
  if (overflowOut >= 0)
    return true;
  if (!syncState(error))
    return false;
  int64_t n = static_cast<int64_t>(params.size());
  for (int64_t k = 0; k < 3 * n; ++k)
    keptState.push_back(stateTensor(k));
  return true;
}

void Trainer::rollBack() {
  for (size_t i = 0; i < scalars.size() && i < keptScalars.size(); ++i)
    std::memcpy(scalars[i].value.raw(), keptScalars[i].raw(),
                static_cast<size_t>(keptScalars[i].byteSize()));
  if (!keptState.empty()) {
    for (size_t k = 0; k < keptState.size(); ++k) {
      Tensor &t = stateTensor(static_cast<int64_t>(k));
      if (t.byteSize() == keptState[k].byteSize())
        std::memcpy(t.raw(), keptState[k].raw(),
                    static_cast<size_t>(t.byteSize()));
    }
    keepStateResident();
  }
  keptScalars.clear();
  keptState.clear();
}

bool Trainer::writeParameter(const std::string &name, const Tensor &whole,
                             std::string &error) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    error = "no parameter is named '" + name + "'";
    return false;
  }
  size_t i = static_cast<size_t>(it - names.begin());
  if (whole.dtype != params[i].dtype || whole.shape != layouts[i].shape) {
    error = "the value for parameter '" + name +
            "' has another dtype or shape than the parameter";
    return false;
  }
  if (!syncState(error))
    return false;
  if (layouts[i].isSplit()) {
    params[i] = sliceBlock(whole, layouts[i], grid, rank());
  } else {
    std::memcpy(params[i].raw(), whole.raw(),
                static_cast<size_t>(whole.byteSize()));
  }
  keepStateResident();
  return true;
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
// Training
//===----------------------------------------------------------------------===//

bool Trainer::evaluate(const Dataset &data, double &loss, std::string &error) {
  LongPhase longPhase(comm);
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
    if (!syncState(error))
      return false;
    if (!gatherBlocks(params[i], extra, grid, comm, gathered[i], error))
      return false;
    in.push_back(&gathered[i]);
  }
  in.push_back(&tokens);
  in.push_back(&labels);
  // The validation batches are the one-device run's: the step's rows each
  // (the description's batch_size), whatever the mesh makes of them. Each
  // runs as pieces of @forward's rows (the last padded with ignored
  // labels), whose mean losses, weighted by their rows, give the batch's.
  int64_t B = options.batch, T = options.seqLen;
  int64_t rows = std::max(stepRows, B);
  Tensor wholeTokens(program::I32, {rows, T}),
      wholeLabels(program::I32, {rows, T});
  double sum = 0;
  int64_t counted = 0;
  std::vector<Tensor> out;
  for (int64_t k = 0; k < options.evalBatches; ++k) {
    data.validationBatch(k, options.evalBatches, rows, T,
                         wholeTokens.data<int32_t>(),
                         wholeLabels.data<int32_t>());
    for (int64_t first = 0; first < rows; first += B) {
      int64_t n = std::min(B, rows - first);
      int32_t *tok = tokens.data<int32_t>(), *lab = labels.data<int32_t>();
      std::copy(wholeTokens.data<int32_t>() + first * T,
                wholeTokens.data<int32_t>() + (first + n) * T, tok);
      std::copy(wholeLabels.data<int32_t>() + first * T,
                wholeLabels.data<int32_t>() + (first + n) * T, lab);
      std::fill(tok + n * T, tok + B * T, 0);
      std::fill(lab + n * T, lab + B * T, -1);
      if (!forward->run(in, out, error))
        return false;
      double piece = out[0].dtype == program::F64 ? out[0].data<double>()[0]
                                                  : out[0].data<float>()[0];
      sum += piece * static_cast<double>(n);
      counted += n;
    }
  }
  loss = sum / static_cast<double>(counted);
  lastValLoss = loss;
  haveValLoss = true;
  return true;
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
  int64_t rows = layout.rows(),
          micro = std::max<int64_t>(layout.microbatches(), 1);
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
  if (!syncState(error))
    return false;
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

/// The buffers of @train_step's runs in one train call. A state tensor
/// (parameter, moment) the step may update in place
/// (Executor::canOverwriteInput: its old value is read only before the
/// update) is written into its own buffer: `out` holds a view of it. The
/// others are double-buffered: `out` holds the state of two steps ago,
/// whose buffers receive this step's (no copies). The double buffers live
/// in the backend too; when the steps end, the ones that are not state
/// then are forgotten.
struct Trainer::StepBuffers {
  Backend &backend;
  std::vector<Tensor> out;
  std::vector<bool> inPlace;
  std::vector<int> buffers;
  /// This rank's rows of the step's batch, per data input.
  std::vector<Tensor> local;
  Tensor stepT{program::I32, {}};
  std::vector<const Tensor *> in;
  int64_t first = 0, stop = 0;
  explicit StepBuffers(Backend &backend) : backend(backend) {}
  ~StepBuffers() {
    for (int j : buffers)
      backend.release(out[j]);
  }
};

Trainer::Trainer() = default;

Tensor &Trainer::stateTensor(int64_t k) {
  int64_t n = static_cast<int64_t>(params.size());
  return k < n ? params[k] : k < 2 * n ? m[k - n] : v[k - 2 * n];
}
Trainer::~Trainer() = default;

bool Trainer::hasLossScale() const {
  for (const ScalarState &s : scalars)
    if (s.role == program::ROLE_LOSS_SCALE)
      return true;
  return false;
}

bool Trainer::beginSteps(int64_t first, int64_t stop, TraceRecorder *trace,
                         std::string &error) {
  int64_t n = static_cast<int64_t>(params.size());
  if (!options.dumpDir.empty()) {
    std::vector<Tensor> whole;
    if (!wholeParameters(whole, error))
      return false;
    if (rank() == 0)
      for (int64_t i = 0; i < n; ++i)
        if (!writeNpy(options.dumpDir + "/param." + names[i] + ".npy", whole[i],
                      error))
          return false;
  }
  run = std::make_unique<StepBuffers>(*backend);
  StepBuffers &r = *run;
  r.first = first;
  r.stop = stop;
  for (const DataInput &d : dataInputs)
    r.local.emplace_back(program::I32, d.shape);
  if (options.profile)
    trainStep->enableProfiling();
  trainStep->setTrace(trace);
  forward->setTrace(trace);
  const program::Function &stepFn = trainStep->getFunction();
  r.out.resize(stepFn.outputs_size());
  r.inPlace.assign(3 * n, false);
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
      r.inPlace[k] = true;
      r.out[j] = Tensor::view(state.dtype, state.shape, state.raw());
    }
  }
  for (int64_t j = 0; j < stepFn.outputs_size(); ++j) {
    if (r.out[j].raw())
      continue;
    program::DType dtype;
    std::vector<int64_t> shape;
    typeOf(j, dtype, shape);
    r.out[j] = Tensor(dtype, shape);
  }
  for (int64_t k = 0; k < 3 * n; ++k)
    if (!r.inPlace[k])
      r.buffers.push_back(stateOut[k]);
  for (int j : r.buffers)
    backend->keepResident(r.out[j]);
  return true;
}

bool Trainer::runStep(int64_t step, Tensor &tokens, Tensor &labels,
                      StepResult &result, std::string &error) {
  StepBuffers &r = *run;
  int64_t n = static_cast<int64_t>(params.size());
  r.stepT.data<int32_t>()[0] = static_cast<int32_t>(step);
  for (size_t i = 0; i < dataInputs.size(); ++i) {
    bool isLabels = dataInputs[i].labels;
    layOutRows(isLabels ? labels : tokens, dataInputs[i].layout,
               isLabels ? -1 : 0, r.local[i]);
  }
  r.in.clear();
  for (const Slot &slot : inputSlots)
    r.in.push_back(slot.kind == Slot::Step     ? &r.stepT
                   : slot.kind == Slot::Scalar ? &scalars[slot.index].value
                   : slot.kind == Slot::Data   ? &r.local[slot.index]
                                               : nullptr);
  for (int64_t k = 0; k < 3 * n; ++k)
    r.in[stateIn[k]] = &stateTensor(k);
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
  if (!trainStep->run(r.in, r.out, error))
    return false;
  for (ScalarState &s : scalars)
    std::swap(s.value, r.out[s.output]);
  for (int64_t k = 0; k < 3 * n; ++k)
    if (!r.inPlace[k])
      std::swap(stateTensor(k), r.out[stateOut[k]]);
  result.loss = scalar(r.out[lossOut]);
  result.norm = scalar(r.out[normOut]);
  result.lr = scalar(r.out[lrOut]);
  result.skipped = overflowOut >= 0 && scalar(r.out[overflowOut]) != 0;
  for (const ScalarState &s : scalars)
    if (s.role == program::ROLE_LOSS_SCALE)
      result.lossScale = scalar(s.value);
  // The profile leaves out the first step (loading kernels, choosing
  // algorithms, first touches), as the rate does.
  if (options.profile && step == r.first && r.stop - r.first > 1)
    trainStep->enableProfiling();
  return true;
}

void Trainer::endSteps() {
  trainStep->setTrace(nullptr);
  forward->setTrace(nullptr);
  run.reset();
}

bool Trainer::finishSteps(std::ostream &log, const Progress &progress,
                          std::string &error) {
  if (!options.dumpDir.empty() && !dumpFinal(error))
    return false;
  if (!options.profile || rank() != 0)
    return true;
  bool afterFirst = run->stop - run->first > 1;
  int64_t steps =
      afterFirst ? run->stop - run->first - 1 : run->stop - run->first;
  const program::Function &stepFn = trainStep->getFunction();
  std::vector<KernelTime> kernels = trainStep->profile();
  // The copy's buffers (512 MiB) are the probe's, not training's: kept
  // out of the peak that gptc train reports.
  double copy = 0;
  int64_t probe = excludeFromPeak([&] { copy = backend->copyBandwidth(); });
  printKernelProfile(log, stepFn.name(), kernels, steps, afterFirst,
                     progress.secondsPerStep(), copy);
  if (probe > 0)
    log << "profile: the copy's buffers (" << std::fixed << std::setprecision(1)
        << probe / 1048576.0 << " MiB) are not counted in the peak memory\n";
  return options.profileJson.empty() ||
         writeKernelProfile(options.profileJson, stepFn.name(), kernels, steps,
                            progress.secondsPerStep(), copy,
                            backend->describe(), error);
}
