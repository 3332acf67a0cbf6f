//===- PipelineTrainer.cpp - Training on pipeline stages -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/PipelineTrainer.h"

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/Progress.h"
#include "gptc/Runtime/Trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sys/stat.h>

using namespace gptc;
using namespace gptc::runtime;

namespace {

/// What feeds one input of a chunk function, or what one output is.
struct Binding {
  enum Kind {
    Param,
    In,
    Tokens,
    Labels,
    Cot,
    LossScale,
    Loss,
    Grad,
    InGrad,
    Out,
    Saved
  } kind;
  /// Param/Grad: the stage's parameter; In/Cot/InGrad/Out: the boundary
  /// value's position; Saved: the position among the values a split
  /// backward's input half returns for its weight half.
  int index = 0;
};

struct ChunkFunction {
  std::unique_ptr<FunctionRunner> runner;
  std::vector<Binding> inputs, outputs;
  /// Types of the boundary inputs and of the cotangents, by position.
  std::map<int64_t, std::pair<program::DType, std::vector<int64_t>>> inTypes,
      cotTypes;
};

std::vector<int64_t> shapeOf(const program::Value &v) {
  return {v.type().shape().begin(), v.type().shape().end()};
}

/// A message's tag: distinct for each (microbatch, chunk, direction,
/// position).
int64_t tagOf(int64_t micro, int64_t chunk, int64_t chunks, bool gradient,
              int64_t k) {
  return (((micro * chunks + chunk) * 2 + (gradient ? 1 : 0)) * 16) + k;
}

} // namespace

struct PipelineTrainer::Impl {
  program::PipelinePlan plan;
  /// The plan's parameters' names and whole shapes, in its order.
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  /// setInitialValues's values, by name.
  std::map<std::string, std::string> initialValues;
  TrainOptions options;
  Communicator *comm = nullptr;
  int stage = 0;
  /// The process grid, the stage and replica axes (-1: none), this rank's
  /// coordinates and its data-parallel replica.
  std::vector<int64_t> grid, coords;
  int64_t ppAxis = 0, dpAxis = -1, tpAxis = -1, replica = 0, replicas = 1,
          tpRank = 0;
  /// The rank of stage `s` in this rank's replica.
  int rankOf(int64_t s) const {
    int64_t r = 0;
    for (size_t a = 0; a < grid.size(); ++a)
      r = r * grid[a] + (static_cast<int64_t>(a) == ppAxis ? s : coords[a]);
    return static_cast<int>(r);
  }
  int64_t stages = 1, chunks = 1, micro = 1;
  std::unique_ptr<Backend> backend;
  /// Per chunk of the stage: its functions (a zero-bubble schedule runs
  /// the backward's halves, backwardInput and backwardWeight, instead).
  std::map<int64_t, ChunkFunction> forward, backward, backwardInput,
      backwardWeight;
  /// Per chunk: the boundary inputs' and the cotangents' types, by
  /// position (from whichever of its functions takes them).
  std::map<int64_t,
           std::map<int64_t, std::pair<program::DType, std::vector<int64_t>>>>
      inTypes, cotTypes;
  std::vector<std::map<int64_t, ChunkFunction> *> functionMaps() {
    return {&forward, &backward, &backwardInput, &backwardWeight};
  }
  /// This stage's parameters (indices into plan.params, in plan order).
  std::vector<int> own;
  std::map<std::string, int> ownIndex;
  std::vector<Tensor> params, m, v, grads;
  /// Per own parameter, on a backend with device memory: where a backward
  /// writes its gradient when the step's sum in `grads` has already begun
  /// (later microbatches, or a second chunk of the stage); allocated on
  /// first use. (The CPU adds from the backward's own buffers instead.)
  std::vector<Tensor> gradParts;
  /// Per plan parameter held by several stages: the zeros a stage that
  /// does not hold it adds to the stages' sum.
  std::map<int, Tensor> tiedZeros;
  /// ZeRO-1 and 2: per own parameter, the first element of this replica's
  /// slice and its length (the whole tensor when not sliced); m and v hold
  /// the slice (ZeRO-2: and the reduced gradient is only valid there).
  std::vector<int64_t> sliceBegin, sliceSize;
  bool sliced(size_t k) const { return sliceSize[k] != numElements[k]; }
  /// Per own parameter: its (block's) shape and elements.
  std::vector<std::vector<int64_t>> ownShapes;
  std::vector<int64_t> numElements;
  /// ZeRO-3: per own parameter, this replica's slice of it, where a sliced
  /// parameter lives between uses; params[k] is then empty, gathered
  /// whole over the replicas only for a chunk's run (each microbatch's
  /// forward and backward), a checkpoint, a dump or an evaluation.
  std::vector<Tensor> shards;
  bool sharded(size_t k) const { return plan.zero_stage() >= 3 && sliced(k); }
  /// ZeRO-3: the sliced parameters `ks` whole in params[k], in one
  /// all-gather over the replicas (as FSDP's flat parameter: one
  /// collective per chunk run, not one per tensor): each replica's slices
  /// packed into its part of a flat buffer, the parts gathered, each
  /// parameter's slices copied out. Every replica takes part.
  bool gather(const std::vector<size_t> &ks, std::string &error) {
    std::vector<size_t> missing;
    int64_t total = 0;
    for (size_t k : ks)
      if (sharded(k) && !params[k].raw() &&
          std::find(missing.begin(), missing.end(), k) == missing.end()) {
        missing.push_back(k);
        total += sliceSize[k];
      }
    if (missing.empty())
      return true;
    Tensor flat(program::F32, {total * replicas});
    backend->keepResident(flat);
    bool ok = true;
    int64_t at = replica * total;
    for (size_t k : missing) {
      ok = ok && backend->stateCopy({&flat, at, sliceSize[k]},
                                    {&shards[k], 0, sliceSize[k]}, error);
      at += sliceSize[k];
    }
    ok = ok && backend->stateAllGather({&flat, replica * total, total}, *comm,
                                       grid, {dpAxis}, error);
    int64_t offset = 0;
    for (size_t k : missing) {
      params[k] = Tensor(program::F32, ownShapes[k]);
      backend->keepResident(params[k]);
      for (int64_t r = 0; ok && r < replicas; ++r)
        ok = backend->stateCopy({&params[k], r * sliceSize[k], sliceSize[k]},
                                {&flat, r * total + offset, sliceSize[k]},
                                error);
      offset += sliceSize[k];
    }
    backend->release(flat);
    return ok;
  }
  /// Parameter k back to its slice alone.
  void drop(size_t k) {
    if (!sharded(k) || !params[k].raw())
      return;
    backend->release(params[k]);
    params[k] = Tensor();
  }
  /// The parameters a chunk function takes (ZeRO-3: gathered for a run).
  static std::vector<size_t> paramsOf(const ChunkFunction &f) {
    std::vector<size_t> ks;
    for (const Binding &b : f.inputs)
      if (b.kind == Binding::Param)
        ks.push_back(static_cast<size_t>(b.index));
    return ks;
  }
  bool gatherFor(const ChunkFunction &f, std::string &error) {
    return gather(paramsOf(f), error);
  }
  void dropFor(const ChunkFunction &f) {
    for (size_t k : paramsOf(f))
      drop(k);
  }
  /// Every parameter of the stage whole (checkpoints, dumps).
  bool gatherAll(std::string &error) {
    std::vector<size_t> ks(own.size());
    for (size_t k = 0; k < ks.size(); ++k)
      ks[k] = k;
    return gather(ks, error);
  }
  void dropAll() {
    for (size_t k = 0; k < own.size(); ++k)
      drop(k);
  }
  /// ZeRO-3: params[k] was set whole on the host (initialization, a
  /// checkpoint, writeParameter): its slice becomes the shard and the
  /// whole is dropped (keepStateResident follows).
  void shardFromHost(size_t k) {
    if (!sharded(k))
      return;
    if (!shards[k].raw())
      shards[k] = Tensor(program::F32, {sliceSize[k]});
    std::memcpy(shards[k].raw(), params[k].data<float>() + sliceBegin[k],
                static_cast<size_t>(sliceSize[k]) * sizeof(float));
    backend->release(params[k]);
    params[k] = Tensor();
  }
  /// The whole moment `state` (m or v) of parameter k: gathered over the
  /// replicas when sliced (every replica takes part).
  bool wholeMoment(size_t k, const Tensor &state, Tensor &out,
                   std::string &error);
  /// Per plan parameter: the stages that hold it.
  std::vector<std::set<int>> holders;
  /// fp16's dynamic loss scaling (plan.has_loss_scale()): the scale the
  /// last chunk's backward is seeded with (a host scalar the chunk takes),
  /// the good steps since it last changed and the updates applied, as
  /// @train_step's scalar state (and under its checkpoint names).
  Tensor lossScale{program::F32, {}};
  int32_t goodSteps = 0, updates = 0;
  void resetLossScale() {
    lossScale.data<float>()[0] = static_cast<float>(
        plan.has_loss_scale() ? plan.initial_loss_scale() : 1.0);
    goodSteps = updates = 0;
  }
  /// The axes the gradient norm's sum runs over: the stages, the tensor
  /// ranks and, with ZeRO-2 (each replica holds a slice of the reduced
  /// gradient), the replicas.
  std::vector<int64_t> normAxes() const {
    std::vector<int64_t> axes{ppAxis};
    if (tpAxis >= 0)
      axes.push_back(tpAxis);
    if (plan.zero_stage() >= 2 && dpAxis >= 0 && replicas > 1)
      axes.push_back(dpAxis);
    return axes;
  }

  bool bind(const program::Function &f, ChunkFunction &out, bool backwardFn,
            std::string &error);
  /// The timeline of the current train call (null: none).
  TraceRecorder *trace = nullptr;
  /// The parameters and moments are new host tensors (initialized or
  /// loaded): a device backend keeps them, and the gradients, in its
  /// memory from now on. The chunks read the parameters there and write
  /// the gradients there; the update runs there (Backend's state
  /// operations), so the host copies are current only after syncToHost
  /// (checkpoints, dumps).
  void keepStateResident() {
    backend->hostChanged();
    for (std::vector<Tensor> *state :
         {&params, &shards, &m, &v, &grads, &gradParts})
      for (const Tensor &t : *state)
        if (t.raw())
          backend->keepResident(t);
    for (const auto &[i, t] : tiedZeros)
      backend->keepResident(t);
  }
  /// The tensor a backward's gradient of own parameter k goes into: the
  /// step's sum itself the first time (`begun` false), gradParts[k] after
  /// on a device, nothing after on the CPU (the run's own buffer).
  Tensor gradTarget(size_t k, bool begun) {
    if (!begun)
      return Tensor::view(grads[k].dtype, grads[k].shape, grads[k].raw());
    if (!backend->hasDeviceMemory())
      return Tensor();
    if (!gradParts[k].raw()) {
      gradParts[k] = Tensor(grads[k].dtype, grads[k].shape);
      backend->keepResident(gradParts[k]);
    }
    return Tensor::view(gradParts[k].dtype, gradParts[k].shape,
                        gradParts[k].raw());
  }
};

PipelineTrainer::~PipelineTrainer() = default;

bool PipelineTrainer::Impl::bind(const program::Function &f, ChunkFunction &out,
                                 bool backwardFn, std::string &error) {
  auto fail = [&](const std::string &what) {
    error = "pipeline function '" + f.name() + "': " + what;
    return false;
  };
  for (int32_t id : f.inputs()) {
    const program::Value &v = f.values(id);
    const std::string &name = v.name();
    Binding b{Binding::Param, 0};
    if (v.role() == program::ROLE_BOUNDARY) {
      b = {Binding::In, v.index()};
      out.inTypes[b.index] = {v.type().dtype(), shapeOf(v)};
    } else if (v.role() == program::ROLE_COTANGENT) {
      b = {Binding::Cot, v.index()};
      out.cotTypes[b.index] = {v.type().dtype(), shapeOf(v)};
    } else if (v.role() == program::ROLE_SAVED) {
      b = {Binding::Saved, v.index()};
    } else if (v.role() == program::ROLE_TOKENS) {
      b = {Binding::Tokens, 0};
    } else if (v.role() == program::ROLE_LABELS) {
      b = {Binding::Labels, 0};
    } else if (v.role() == program::ROLE_LOSS_SCALE) {
      if (!plan.has_loss_scale())
        return fail("takes a loss scale, but the plan scales no loss");
      b = {Binding::LossScale, 0};
    } else if (v.role() == program::ROLE_PARAMETER) {
      auto it = ownIndex.find(name);
      if (it == ownIndex.end())
        return fail("takes '" + name + "', which is not a model parameter");
      b = {Binding::Param, it->second};
    } else {
      return fail("has an input '" + name + "' no pipeline role fits");
    }
    out.inputs.push_back(b);
  }
  for (int i = 0; i < f.outputs_size(); ++i) {
    const program::Value &v = f.values(f.outputs(i));
    std::string name = v.name();
    // Gradients are named after their parameter ("grad:<name>").
    if (name.rfind("grad:", 0) == 0)
      name = name.substr(5);
    Binding b{Binding::Out, i};
    if (backwardFn && v.role() == program::ROLE_LOSS) {
      b = {Binding::Loss, 0};
    } else if (backwardFn && v.role() == program::ROLE_SAVED) {
      b = {Binding::Saved, v.index()};
    } else if (backwardFn && v.role() == program::ROLE_BOUNDARY_GRADIENT) {
      b = {Binding::InGrad, v.index()};
    } else if (backwardFn) {
      auto it = ownIndex.find(name);
      if (it == ownIndex.end())
        return fail("returns the gradient of '" + name +
                    "', which is not this stage's parameter");
      b = {Binding::Grad, it->second};
      // The step writes each backward's gradient where the parameter's
      // sum lives (gradTarget), once per run.
      for (const Binding &o : out.outputs)
        if (o.kind == Binding::Grad && o.index == b.index)
          return fail("returns the gradient of '" + name + "' twice");
    }
    out.outputs.push_back(b);
  }
  return true;
}

std::unique_ptr<PipelineTrainer>
PipelineTrainer::create(const program::Program &program,
                        const TrainOptions &options, std::string &error,
                        Communicator *comm, std::unique_ptr<Backend> backend) {
  const program::PipelinePlan &plan = program.pipeline();
  std::unique_ptr<PipelineTrainer> t(new PipelineTrainer());
  t->impl = std::make_unique<Impl>();
  Impl &I = *t->impl;
  I.plan = plan;
  for (const program::Value &v : plan.params()) {
    I.names.push_back(v.name());
    I.shapes.push_back(layoutOf(v).shape);
  }
  I.options = options;
  I.comm = comm;
  I.stages = plan.stages();
  I.chunks = plan.stages() * plan.virtual_stages();
  I.micro = plan.microbatches();
  int processes = comm ? comm->size() : 1;
  I.grid.assign(plan.grid().begin(), plan.grid().end());
  if (I.grid.empty())
    I.grid = {I.stages};
  int64_t devices = 1;
  for (int64_t d : I.grid)
    devices *= d;
  I.ppAxis = plan.grid_size() ? plan.pipeline_axis() : 0;
  I.dpAxis = plan.grid_size() ? plan.data_axis() : -1;
  I.tpAxis = plan.grid_size() ? plan.tensor_axis() : -1;
  if (I.stages < 2 || processes != devices ||
      plan.programs_size() != I.stages || I.micro < 1 ||
      plan.weight_decays_size() != plan.params_size() || I.ppAxis < 0 ||
      I.ppAxis >= static_cast<int64_t>(I.grid.size()) ||
      I.grid[I.ppAxis] != I.stages ||
      I.dpAxis >= static_cast<int64_t>(I.grid.size()) ||
      I.tpAxis >= static_cast<int64_t>(I.grid.size())) {
    error = "the pipeline's mesh has " + std::to_string(devices) +
            " devices but " + std::to_string(processes) +
            " processes run it: start it with mpirun -np " +
            std::to_string(devices);
    return nullptr;
  }
  I.coords.assign(I.grid.size(), 0);
  for (int64_t a = static_cast<int64_t>(I.grid.size()) - 1, r = comm->rank();
       a >= 0; --a) {
    I.coords[a] = r % I.grid[a];
    r /= I.grid[a];
  }
  I.stage = static_cast<int>(I.coords[I.ppAxis]);
  if (I.dpAxis >= 0) {
    I.replica = I.coords[I.dpAxis];
    I.replicas = I.grid[I.dpAxis];
  }
  if (I.tpAxis >= 0)
    I.tpRank = I.coords[I.tpAxis];
  // MPI makes a group's communicator the first time a collective needs it,
  // a collective over every process: stages reach their first collective
  // at different times (one waits in a receive), so every group is made
  // here, by all, in one order: those of the chunks' collectives and the
  // trainer's.
  std::set<std::vector<int64_t>> groups;
  for (const program::Function &f : program.functions())
    for (const program::Kernel &k : f.kernels())
      if (k.has_collective())
        groups.insert({k.collective().grid_axes().begin(),
                       k.collective().grid_axes().end()});
  std::vector<int64_t> all;
  for (int64_t a = 0; a < static_cast<int64_t>(I.grid.size()); ++a)
    all.push_back(a);
  groups.insert(all);
  groups.insert({I.ppAxis});
  if (I.dpAxis >= 0)
    groups.insert({I.dpAxis});
  groups.insert(I.normAxes());
  for (const std::vector<int64_t> &axes : groups) {
    double zero = 0;
    if (!comm->allReduceSum(&zero, 1, program::F64, I.grid, axes, error))
      return nullptr;
  }
  I.backend = backend ? std::move(backend) : createCpuBackend(program, error);
  if (!I.backend)
    return nullptr;
  auto find = [&](const std::string &name) -> const program::Function * {
    for (const program::Function &f : program.functions())
      if (f.name() == name)
        return &f;
    return nullptr;
  };
  // Which stages hold each parameter: those running a chunk that takes it.
  std::map<std::string, int> planIndex;
  for (int i = 0; i < plan.params_size(); ++i)
    planIndex[plan.params(i).name()] = i;
  I.holders.resize(plan.params_size());
  // A zero-bubble schedule runs each backward in two halves.
  bool split = plan.schedule() == program::SCHEDULE_ZB_H1;
  auto backwardNames = [&](int64_t c) {
    std::string name = "chunk" + std::to_string(c) + "_backward";
    return split ? std::vector<std::string>{name + "_input", name + "_weight"}
                 : std::vector<std::string>{name};
  };
  // A stage holds the parameters its chunks' functions take: the forward's
  // too (a split backward's halves may not take every parameter the
  // forward does: a bias whose output no gradient needs).
  for (int64_t c = 0; c < I.chunks; ++c) {
    std::vector<const program::Function *> fns;
    if (const program::Function *fwd = find("chunk" + std::to_string(c)))
      fns.push_back(fwd);
    for (const std::string &name : backwardNames(c)) {
      const program::Function *f = find(name);
      if (!f) {
        error = "the pipeline program has no " + name;
        return nullptr;
      }
      fns.push_back(f);
    }
    for (const program::Function *f : fns)
      for (int32_t id : f->inputs()) {
        auto it = planIndex.find(f->values(id).name());
        if (it != planIndex.end())
          I.holders[it->second].insert(static_cast<int>(c % I.stages));
      }
  }
  for (int i = 0; i < plan.params_size(); ++i)
    if (I.holders[i].count(I.stage)) {
      I.ownIndex[plan.params(i).name()] = static_cast<int>(I.own.size());
      I.own.push_back(i);
      const program::Value &v = plan.params(i);
      std::vector<int64_t> shape = shapeOf(v);
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      bool slice = plan.zero_stage() >= 1 && I.replicas > 1 && !shape.empty() &&
                   shape[0] % I.replicas == 0;
      int64_t size = slice ? n / I.replicas : n;
      I.sliceBegin.push_back(slice ? I.replica * size : 0);
      I.sliceSize.push_back(size);
      I.ownShapes.push_back(shape);
      I.numElements.push_back(n);
      I.shards.emplace_back();
      for (std::vector<Tensor> *g : {&I.params, &I.grads})
        g->emplace_back(v.type().dtype(), shape);
      I.gradParts.emplace_back();
      for (std::vector<Tensor> *g : {&I.m, &I.v})
        g->emplace_back(v.type().dtype(), std::vector<int64_t>{size});
      if (v.type().dtype() != program::F32) {
        error =
            "pipeline stages train fp32 parameters; '" + v.name() + "' is not";
        return nullptr;
      }
    }
  for (int i = 0; i < plan.params_size(); ++i)
    if (I.holders[i].size() >= 2 && !I.holders[i].count(I.stage))
      I.tiedZeros[i] = Tensor(program::F32, shapeOf(plan.params(i)));
  for (int64_t c = I.stage; c < I.chunks; c += I.stages) {
    std::string name = "chunk" + std::to_string(c);
    std::vector<std::pair<std::string, std::map<int64_t, ChunkFunction> *>> fns{
        {name, &I.forward}};
    if (split) {
      fns.push_back({name + "_backward_input", &I.backwardInput});
      fns.push_back({name + "_backward_weight", &I.backwardWeight});
    } else {
      fns.push_back({name + "_backward", &I.backward});
    }
    for (auto &[fname, map] : fns) {
      bool backwardFn = map != &I.forward;
      const program::Function *f = find(fname);
      if (!f && !backwardFn)
        continue; // the last chunk's forward (evaluation) may be absent
      if (!f) {
        error = "the pipeline program has no " + fname;
        return nullptr;
      }
      ChunkFunction &cf = (*map)[c];
      cf.runner = I.backend->createRunner(*f, error);
      if (!cf.runner || !I.bind(*f, cf, backwardFn, error))
        return nullptr;
      // Tensor parallelism's all-reduces run inside the chunks.
      cf.runner->setCommunicator(comm);
      // The messages' types, from whichever function takes them.
      I.inTypes[c].insert(cf.inTypes.begin(), cf.inTypes.end());
      I.cotTypes[c].insert(cf.cotTypes.begin(), cf.cotTypes.end());
    }
  }
  return t;
}

int64_t PipelineTrainer::numParameters() const {
  int64_t n = 0;
  for (const program::Value &v : impl->plan.params()) {
    int64_t e = 1;
    for (int64_t d : layoutOf(v).shape)
      e *= d;
    n += e;
  }
  return n;
}

void PipelineTrainer::initialize() {
  // As Trainer::initialize on one device: every parameter drawn in order
  // from one generator, this stage keeping its own.
  Impl &I = *impl;
  std::mt19937_64 rng(I.options.initSeed);
  for (int i = 0; i < I.plan.params_size(); ++i) {
    const program::Value &pv = I.plan.params(i);
    BlockLayout layout = layoutOf(pv);
    Tensor whole(pv.type().dtype(), layout.shape);
    int64_t count = whole.numElements();
    const program::ParamInit &init = pv.init();
    // A given value draws nothing, as on one device.
    if (auto given = I.initialValues.find(pv.name());
        given != I.initialValues.end()) {
      std::memcpy(whole.raw(), given->second.data(), given->second.size());
    } else {
      std::normal_distribution<double> normal(0.0, init.std());
      int64_t drawn = count;
      if (init.rows() > 0 && !whole.shape.empty() && whole.shape[0] > 0)
        drawn = std::min(count, init.rows() * (count / whole.shape[0]));
      for (int64_t j = 0; j < count; ++j) {
        double x = j >= drawn                                  ? 0.0
                   : init.kind() == program::ParamInit::NORMAL ? normal(rng)
                   : init.kind() == program::ParamInit::ONES   ? 1.0
                                                               : 0.0;
        whole.data<float>()[j] = static_cast<float>(x);
      }
    }
    auto it = I.ownIndex.find(pv.name());
    if (it == I.ownIndex.end())
      continue;
    int k = it->second;
    I.params[k] = layout.isSplit()
                      ? sliceBlock(whole, layout, I.grid, I.comm->rank())
                      : std::move(whole);
    std::memset(I.m[k].raw(), 0, I.m[k].byteSize());
    std::memset(I.v[k].raw(), 0, I.v[k].byteSize());
    I.shardFromHost(k);
  }
  I.resetLossScale();
  I.keepStateResident();
  step = 0;
}

bool PipelineTrainer::setInitialValues(
    std::map<std::string, std::string> values, std::string &error) {
  Impl &I = *impl;
  for (const auto &[name, bytes] : values) {
    int i = 0;
    while (i < I.plan.params_size() && I.plan.params(i).name() != name)
      ++i;
    if (i == I.plan.params_size()) {
      error = "the program has no parameter '" + name + "' to initialize";
      return false;
    }
    Tensor whole(I.plan.params(i).type().dtype(),
                 layoutOf(I.plan.params(i)).shape);
    if (static_cast<int64_t>(bytes.size()) != whole.byteSize()) {
      error = "the initial value of parameter '" + name + "' has " +
              std::to_string(bytes.size()) + " bytes; the parameter needs " +
              std::to_string(whole.byteSize());
      return false;
    }
  }
  I.initialValues = std::move(values);
  return true;
}

std::string PipelineTrainer::device() const {
  return impl->backend->describe();
}

bool PipelineTrainer::hasLossScale() const {
  return impl->plan.has_loss_scale();
}

int64_t PipelineTrainer::batchRows() const {
  return impl->options.batch * impl->micro * impl->replicas;
}

Communicator *PipelineTrainer::communicator() const { return impl->comm; }

bool PipelineTrainer::beginSteps(int64_t, int64_t, TraceRecorder *trace,
                                 std::string &error) {
  Impl &I = *impl;
  // The parameters the steps start from, as one device dumps them.
  if (!dumpParameters("param", error))
    return false;
  I.trace = trace;
  for (auto *fns : I.functionMaps())
    for (auto &[c, f] : *fns)
      f.runner->setTrace(trace);
  return true;
}

void PipelineTrainer::endSteps() {
  Impl &I = *impl;
  for (auto *fns : I.functionMaps())
    for (auto &[c, f] : *fns)
      f.runner->setTrace(nullptr);
  I.trace = nullptr;
}

bool PipelineTrainer::runStep(int64_t step, Tensor &tokens, Tensor &labels,
                              StepResult &result, std::string &error) {
  Impl &I = *impl;
  const TrainOptions &o = I.options;
  TraceRecorder *trace = I.trace;
  // This replica's rows of the step's batch (contiguous), in microbatches.
  int64_t T = o.seqLen, mb = o.batch, rows = mb * I.micro;
  auto microView = [&](Tensor &whole, int64_t i) {
    return Tensor::view(program::I32, {mb, T},
                        whole.raw() +
                            (I.replica * rows + i * mb) * T * sizeof(int32_t));
  };
  const std::vector<int64_t> &grid = I.grid;
  std::vector<int64_t> stageAxes{I.ppAxis}, normAxes = I.normAxes(), allAxes;
  for (int64_t a = 0; a < static_cast<int64_t>(grid.size()); ++a)
    allAxes.push_back(a);
  bool chunkNames = I.plan.virtual_stages() > 1;
  auto label = [&](const char *what, int64_t i, int64_t c) {
    return what + std::to_string(i) +
           (chunkNames ? "." + std::to_string(c) : std::string());
  };
  using Key = std::pair<int64_t, int64_t>; // microbatch, chunk
  int lastStage = static_cast<int>((I.chunks - 1) % I.stages);
  const program::PipelineStageProgram &prog = I.plan.programs(I.stage);
  // Whether the step's gradient sum of each own parameter has begun.
  std::vector<char> begun(I.own.size(), 0);
  // saved: a split backward's values from its input half to its weight
  // half, per microbatch and chunk.
  std::map<Key, std::vector<Tensor>> acts, cots, outbox, saved;
  // Each MPI send's data until it completes (in send order).
  std::vector<Tensor> sent;
  std::vector<size_t> done;
  double lossSum = 0;
  auto run = [&](ChunkFunction &f, int64_t i, int64_t c,
                 std::vector<Tensor> &out) {
    Tensor tok = microView(tokens, i), lab = microView(labels, i);
    std::vector<const Tensor *> in;
    for (const Binding &b : f.inputs)
      in.push_back(b.kind == Binding::Param       ? &I.params[b.index]
                   : b.kind == Binding::Tokens    ? &tok
                   : b.kind == Binding::Labels    ? &lab
                   : b.kind == Binding::LossScale ? &I.lossScale
                   : b.kind == Binding::In        ? &acts[{i, c}].at(b.index)
                   : b.kind == Binding::Saved     ? &saved[{i, c}].at(b.index)
                                                  : &cots[{i, c}].at(b.index));
    // ZeRO-3: the chunk's parameters are whole for this run only.
    if (!I.gatherFor(f, error))
      return false;
    bool ran = f.runner->run(in, out, error);
    I.dropFor(f);
    return ran;
  };
  for (const program::PipelineStep &s : prog.steps()) {
    int64_t i = s.microbatch(), c = s.chunk();
    double opStart = TraceRecorder::now();
    // Messages are kept only until their send completes.
    if (!sent.empty()) {
      if (!I.comm->testSends(done, error))
        return false;
      for (size_t j : done)
        sent.at(j) = Tensor();
    }
    switch (s.kind()) {
    case program::PipelineStep::FORWARD: {
      if (c + 1 == I.chunks)
        break; // the last chunk: its backward recomputes it
      auto it = I.forward.find(c);
      if (it == I.forward.end()) {
        error = "the pipeline program has no chunk" + std::to_string(c);
        return false;
      }
      std::vector<Tensor> out;
      if (!run(it->second, i, c, out))
        return false;
      outbox[{i, c + 1}] = std::move(out);
      if (trace)
        trace->slice(label("F", i, c), "forward", opStart, TraceRecorder::now(),
                     2);
      break;
    }
    case program::PipelineStep::BACKWARD:
    case program::PipelineStep::BACKWARD_INPUT:
    case program::PipelineStep::BACKWARD_WEIGHT: {
      bool input = s.kind() == program::PipelineStep::BACKWARD_INPUT,
           weight = s.kind() == program::PipelineStep::BACKWARD_WEIGHT;
      auto &fns = input    ? I.backwardInput
                  : weight ? I.backwardWeight
                           : I.backward;
      auto fit = fns.find(c);
      if (fit == fns.end()) {
        error = "pipeline stage " + std::to_string(I.stage) +
                " has no backward" +
                (input    ? " input half"
                 : weight ? " weight half"
                          : "") +
                " of chunk " + std::to_string(c);
        return false;
      }
      ChunkFunction &f = fit->second;
      // Parameter gradients are written where the state lives (on a
      // GPU, its memory): into the step's sum the first time, else
      // (gradTarget) where they are added from.
      std::vector<Tensor> out(f.outputs.size());
      for (size_t j = 0; j < f.outputs.size(); ++j)
        if (f.outputs[j].kind == Binding::Grad)
          out[j] = I.gradTarget(f.outputs[j].index, begun[f.outputs[j].index]);
      if (!run(f, i, c, out))
        return false;
      std::vector<Tensor> inGrads(I.inTypes[c].size());
      for (size_t j = 0; j < f.outputs.size(); ++j) {
        const Binding &b = f.outputs[j];
        if (b.kind == Binding::Loss && c + 1 == I.chunks) {
          lossSum += out[j].data<float>()[0];
        } else if (b.kind == Binding::Grad) {
          if (begun[b.index] &&
              !I.backend->stateAdd(I.grads[b.index], out[j], error))
            return false;
          begun[b.index] = 1;
        } else if (b.kind == Binding::InGrad) {
          inGrads.at(b.index) = std::move(out[j]);
        } else if (b.kind == Binding::Saved) {
          std::vector<Tensor> &keep = saved[{i, c}];
          if (static_cast<int>(keep.size()) <= b.index)
            keep.resize(b.index + 1);
          keep[b.index] = std::move(out[j]);
        }
      }
      if (c > 0 && !weight)
        outbox[{i, c - 1}] = std::move(inGrads);
      // The weight half may read the chunk's input and cotangent too.
      if (!input) {
        acts.erase({i, c});
        cots.erase({i, c});
        saved.erase({i, c});
      }
      if (trace)
        trace->slice(label(weight ? "W" : "B", i, c),
                     weight ? "weight gradient" : "backward", opStart,
                     TraceRecorder::now(), 2);
      break;
    }
    case program::PipelineStep::SEND: {
      auto it = outbox.find({i, c});
      if (it == outbox.end()) {
        error = "pipeline stage " + std::to_string(I.stage) +
                " sends a message it has not computed";
        return false;
      }
      for (size_t k = 0; k < it->second.size(); ++k) {
        const Tensor &t = it->second[k];
        if (!I.comm->send(
                t.raw(), t.byteSize(), I.rankOf(s.peer()),
                tagOf(i, c, I.chunks, s.gradient(), static_cast<int64_t>(k)),
                error))
          return false;
      }
      for (Tensor &t : it->second)
        sent.push_back(std::move(t));
      outbox.erase(it);
      break;
    }
    case program::PipelineStep::RECV: {
      // The types: the receiving chunk's boundary inputs (activations) or
      // cotangents (gradients).
      const auto &types = (s.gradient() ? I.cotTypes : I.inTypes)[c];
      std::vector<Tensor> got;
      for (size_t k = 0; k < types.size(); ++k) {
        auto type = types.find(static_cast<int64_t>(k));
        if (type == types.end()) {
          error = "pipeline chunk " + std::to_string(c) + " takes no " +
                  (s.gradient() ? "cotangent " : "boundary input ") +
                  std::to_string(k);
          return false;
        }
        got.emplace_back(type->second.first, type->second.second);
        if (!I.comm->recv(
                got.back().raw(), got.back().byteSize(), I.rankOf(s.peer()),
                tagOf(i, c, I.chunks, s.gradient(), static_cast<int64_t>(k)),
                error))
          return false;
      }
      (s.gradient() ? cots : acts)[{i, c}] = std::move(got);
      if (trace)
        trace->slice(std::string("wait ") + (s.gradient() ? "grad " : "act ") +
                         std::to_string(i),
                     "wait", opStart, TraceRecorder::now(), 2);
      break;
    }
    default:
      error = "unknown pipeline step";
      return false;
    }
  }
  if (!I.comm->waitSends(error))
    return false;
  // A gradient no backward wrote this step is zero.
  for (size_t k = 0; k < I.own.size(); ++k)
    if (!begun[k] && !I.backend->stateZero(I.grads[k], error))
      return false;
  // The step's gradients (as the stage functions' ends say): a tied
  // parameter's summed over the stages that hold it, then each summed
  // over the replicas (ZeRO-2: each replica gets the sum of its slice
  // only), then the mean over the microbatches and the replicas. All of
  // it, and the update, runs where the state lives (Backend's state
  // operations: the device's kernels and NCCL on a GPU); only the norm's
  // and the loss's scalars cross to the host.
  Backend &B = *I.backend;
  for (int i = 0; i < I.plan.params_size(); ++i) {
    if (I.holders[i].size() < 2)
      continue;
    auto it = I.ownIndex.find(I.plan.params(i).name());
    const Tensor *g = nullptr;
    if (it != I.ownIndex.end()) {
      g = &I.grads[it->second];
    } else {
      g = &I.tiedZeros.at(i);
      if (!B.stateZero(*g, error))
        return false;
    }
    if (!B.stateAllReduceSum(*g, *I.comm, grid, stageAxes, error))
      return false;
  }
  bool zero2 = I.plan.zero_stage() >= 2;
  // This replica's part of parameter k's state: its ZeRO slice, or the
  // whole tensor.
  auto mine = [&](const Tensor &t, size_t k) {
    return StateSpan{&t, I.sliceBegin[k], I.sliceSize[k]};
  };
  for (size_t k = 0; k < I.own.size(); ++k) {
    if (I.replicas < 2)
      break;
    const Tensor &g = I.grads[k];
    if (zero2 && I.sliced(k)) {
      if (!B.stateReduceScatterSum(g, mine(g, k), *I.comm, grid, {I.dpAxis},
                                   error))
        return false;
    } else if (!B.stateAllReduceSum(g, *I.comm, grid, {I.dpAxis}, error)) {
      return false;
    }
  }
  // ZeRO-2: only the slice holds the reduced gradient.
  auto reduced = [&](size_t k) {
    const Tensor &g = I.grads[k];
    return zero2 && I.sliced(k) ? mine(g, k)
                                : StateSpan{&g, 0, g.numElements()};
  };
  float inv = 1.0f / static_cast<float>(I.micro * I.replicas);
  for (size_t k = 0; k < I.own.size(); ++k)
    if (!B.stateScale(reduced(k), inv, error))
      return false;
  // The gradient norm of the whole model (each parameter counted once,
  // by its first holder), the loss from the last stage.
  // (With tensor parallelism a block counts on its rank, a replicated
  // parameter on the first tensor rank only.)
  double sums[2] = {0, 0};
  std::vector<StateSpan> counted;
  for (size_t k = 0; k < I.own.size(); ++k) {
    if (*I.holders[I.own[k]].begin() != I.stage)
      continue;
    if (!layoutOf(I.plan.params(I.own[k])).isSplit() && I.tpRank != 0)
      continue;
    // ZeRO-2: each replica counts its slice (a whole gradient, on the
    // first replica only).
    if (zero2 && !I.sliced(k) && I.replica != 0)
      continue;
    counted.push_back(reduced(k));
  }
  // --inject-overflow (testing): a gradient this rank counts in the norm
  // becomes infinite after the reductions, so that only this rank sees it.
  if (step == o.injectOverflowStep && I.comm->rank() == o.injectOverflowRank) {
    if (counted.empty()) {
      error = "cannot inject an overflow: rank " +
              std::to_string(o.injectOverflowRank) +
              " counts no gradient in the norm";
      return false;
    }
    if (!B.stateScale(counted.front(), INFINITY, error))
      return false;
  }
  if (!B.stateSumOfSquares(counted, sums[0], error))
    return false;
  if (!I.comm->allReduceSum(&sums[0], 1, program::F64, grid, normAxes, error))
    return false;
  float norm = static_cast<float>(std::sqrt(sums[0]));
  // The loss, and (fp16) whether any rank's gradients overflowed: one sum
  // over every rank, so that all skip the update or none does.
  bool scaling = I.plan.has_loss_scale();
  double shared[2] = {0, scaling && !std::isfinite(norm) ? 1.0 : 0.0};
  if (I.stage == lastStage && I.tpRank == 0)
    shared[0] = lossSum / static_cast<double>(I.micro * I.replicas);
  if (!I.comm->allReduceSum(shared, 2, program::F64, grid, allAxes, error))
    return false;
  double loss = static_cast<float>(shared[0]);
  // trainBatch's guard: a non-finite loss or norm (the same on every
  // rank: both are sums over all of them) skips the update.
  bool found =
      shared[1] > 0 ||
      (guardNonFinite && (!std::isfinite(loss) || !std::isfinite(norm)));
  const program::ScheduleParams &sp = I.plan.schedule_params();
  float lr = static_cast<float>(
      cpu::learningRate(step, sp.peak(), sp.min(), sp.warmup(), sp.total(),
                        static_cast<int>(sp.decay())));
  // fp16: the gradients are the loss scale's multiples; the clip factor
  // unscales them and the norm reported is the true one (as @train_step's
  // gptc.clip_scale with a loss scale).
  float lossScale = scaling ? I.lossScale.data<float>()[0] : 1.0f;
  float scale = static_cast<float>(
      cpu::clipScale(norm / lossScale, I.plan.max_norm()) / lossScale);
  if (!found) {
    // AdamW on this replica's slice of each parameter (ZeRO-1; the whole
    // parameter otherwise), then the slices all-gathered. fp16 counts
    // the updates applied (skipped steps excluded) for the bias
    // correction.
    // ZeRO-3 updates the slice it holds, and gathers nothing after.
    std::vector<StateAdamW> update;
    for (size_t k = 0; k < I.own.size(); ++k) {
      bool shard = I.sharded(k);
      update.push_back({shard ? &I.shards[k] : &I.params[k], &I.grads[k],
                        &I.m[k], &I.v[k], I.sliceBegin[k], I.sliceSize[k],
                        I.plan.weight_decays(I.own[k]), shard ? 0 : -1});
    }
    if (!B.stateAdamW(update, lr, scaling ? I.updates : step, scale,
                      I.plan.beta1(), I.plan.beta2(), I.plan.eps(), error))
      return false;
    for (size_t k = 0; k < I.own.size(); ++k)
      if (I.sliced(k) && !I.sharded(k) &&
          !B.stateAllGather(mine(I.params[k], k), *I.comm, grid, {I.dpAxis},
                            error))
        return false;
  }
  if (scaling) {
    const program::LossScaleParams &rule = I.plan.loss_scale();
    cpu::LossScaleState next =
        cpu::updateLossScale({lossScale, I.goodSteps, I.updates}, found,
                             rule.growth(), rule.backoff(), rule.interval());
    I.lossScale.data<float>()[0] = next.scale;
    I.goodSteps = next.good;
    I.updates = next.updates;
    result.lossScale = next.scale;
  }
  result.loss = loss;
  result.norm = norm / lossScale;
  result.lr = lr;
  result.skipped = found;
  return true;
}

bool PipelineTrainer::keepForRollBack(std::string &) {
  // The update is the runtime's own (guarded by guardNonFinite): only
  // fp16's loss scale and its counters change on a skipped step.
  Impl &I = *impl;
  keptLossScale = I.lossScale.data<float>()[0];
  keptGoodSteps = I.goodSteps;
  keptUpdates = I.updates;
  return true;
}

void PipelineTrainer::rollBack() {
  Impl &I = *impl;
  I.lossScale.data<float>()[0] = keptLossScale;
  I.goodSteps = keptGoodSteps;
  I.updates = keptUpdates;
}

bool PipelineTrainer::finishSteps(std::ostream &, const Progress &,
                                  std::string &error) {
  // The final parameters.
  return dumpParameters("final", error);
}

bool PipelineTrainer::dumpParameters(const std::string &prefix,
                                     std::string &error) const {
  Impl &I = *impl;
  const TrainOptions &o = I.options;
  // From where the state lives (ZeRO-3: gathered whole first).
  if (!o.dumpDir.empty() &&
      (!I.gatherAll(error) || !I.backend->syncToHost(error)))
    return false;
  if (!o.dumpDir.empty() && I.replica == 0)
    for (size_t k = 0; k < I.own.size(); ++k) {
      if (*I.holders[I.own[k]].begin() != I.stage)
        continue;
      // Whole tensors: a tensor-parallel block is gathered first.
      const program::Value &pv = I.plan.params(I.own[k]);
      BlockLayout layout = layoutOf(pv);
      Tensor whole;
      const Tensor *t = &I.params[k];
      if (layout.isSplit()) {
        if (!gatherBlocks(I.params[k], layout, I.grid, I.comm, whole, error))
          return false;
        t = &whole;
      }
      if (I.tpRank == 0 &&
          !writeNpy(o.dumpDir + "/" + prefix + "." + pv.name() + ".npy", *t,
                    error))
        return false;
    }
  I.dropAll();
  return true;
}

namespace {
std::string fingerprintOf(const program::PipelinePlan &plan,
                          bool logical = true) {
  std::vector<const program::Value *> values;
  std::vector<std::vector<int64_t>> shapes;
  for (const program::Value &v : plan.params()) {
    values.push_back(&v);
    shapes.push_back(layoutOf(v).shape);
  }
  return modelFingerprint(values, shapes, logical);
}
} // namespace

bool PipelineTrainer::saveCheckpoint(const std::string &path, int64_t stepsDone,
                                     std::string &error) const {
  Impl &I = *impl;
  LongPhase longPhase(I.comm);
  // The state the device updated, copied to the host (ZeRO-3: the
  // parameters gathered whole first).
  if (!I.gatherAll(error) || !I.backend->syncToHost(error))
    return false;
  // ZeRO-1's moments are whole again once every replica has sent its slice.
  std::vector<Tensor> wholeM(I.own.size()), wholeV(I.own.size());
  for (size_t k = 0; k < I.own.size(); ++k)
    if (!I.wholeMoment(k, I.m[k], wholeM[k], error) ||
        !I.wholeMoment(k, I.v[k], wholeV[k], error))
      return false;
  // The first replica's first holder stage of each parameter writes it,
  // each of its tensor ranks its own block, all stages in parallel.
  std::vector<HeldBlock> blocks;
  for (size_t k = 0; I.replica == 0 && k < I.own.size(); ++k) {
    int i = I.own[k];
    const program::Value &pv = I.plan.params(i);
    BlockLayout layout = layoutOf(pv);
    if (*I.holders[i].begin() != I.stage ||
        (!layout.isSplit() && I.tpRank != 0))
      continue;
    std::vector<int64_t> start = blockStart(layout, I.grid, I.comm->rank());
    blocks.push_back({pv.name(), layout.shape, start, &I.params[k]});
    blocks.push_back({"m:" + pv.name(), layout.shape, start, &wholeM[k]});
    blocks.push_back({"v:" + pv.name(), layout.shape, start, &wholeV[k]});
  }
  // fp16's scaler, the same on every rank, under @train_step's names (a
  // checkpoint resumes on one device or another pipeline).
  Tensor good(program::I32, {}), updates(program::I32, {});
  good.data<int32_t>()[0] = I.goodSteps;
  updates.data<int32_t>()[0] = I.updates;
  if (I.plan.has_loss_scale() && I.comm->rank() == 0) {
    blocks.push_back({"loss_scale", {}, {}, &I.lossScale});
    blocks.push_back({"loss_scale_good_steps", {}, {}, &good});
    blocks.push_back({"optimizer_updates", {}, {}, &updates});
  }
  checkpoint::Manifest header;
  header.set_model(I.options.model);
  header.set_description(I.options.description);
  header.set_fingerprint(checkpointFingerprint(fingerprintOf(I.plan)));
  header.set_step(stepsDone);
  header.set_data_seed(I.options.dataSeed);
  header.set_train_loss(lastLoss);
  header.set_val_loss(NAN);
  for (int64_t d : I.grid)
    header.add_grid(d);
  for (const auto &[name, value] : I.options.recipe) {
    checkpoint::Setting *setting = header.add_recipe();
    setting->set_name(name);
    setting->set_value(value);
  }
  bool written = writeCheckpointDirectory(
      path, header, blocks, I.options.keepCheckpoints, I.comm, error);
  I.dropAll();
  if (!written) {
    errorOnEveryRank = true;
    return false;
  }
  checkpointStep = stepsDone;
  return true;
}

bool PipelineTrainer::loadCheckpoint(const std::string &path,
                                     std::string &error) {
  Impl &I = *impl;
  auto reader = CheckpointReader::open(path, error);
  std::string padded = fingerprintOf(I.plan, /*logical=*/false);
  if (!reader || !checkResume(*reader, fingerprintOf(I.plan), error,
                              padded == fingerprintOf(I.plan) ? "" : padded))
    return false;
  for (size_t k = 0; k < I.own.size(); ++k) {
    const program::Value &pv = I.plan.params(I.own[k]);
    const std::string &name = pv.name();
    BlockLayout layout = layoutOf(pv);
    std::vector<int64_t> start = blockStart(layout, I.grid, I.comm->rank());
    Tensor *state[3] = {&I.params[k], &I.m[k], &I.v[k]};
    const std::string names[3] = {name, "m:" + name, "v:" + name};
    for (int j = 0; j < 3; ++j) {
      Tensor block(program::F32,
                   layout.isSplit() ? layout.blockShape(I.grid) : layout.shape);
      if (!reader->read(names[j], layout.shape, start, block, error,
                        vocabularyRows(pv, layout.shape, I.options.vocab)))
        return false;
      if (j == 0) {
        *state[j] = std::move(block);
        I.shardFromHost(k);
      } else {
        // ZeRO-1: this replica's slice of the moment.
        std::memcpy(state[j]->raw(), block.data<float>() + I.sliceBegin[k],
                    state[j]->byteSize());
      }
    }
  }
  // fp16's scaler resumes where it was; a checkpoint of a run without one
  // (fp32 or bf16) starts it afresh.
  I.resetLossScale();
  if (I.plan.has_loss_scale()) {
    Tensor good(program::I32, {}), updates(program::I32, {});
    std::pair<const char *, Tensor *> scalars[] = {
        {"loss_scale", &I.lossScale},
        {"loss_scale_good_steps", &good},
        {"optimizer_updates", &updates}};
    for (auto [name, t] : scalars)
      if (reader->find(name) && !reader->read(name, {}, {}, *t, error))
        return false;
    I.goodSteps = good.data<int32_t>()[0];
    I.updates = updates.data<int32_t>()[0];
  }
  I.keepStateResident();
  step = reader->manifest().step();
  checkpointStep = step;
  lastLoss = reader->manifest().train_loss();
  return true;
}

bool PipelineTrainer::evaluate(const Dataset &data, double &loss,
                               std::string &error) {
  LongPhase longPhase(impl->comm);
  // Each validation batch goes forward through the chunks in order: a
  // stage runs its chunks' forwards, receiving the input from the previous
  // chunk's stage and sending the output to the next one's; the last
  // chunk's forward gives the loss.
  //
  // The validation batches are the one-device run's (the description's
  // batch_size rows each), each run as microbatch-sized pieces whose mean
  // losses average to the batch's.
  Impl &I = *impl;
  const TrainOptions &o = I.options;
  int64_t T = o.seqLen, mb = o.batch, batches = o.evalBatches;
  int64_t rows = mb * I.micro * I.replicas, pieces = rows / mb;
  Tensor wholeTokens(program::I32, {rows, T}),
      wholeLabels(program::I32, {rows, T});
  constexpr int64_t kEvalTag = int64_t(1) << 21;
  double sum = 0;
  for (int64_t b = 0; b < batches * pieces; ++b) {
    int64_t k = b, piece = b % pieces;
    if (piece == 0)
      data.validationBatch(b / pieces, batches, rows, T,
                           wholeTokens.data<int32_t>(),
                           wholeLabels.data<int32_t>());
    auto view = [&](Tensor &whole) {
      return Tensor::view(program::I32, {mb, T},
                          whole.raw() + piece * mb * T * sizeof(int32_t));
    };
    Tensor tokens = view(wholeTokens), labels = view(wholeLabels);
    for (int64_t c = I.stage; c < I.chunks; c += I.stages) {
      ChunkFunction &f = I.forward.at(c);
      std::vector<Tensor> in(f.inTypes.size());
      int prev = I.rankOf((c - 1) % I.stages),
          next = I.rankOf((c + 1) % I.stages);
      for (size_t j = 0; j < in.size(); ++j) {
        in[j] = Tensor(f.inTypes[j].first, f.inTypes[j].second);
        if (!I.comm->recv(in[j].raw(), in[j].byteSize(), prev,
                          kEvalTag + (k * I.chunks + c) * 16 +
                              static_cast<int64_t>(j),
                          error))
          return false;
      }
      std::vector<const Tensor *> args;
      for (const Binding &b : f.inputs)
        args.push_back(b.kind == Binding::Param    ? &I.params[b.index]
                       : b.kind == Binding::Tokens ? &tokens
                       : b.kind == Binding::Labels ? &labels
                                                   : &in.at(b.index));
      std::vector<Tensor> out;
      bool ran = I.gatherFor(f, error) && f.runner->run(args, out, error);
      I.dropFor(f);
      if (!ran)
        return false;
      if (c + 1 == I.chunks) {
        sum += out[0].data<float>()[0];
        continue;
      }
      for (size_t j = 0; j < out.size(); ++j)
        if (!I.comm->send(out[j].raw(), out[j].byteSize(), next,
                          kEvalTag + (k * I.chunks + c + 1) * 16 +
                              static_cast<int64_t>(j),
                          error))
          return false;
      if (!I.comm->waitSends(error))
        return false;
    }
  }
  // The last stage has the sum; every stage of the replica gets it.
  double mean = I.stage == static_cast<int>((I.chunks - 1) % I.stages)
                    ? sum / static_cast<double>(batches * pieces)
                    : 0.0;
  if (!I.comm->allReduceSum(&mean, 1, program::F64, I.grid, {I.ppAxis}, error))
    return false;
  loss = mean;
  return true;
}

bool PipelineTrainer::Impl::wholeMoment(size_t k, const Tensor &state,
                                        Tensor &out, std::string &error) {
  out = Tensor(program::F32, ownShapes[k]);
  if (!sliced(k)) {
    std::memcpy(out.raw(), state.raw(), out.byteSize());
    return true;
  }
  return comm->allGather(state.raw(), out.raw(), sliceSize[k], program::F32,
                         grid, {dpAxis}, error);
}

TrainOptions &PipelineTrainer::runOptions() { return impl->options; }

const std::vector<std::string> &PipelineTrainer::parameterNames() const {
  return impl->names;
}

const std::vector<int64_t> &PipelineTrainer::parameterShape(size_t i) const {
  return impl->shapes[i];
}

bool PipelineTrainer::wholeParameters(std::vector<Tensor> &out,
                                      std::string &error) const {
  Impl &I = *impl;
  LongPhase longPhase(I.comm);
  if (!I.gatherAll(error) || !I.backend->syncToHost(error))
    return false;
  out.clear();
  for (int i = 0; i < I.plan.params_size(); ++i) {
    const program::Value &pv = I.plan.params(i);
    BlockLayout layout = layoutOf(pv);
    // The first stage holding it gathers its blocks over the tensor axis;
    // the others add zeros to the sum over the stages, which is then the
    // whole tensor on every stage.
    Tensor whole(pv.type().dtype(), layout.shape);
    auto it = I.ownIndex.find(pv.name());
    if (*I.holders[i].begin() == I.stage && it != I.ownIndex.end()) {
      const Tensor &held = I.params[it->second];
      if (layout.isSplit()) {
        if (!gatherBlocks(held, layout, I.grid, I.comm, whole, error))
          return false;
      } else {
        std::memcpy(whole.raw(), held.raw(),
                    static_cast<size_t>(held.byteSize()));
      }
    } else {
      std::memset(whole.raw(), 0, static_cast<size_t>(whole.byteSize()));
    }
    if (!I.comm->allReduceSum(whole.raw(), whole.numElements(), whole.dtype,
                              I.grid, {I.ppAxis}, error))
      return false;
    out.push_back(std::move(whole));
  }
  I.dropAll();
  return true;
}

bool PipelineTrainer::writeParameter(const std::string &name,
                                     const Tensor &whole, std::string &error) {
  Impl &I = *impl;
  auto index = std::find(I.names.begin(), I.names.end(), name);
  if (index == I.names.end()) {
    error = "no parameter is named '" + name + "'";
    return false;
  }
  const program::Value &pv =
      I.plan.params(static_cast<int>(index - I.names.begin()));
  BlockLayout layout = layoutOf(pv);
  if (whole.dtype != pv.type().dtype() || whole.shape != layout.shape) {
    error = "the value for parameter '" + name +
            "' has another dtype or shape than the parameter";
    return false;
  }
  if (!I.backend->syncToHost(error))
    return false;
  auto it = I.ownIndex.find(name);
  if (it != I.ownIndex.end()) {
    size_t k = static_cast<size_t>(it->second);
    Tensor &held = I.params[k];
    if (layout.isSplit())
      held = sliceBlock(whole, layout, I.grid, I.comm->rank());
    else if (held.raw())
      std::memcpy(held.raw(), whole.raw(),
                  static_cast<size_t>(whole.byteSize()));
    else // ZeRO-3: held as its slice
      held = whole;
    I.shardFromHost(k);
  }
  I.keepStateResident();
  return true;
}

const char *gptc::runtime::scheduleName(program::PipelineSchedule schedule) {
  switch (schedule) {
  case program::SCHEDULE_GPIPE:
    return "gpipe";
  case program::SCHEDULE_1F1B:
    return "1f1b";
  case program::SCHEDULE_INTERLEAVED:
    return "interleaved";
  case program::SCHEDULE_ZB_H1:
    return "zb-h1";
  default:
    return "unspecified";
  }
}
