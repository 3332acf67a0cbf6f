//===- PipelineStages.cpp - Pipeline stages' programs -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-pipeline-schedule writes each stage's program as a function of
// calls to the chunks and shard.send/shard.recv between them;
// gptc-pipeline-verify (and the artifact writer, through
// readPipelinePrograms) read those functions back as programs and simulate
// them. The functions are the source of the runtime's pipeline plan.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <set>

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCPIPELINESCHEDULEPASS
#define GEN_PASS_DEF_GPTCPIPELINEVERIFYPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// The mesh's axes that matter to a pipeline.
struct PipelineGrid {
  shard::GridOp grid;
  int64_t pipelineAxis = -1, dataAxis = -1;
  int64_t stages = 1, replicas = 1, zeroStage = 0;
};
} // namespace

static FailureOr<PipelineGrid> findPipelineGrid(ModuleOp module) {
  PipelineGrid g;
  module.walk([&](shard::GridOp op) {
    if (op.getSymName() == "mesh")
      g.grid = op;
  });
  ParallelAttr parallel = getParallelConfig(module);
  if (!g.grid || !parallel)
    return module.emitError("a pipeline needs the mesh (shard.grid @mesh and "
                            "gptc.parallel)");
  for (auto [i, kind] : llvm::enumerate(parallel.getKinds())) {
    if (kind == MeshAxisKind::Pipeline)
      g.pipelineAxis = static_cast<int64_t>(i);
    else if (kind == MeshAxisKind::Data)
      g.dataAxis = static_cast<int64_t>(i);
  }
  if (g.pipelineAxis < 0)
    return module.emitError("the mesh has no pipeline axis");
  ArrayRef<int64_t> shape = g.grid.getShape();
  g.stages = shape[g.pipelineAxis];
  if (g.dataAxis >= 0)
    g.replicas = shape[g.dataAxis];
  g.zeroStage = parallel.getZeroStage();
  return g;
}

/// "chunk3" -> 3 (a Forward), "chunk3_backward" -> 3 (Backward),
/// "chunk3_backward_input" and "chunk3_backward_weight" -> 3 (the split
/// backward's halves); -1 otherwise.
static int64_t chunkOfCallee(StringRef name, PipelineOp::Kind &kind) {
  kind = name.consume_back("_backward")          ? PipelineOp::Backward
         : name.consume_back("_backward_input")  ? PipelineOp::BackwardInput
         : name.consume_back("_backward_weight") ? PipelineOp::BackwardWeight
                                                 : PipelineOp::Forward;
  int64_t c;
  if (!name.consume_front("chunk") || name.getAsInteger(10, c) || c < 0)
    return -1;
  return c;
}

static std::optional<int64_t> intAttr(Operation *op, StringRef name) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Reading the stage functions
//===----------------------------------------------------------------------===//

FailureOr<std::vector<std::vector<PipelineOp>>>
mlir::gptc::readPipelinePrograms(ModuleOp module,
                                 std::vector<std::vector<Operation *>> *where) {
  FailureOr<PipelineGrid> grid = findPipelineGrid(module);
  if (failed(grid))
    return failure();
  int64_t p = grid->stages;
  std::vector<std::vector<PipelineOp>> programs(p);
  if (where)
    where->assign(p, {});
  int64_t chunks = 0;
  auto hasBackward = [&](int64_t c) {
    std::string name = "chunk" + std::to_string(c);
    return module.lookupSymbol<func::FuncOp>(name + "_backward") ||
           module.lookupSymbol<func::FuncOp>(name + "_backward_input");
  };
  while (hasBackward(chunks))
    ++chunks;
  for (int64_t s = 0; s < p; ++s) {
    auto func = module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s));
    if (!func || func.isExternal())
      return module.emitError("the pipeline has ")
             << p << " stages but no @stage" << s << " program";
    auto add = [&](Operation *op, PipelineOp o) {
      programs[s].push_back(o);
      if (where)
        (*where)[s].push_back(op);
    };
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        PipelineOp::Kind kind;
        int64_t c = chunkOfCallee(call.getCallee(), kind);
        std::optional<int64_t> i = intAttr(op, kMicrobatchAttrName);
        if (c < 0 || c >= chunks || !i)
          return op->emitOpError("in a pipeline stage must call a chunk "
                                 "(@chunk<c>, @chunk<c>_backward or its "
                                 "_input and _weight halves) with "
                                 "gptc.microbatch"),
                 WalkResult::interrupt();
        PipelineOp o{kind, *i, c};
        // The last chunk's backward (its input half) computes its forward
        // too: the program has the forward right before it (it costs, and
        // holds the microbatch, like any other).
        if ((kind == PipelineOp::Backward ||
             kind == PipelineOp::BackwardInput) &&
            c + 1 == chunks)
          add(nullptr, {PipelineOp::Forward, *i, c});
        add(op, o);
        return WalkResult::advance();
      }
      bool send = isa<shard::SendOp>(op), recv = isa<shard::RecvOp>(op);
      if (!send && !recv)
        return WalkResult::advance();
      std::optional<int64_t> i = intAttr(op, kMicrobatchAttrName);
      std::optional<int64_t> c = intAttr(op, kChunkAttrName);
      if (!i || !c)
        return op->emitOpError("in a pipeline stage needs gptc.microbatch "
                               "and gptc.chunk"),
               WalkResult::interrupt();
      ArrayRef<int16_t> axes = send ? cast<shard::SendOp>(op).getGridAxes()
                                    : cast<shard::RecvOp>(op).getGridAxes();
      std::optional<ArrayRef<int64_t>> peer =
          send ? std::optional(cast<shard::SendOp>(op).getDestination())
               : cast<shard::RecvOp>(op).getSource();
      if (axes.size() != 1 || axes[0] != grid->pipelineAxis || !peer ||
          peer->size() != 1 || (*peer)[0] < 0 || (*peer)[0] >= p)
        return op->emitOpError("in a pipeline stage must name one stage on "
                               "the pipeline axis (")
                   << grid->pipelineAxis << ")",
               WalkResult::interrupt();
      PipelineOp o{send ? PipelineOp::Send : PipelineOp::Recv, *i, *c,
                   (*peer)[0], op->hasAttr(kGradientAttrName)};
      // A message of several tensors is one step.
      if (!programs[s].empty()) {
        const PipelineOp &last = programs[s].back();
        if (last.kind == o.kind && last.microbatch == o.microbatch &&
            last.chunk == o.chunk && last.peer == o.peer &&
            last.gradient == o.gradient)
          return WalkResult::advance();
      }
      add(op, o);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  // Every chunk on its stage.
  for (int64_t s = 0; s < p; ++s)
    for (auto [k, o] : llvm::enumerate(programs[s]))
      if (o.computes() && o.chunk % p != s) {
        Operation *op = where ? (*where)[s][k] : nullptr;
        InFlightDiagnostic d = op ? op->emitOpError() : module.emitError();
        d << "runs chunk " << o.chunk << " on stage " << s
          << ", but chunk c belongs to stage c mod " << p;
        return failure();
      }
  return programs;
}

LogicalResult mlir::gptc::verifyPipelinePrograms(ModuleOp module) {
  std::vector<std::vector<Operation *>> where;
  FailureOr<std::vector<std::vector<PipelineOp>>> programs =
      readPipelinePrograms(module, &where);
  if (failed(programs))
    return failure();
  int64_t chunks = 0;
  for (const auto &program : *programs)
    for (const PipelineOp &o : program)
      chunks = std::max(chunks, o.chunk + 1);
  int64_t p = static_cast<int64_t>(programs->size());
  int64_t v = std::max<int64_t>(1, chunks / p);
  std::string error;
  PipelineStall stall;
  if (simulatePipeline(*programs, std::vector<double>(chunks, 1.0), v, error,
                       &stall))
    return success();
  Operation *at = stall.stage >= 0 ? where[stall.stage][stall.index] : nullptr;
  if (at)
    return at->emitError(error);
  return module.emitError(error);
}

//===----------------------------------------------------------------------===//
// gptc-pipeline-schedule
//===----------------------------------------------------------------------===//

namespace {
struct GptcPipelineSchedulePass
    : mlir::gptc::impl::GptcPipelineSchedulePassBase<GptcPipelineSchedulePass> {
  using Base::Base;
  void runOnOperation() override;
};

struct GptcPipelineVerifyPass
    : mlir::gptc::impl::GptcPipelineVerifyPassBase<GptcPipelineVerifyPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(verifyPipelinePrograms(getOperation())))
      signalPassFailure();
  }
};
} // namespace

namespace {
/// What a chunk function's argument is: a parameter (by name), a data
/// input (by its role), or a boundary value from the previous chunk (`In`)
/// or the next one's gradient (`Cot`), by index.
struct ChunkArg {
  enum Kind { None, Param, Data, In, Cot, Saved } kind = None;
  StringRef param;
  InputAttr data;
  int64_t index = -1;
};
} // namespace

static ChunkArg roleOf(func::FuncOp f, unsigned i) {
  ChunkArg arg;
  if (auto in = f.getArgAttrOfType<IntegerAttr>(i, kPipelineInAttrName)) {
    arg.kind = ChunkArg::In;
    arg.index = in.getInt();
  } else if (auto p = f.getArgAttrOfType<StringAttr>(i, kParamAttrName)) {
    arg.kind = ChunkArg::Param;
    arg.param = p.getValue();
  } else if (auto d = f.getArgAttrOfType<InputAttr>(i, kInputAttrName)) {
    arg.kind = d.getKind() == InputKind::Cotangent ? ChunkArg::Cot
               : d.getKind() == InputKind::Saved   ? ChunkArg::Saved
                                                   : ChunkArg::Data;
    arg.data = d;
    arg.index = d.getIndex();
  }
  return arg;
}

void GptcPipelineSchedulePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  FailureOr<PipelineGrid> grid = findPipelineGrid(module);
  if (failed(grid))
    return signalPassFailure();
  int64_t p = grid->stages;
  std::optional<PipelineScheduleKind> kind = schedule;
  // Each chunk's forward and backward; a zero-bubble schedule's backward
  // in its two halves (gptc-split-backward).
  bool split = splitsBackward(*kind);
  std::vector<func::FuncOp> forward, backward, inputHalf, weightHalf;
  for (int64_t c = 0;; ++c) {
    std::string name = "chunk" + std::to_string(c);
    auto f = module.lookupSymbol<func::FuncOp>(name);
    auto b = module.lookupSymbol<func::FuncOp>(name + "_backward");
    auto bi = module.lookupSymbol<func::FuncOp>(name + "_backward_input");
    auto bw = module.lookupSymbol<func::FuncOp>(name + "_backward_weight");
    if (!f || (split ? !bi || !bw : !b))
      break;
    forward.push_back(f);
    backward.push_back(b);
    inputHalf.push_back(bi);
    weightHalf.push_back(bw);
  }
  int64_t n = static_cast<int64_t>(forward.size());
  if (n == 0 || n % p != 0) {
    module.emitError("gptc-pipeline-schedule needs @chunk<c> and ")
        << (split ? "@chunk<c>_backward_input and _weight "
                    "(gptc-split-backward)"
                  : "@chunk<c>_backward")
        << " for a multiple of the " << p << " stages; found " << n;
    return signalPassFailure();
  }
  // The functions a chunk's backward runs.
  auto backwardsOf = [&](int64_t c) {
    return split ? SmallVector<func::FuncOp>{inputHalf[c], weightHalf[c]}
                 : SmallVector<func::FuncOp>{backward[c]};
  };
  PipelinePartition partition;
  partition.stages = p;
  partition.virtualStages = n / p;
  partition.chunks.assign(n, {0, 0});
  std::string error;
  auto programs = buildPipelinePrograms(partition, microbatches, *kind, error);
  if (!programs) {
    module.emitError(error);
    return signalPassFailure();
  }

  // Which stages hold each parameter (a tied one: several).
  std::map<std::string, std::set<int64_t>> holders;
  std::map<std::string, RankedTensorType> paramType;
  // (The forward too: a split backward's halves may not take every
  // parameter it does, as the runtime reads the holders.)
  for (int64_t c = 0; c < n; ++c)
    for (func::FuncOp bf : llvm::concat<func::FuncOp>(
             SmallVector<func::FuncOp>{forward[c]}, backwardsOf(c)))
      for (unsigned i = 0; i < bf.getNumArguments(); ++i)
        if (ChunkArg arg = roleOf(bf, i); arg.kind == ChunkArg::Param) {
          holders[arg.param.str()].insert(c % p);
          paramType[arg.param.str()] =
              cast<RankedTensorType>(bf.getArgument(i).getType());
        }

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  FlatSymbolRefAttr gridRef =
      FlatSymbolRefAttr::get(grid->grid.getSymNameAttr());
  int16_t ppAxis = static_cast<int16_t>(grid->pipelineAxis);
  for (int64_t s = 0; s < p; ++s) {
    // The arguments: the stage's parameters (first use), then each data
    // input of each microbatch.
    llvm::MapVector<StringRef, std::pair<Type, DictionaryAttr>> params;
    llvm::SetVector<InputAttr> dataNames;
    llvm::DenseMap<InputAttr, Type> dataType;
    for (int64_t c = s; c < n; c += p)
      for (func::FuncOp f : llvm::concat<func::FuncOp>(
               SmallVector<func::FuncOp>{forward[c]}, backwardsOf(c)))
        for (unsigned i = 0; i < f.getNumArguments(); ++i) {
          ChunkArg arg = roleOf(f, i);
          if (arg.kind == ChunkArg::Param && !params.count(arg.param))
            params[arg.param] = {f.getArgument(i).getType(),
                                 f.getArgAttrDict(i)};
          if (arg.kind == ChunkArg::Data) {
            dataNames.insert(arg.data);
            dataType[arg.data] = f.getArgument(i).getType();
          }
        }
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (auto &[name, typeAndAttrs] : params) {
      argTypes.push_back(typeAndAttrs.first);
      argAttrs.push_back(typeAndAttrs.second);
    }
    for (int64_t i = 0; i < microbatches; ++i)
      for (InputAttr name : dataNames) {
        argTypes.push_back(dataType[name]);
        argAttrs.push_back(b.getDictionaryAttr(
            {b.getNamedAttr(kInputAttrName, name),
             b.getNamedAttr(kMicrobatchAttrName, b.getI64IntegerAttr(i))}));
      }
    auto func = func::FuncOp::create(b, loc, "stage" + std::to_string(s),
                                     b.getFunctionType(argTypes, {}));
    func.setPrivate();
    func->setAttr(kPipelineStageAttrName, b.getI64IntegerAttr(s));
    func.setAllArgAttrs(argAttrs);
    Block *body = func.addEntryBlock();
    OpBuilder ib = OpBuilder::atBlockEnd(body);
    std::map<StringRef, Value> paramValue;
    for (auto [k, entry] : llvm::enumerate(params))
      paramValue[entry.first] = body->getArgument(k);
    // ZeRO-3: the stage holds each parameter's slice over the replicas
    // (dimension 0, where it divides; an all_slice, which sends nothing)
    // and all-gathers it whole for every call of a chunk that takes it
    // (the runtime packs a call's gathers into one).
    auto sliced = [&](Type type) {
      auto t = dyn_cast<RankedTensorType>(type);
      return grid->zeroStage >= 3 && grid->replicas > 1 && t &&
             t.getRank() > 0 && t.getDimSize(0) % grid->replicas == 0;
    };
    shard::GridAxis dataAxis[] = {
        static_cast<shard::GridAxis>(std::max<int64_t>(grid->dataAxis, 0))};
    auto dataAxes = [&] { return ArrayRef<shard::GridAxis>(dataAxis); };
    std::map<StringRef, Value> paramSlice;
    for (auto &[name, value] : paramValue)
      if (sliced(value.getType())) {
        auto t = cast<RankedTensorType>(value.getType());
        SmallVector<int64_t> shape(t.getShape());
        shape[0] /= grid->replicas;
        paramSlice[name] =
            shard::AllSliceOp::create(ib, NameLoc::get(ib.getStringAttr(name)),
                                      t.clone(shape), gridRef.getValue(),
                                      dataAxes(), value, APInt(64, 0))
                .getResult();
      }
    auto dataValue = [&](int64_t i, InputAttr name) {
      auto k = static_cast<unsigned>(llvm::find(dataNames, name) -
                                     dataNames.begin());
      return body->getArgument(params.size() + i * dataNames.size() + k);
    };

    using Key = std::pair<int64_t, int64_t>; // microbatch, chunk
    // saved: a split backward's values from its input half to its weight
    // half.
    std::map<Key, SmallVector<Value>> acts, cots, outbox, saved;
    llvm::MapVector<StringRef, Value> grads;
    Value loss;
    auto tag = [&](Operation *op, int64_t i, std::optional<int64_t> c,
                   bool gradient) {
      op->setAttr(kMicrobatchAttrName, ib.getI64IntegerAttr(i));
      if (c)
        op->setAttr(kChunkAttrName, ib.getI64IntegerAttr(*c));
      if (gradient)
        op->setAttr(kGradientAttrName, ib.getUnitAttr());
    };
    // A chunk function's operands for microbatch i.
    auto operandsOf = [&](func::FuncOp f, int64_t i, int64_t c,
                          SmallVectorImpl<Value> &out) -> LogicalResult {
      for (unsigned a = 0; a < f.getNumArguments(); ++a) {
        ChunkArg arg = roleOf(f, a);
        if (arg.kind == ChunkArg::Param) {
          auto slice = paramSlice.find(arg.param);
          if (slice == paramSlice.end()) {
            out.push_back(paramValue.at(arg.param));
            continue;
          }
          auto gather = shard::AllGatherOp::create(
              ib, NameLoc::get(ib.getStringAttr(arg.param)),
              f.getArgument(a).getType(), gridRef.getValue(), dataAxes(),
              slice->second, APInt(64, 0));
          tag(gather, i, c, false);
          out.push_back(gather.getResult());
        } else if (arg.kind == ChunkArg::Data) {
          out.push_back(dataValue(i, arg.data));
        } else if (arg.kind == ChunkArg::In || arg.kind == ChunkArg::Cot ||
                   arg.kind == ChunkArg::Saved) {
          auto &from = arg.kind == ChunkArg::In    ? acts
                       : arg.kind == ChunkArg::Cot ? cots
                                                   : saved;
          StringRef role = arg.kind == ChunkArg::In    ? "in"
                           : arg.kind == ChunkArg::Cot ? "cot"
                                                       : "saved values";
          int64_t k = arg.index;
          auto it = from.find({i, c});
          if (it == from.end() || k < 0 ||
              k >= static_cast<int64_t>(it->second.size()))
            return f.emitOpError("is called by stage ")
                   << s << " before it has received its " << role
                   << " for microbatch " << i;
          out.push_back(it->second[k]);
        } else {
          return f.emitOpError("argument ")
                 << a << " is neither a parameter, data nor a boundary value";
        }
      }
      return success();
    };
    for (const PipelineOp &op : (*programs)[s]) {
      int64_t i = op.microbatch, c = op.chunk;
      switch (op.kind) {
      case PipelineOp::Recv: {
        // Activations: the receiving chunk's boundary inputs; gradients:
        // the cotangents of its outputs.
        SmallVector<Type> types;
        if (op.gradient) {
          for (Type t : forward[c].getResultTypes())
            types.push_back(t);
        } else {
          for (unsigned a = 0; a < forward[c].getNumArguments(); ++a)
            if (forward[c].getArgAttr(a, kPipelineInAttrName))
              types.push_back(forward[c].getArgument(a).getType());
        }
        auto &into = (op.gradient ? cots : acts)[{i, c}];
        for (Type t : types) {
          auto rt = cast<RankedTensorType>(t);
          Value empty = tensor::EmptyOp::create(ib, loc, rt.getShape(),
                                                rt.getElementType());
          auto recv = shard::RecvOp::create(
              ib, loc, rt, gridRef, ib.getDenseI16ArrayAttr({ppAxis}), empty,
              ib.getDenseI64ArrayAttr({op.peer}), ValueRange());
          tag(recv, i, c, op.gradient);
          into.push_back(recv.getResult());
        }
        break;
      }
      case PipelineOp::Send: {
        auto it = outbox.find({i, c});
        if (it == outbox.end()) {
          module.emitError("stage ") << s << " sends a message of microbatch "
                                     << i << " it has not computed";
          return signalPassFailure();
        }
        for (Value v : it->second) {
          auto send = shard::SendOp::create(
              ib, loc, v.getType(), gridRef, ib.getDenseI16ArrayAttr({ppAxis}),
              v, ib.getDenseI64ArrayAttr({op.peer}), ValueRange());
          tag(send, i, c, op.gradient);
        }
        outbox.erase(it);
        break;
      }
      case PipelineOp::Forward: {
        if (c + 1 == n)
          break; // the last chunk's backward computes its forward
        SmallVector<Value> operands;
        if (failed(operandsOf(forward[c], i, c, operands)))
          return signalPassFailure();
        auto call = func::CallOp::create(ib, loc, forward[c], operands);
        tag(call, i, std::nullopt, false);
        outbox[{i, c + 1}] = SmallVector<Value>(call.getResults());
        break;
      }
      case PipelineOp::Backward:
      case PipelineOp::BackwardInput:
      case PipelineOp::BackwardWeight: {
        func::FuncOp bf = op.kind == PipelineOp::Backward ? backward[c]
                          : op.kind == PipelineOp::BackwardInput
                              ? inputHalf[c]
                              : weightHalf[c];
        if (!bf) {
          module.emitError("the ")
              << pipelineScheduleName(*kind) << " schedule runs @"
              << forward[c].getSymName()
              << (op.kind == PipelineOp::Backward ? "_backward"
                                                  : " in two halves")
              << ", which the module does not have";
          return signalPassFailure();
        }
        SmallVector<Value> operands;
        if (failed(operandsOf(bf, i, c, operands)))
          return signalPassFailure();
        auto call = func::CallOp::create(ib, loc, bf, operands);
        tag(call, i, std::nullopt, false);
        SmallVector<Value> inGrads;
        // The received values are differentiated as parameters are; their
        // gradients go back to the previous chunk.
        llvm::StringSet<> received;
        for (unsigned a = 0; a < bf.getNumArguments(); ++a)
          if (ChunkArg arg = roleOf(bf, a); arg.kind == ChunkArg::In)
            if (auto p = bf.getArgAttrOfType<StringAttr>(a, kParamAttrName))
              received.insert(p.getValue());
        for (unsigned r = 0; r < bf.getNumResults(); ++r) {
          Value result = call.getResult(r);
          if (auto out =
                  bf.getResultAttrOfType<OutputAttr>(r, kOutputAttrName)) {
            if (out.getKind() == OutputKind::Loss && c + 1 == n)
              loss = loss ? AddOp::create(ib, loc, loss, result).getResult()
                          : result;
            if (out.getKind() == OutputKind::Saved)
              saved[{i, c}].push_back(result);
            continue;
          }
          auto g = bf.getResultAttrOfType<StringAttr>(r, kGradAttrName);
          if (!g)
            continue;
          StringRef name = g.getValue();
          if (received.contains(name)) {
            inGrads.push_back(result);
          } else {
            Value &acc = grads[name];
            acc =
                acc ? AddOp::create(ib, loc, acc, result).getResult() : result;
          }
        }
        if (c > 0 && op.kind != PipelineOp::BackwardWeight)
          outbox[{i, c - 1}] = inGrads;
        // The weight half may read the chunk's input and cotangent too.
        if (op.kind != PipelineOp::BackwardInput) {
          acts.erase({i, c});
          cots.erase({i, c});
          saved.erase({i, c});
        }
        break;
      }
      }
    }
    // The step's gradients: a tied parameter's summed over the pipeline
    // axis (every stage joins the collective; those without it add zeros),
    // every one over the replicas.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    auto nameLoc = [&](StringRef name) -> Location {
      return NameLoc::get(ib.getStringAttr(name));
    };
    auto dataReduce = [&](StringRef name, Value g) -> Value {
      if (grid->replicas < 2)
        return g;
      // ZeRO-2: each replica keeps the sum of its slice (dimension 0), as
      // the runtime's ZeRO-1 slices the moments.
      auto t = cast<RankedTensorType>(g.getType());
      if (grid->zeroStage >= 2 && t.getRank() > 0 &&
          t.getDimSize(0) % grid->replicas == 0) {
        SmallVector<int64_t> shape(t.getShape());
        shape[0] /= grid->replicas;
        return shard::ReduceScatterOp::create(
                   ib, nameLoc(name),
                   RankedTensorType::get(shape, t.getElementType()),
                   gridRef.getValue(),
                   {static_cast<shard::GridAxis>(grid->dataAxis)}, g,
                   shard::ReductionKind::Sum, APInt(64, 0))
            .getResult();
      }
      return shard::AllReduceOp::create(
                 ib, nameLoc(name), g, gridRef.getValue(),
                 {static_cast<shard::GridAxis>(grid->dataAxis)},
                 shard::ReductionKind::Sum)
          .getResult();
    };
    for (auto &[name, stages] : holders) {
      if (stages.size() < 2)
        continue;
      Value g;
      if (auto it = grads.find(name); it != grads.end()) {
        g = it->second;
      } else {
        RankedTensorType t = paramType[name];
        g = ConstantOp::create(
            ib, loc, t,
            DenseElementsAttr::get(t, ib.getZeroAttr(t.getElementType())));
      }
      Value sum = shard::AllReduceOp::create(
                      ib, nameLoc(name), g, gridRef.getValue(),
                      {static_cast<shard::GridAxis>(grid->pipelineAxis)},
                      shard::ReductionKind::Sum)
                      .getResult();
      if (auto it = grads.find(name); it != grads.end())
        it->second = sum;
    }
    for (auto &[name, g] : grads) {
      results.push_back(dataReduce(name, g));
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(kGradAttrName, b.getStringAttr(name))));
    }
    if (loss) {
      results.push_back(loss);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          kOutputAttrName, OutputAttr::get(ctx, OutputKind::Loss))));
    }
    func::ReturnOp::create(ib, loc, results);
    SmallVector<Type> resultTypes;
    for (Value r : results)
      resultTypes.push_back(r.getType());
    func.setFunctionType(b.getFunctionType(argTypes, resultTypes));
    func.setAllResultAttrs(resultAttrs);
  }
  if (failed(verifyPipelinePrograms(module)))
    return signalPassFailure();
}
