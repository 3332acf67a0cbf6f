//===- Optimizer.cpp - Build the training step ----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// @train_step = @forward_backward + clipping + schedule + AdamW, as ops.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCOPTIMIZERPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// The settings of `gptc.optimizer`.
struct Settings {
  double lr, minLr, beta1, beta2, eps, weightDecay, gradClip;
  int64_t warmup, total;
  LrDecay decay;
  bool decayEmbeddings;
  /// Microbatches per step, and the step's batch in sequences (0: the
  /// forward function's batch times the microbatches).
  int64_t accumulation = 1, batchRows = 0;
  /// Dynamic loss scaling (fp16): the first scale and the good steps in a
  /// row that double it; scaling is off when `lossScaling` is false.
  bool lossScaling = false;
  /// nan_policy SKIP: a step whose gradient norm is not finite (on any
  /// rank) leaves the parameters and moments as they were.
  bool skipNonFinite = false;
  double initialLossScale = 65536.0;
  int64_t growthInterval = 2000;
};
} // namespace

/// Reads the module's `#gptc.optimizer` (its own verifier has checked the
/// values).
static FailureOr<Settings> readSettings(ModuleOp module) {
  OptimizerAttr opt = getOptimizerConfig(module);
  if (!opt)
    return module.emitError("gptc-optimizer needs the module attribute "
                            "'gptc.optimizer' (written by the importer)");
  Settings s;
  s.lr = opt.getLr().convertToDouble();
  s.minLr = opt.getMinLr().convertToDouble();
  s.beta1 = opt.getBeta1().convertToDouble();
  s.beta2 = opt.getBeta2().convertToDouble();
  s.eps = opt.getEps().convertToDouble();
  s.weightDecay = opt.getWeightDecay().convertToDouble();
  s.gradClip = opt.getGradClip().convertToDouble();
  s.warmup = opt.getWarmupSteps();
  s.total = opt.getTotalSteps();
  s.decay = opt.getDecay();
  s.decayEmbeddings = opt.getDecayEmbeddings();
  s.accumulation = opt.getAccumulationSteps();
  s.batchRows = opt.getBatchSize();
  s.lossScaling = getPrecision(module) == Precision::FP16;
  NanPolicyAttr policy =
      GptcDialect::NanPolicyAttrHelper(module.getContext()).getAttr(module);
  s.skipNonFinite = policy && policy.getValue() == NanPolicy::Skip;
  s.initialLossScale = opt.getInitialLossScale().convertToDouble();
  s.growthInterval = opt.getLossScaleGrowthInterval();
  return s;
}

/// Builds @train_step next to `fb`.
static LogicalResult buildTrainStep(func::FuncOp fb, const Settings &s,
                                    SymbolTable &symbols, shard::GridOp grid) {
  MLIRContext *ctx = fb.getContext();
  OpBuilder b(ctx);
  Block &source = fb.getBody().front();
  StringRef gridName = grid ? grid.getSymName() : StringRef();

  // 1. Classify the arguments: parameters, data inputs and (fp16) the
  //    loss scale that seeds the backward.
  SmallVector<BlockArgument> params, data;
  BlockArgument seed;
  for (BlockArgument arg : source.getArguments()) {
    auto input =
        fb.getArgAttrOfType<InputAttr>(arg.getArgNumber(), kInputAttrName);
    if (input && input.getKind() == InputKind::LossScale)
      seed = arg;
    else
      (fb.getArgAttr(arg.getArgNumber(), kParamAttrName) ? params : data)
          .push_back(arg);
  }
  if (bool(seed) != s.lossScaling)
    return fb.emitOpError(s.lossScaling
                              ? "must take the loss scale (fp16: run "
                                "gptc-autodiff on the fp16 module)"
                              : "takes a loss scale but the module is not "
                                "fp16");
  auto ret = cast<func::ReturnOp>(source.getTerminator());
  if (ret.getNumOperands() != params.size() + 1)
    return fb.emitOpError("must return the loss and one gradient per "
                          "parameter (run gptc-autodiff)");

  // 2. The signature: params, m, v, step, (fp16) the loss scaler's state,
  //    then the data inputs.
  auto scalarI32 = RankedTensorType::get({}, b.getI32Type());
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Type> argTypes, resultTypes;
  for (int copy = 0; copy < 3; ++copy)
    for (BlockArgument p : params)
      argTypes.push_back(p.getType());
  argTypes.push_back(scalarI32);
  // The scaler's state: scale, good steps, optimizer updates.
  unsigned scaler = s.lossScaling ? 3 : 0;
  if (scaler)
    argTypes.append({scalarF32, scalarI32, scalarI32});
  unsigned firstData = argTypes.size();
  // Data inputs hold the step's microbatches stacked on dimension 0.
  int64_t A = s.accumulation;
  for (BlockArgument d : data) {
    auto type = dyn_cast<RankedTensorType>(d.getType());
    if (!type || type.getRank() < 1)
      return fb.emitOpError("has a data input that is not a batch");
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= A;
    argTypes.push_back(type.clone(shape));
  }
  for (int copy = 0; copy < 3; ++copy)
    for (BlockArgument p : params)
      resultTypes.push_back(p.getType());
  resultTypes.append({ret.getOperand(0).getType(), scalarF32, scalarF32});
  if (scaler)
    resultTypes.append({scalarF32, scalarI32, scalarI32, scalarF32});
  // nan_policy SKIP without a loss scaler: the skip flag after `lr`.
  bool skipFlag = s.skipNonFinite && !scaler;
  if (skipFlag)
    resultTypes.push_back(scalarF32);

  b.setInsertionPoint(fb);
  auto step = func::FuncOp::create(b, fb.getLoc(), "train_step",
                                   b.getFunctionType(argTypes, resultTypes));
  Block *body = step.addEntryBlock();
  symbols.insert(step);

  // 3. Names: parameters keep theirs (and initializers); moments and
  //    outputs say what they hold.
  size_t n = params.size();
  for (auto [i, p] : llvm::enumerate(params)) {
    StringAttr name =
        fb.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttrName);
    if (DictionaryAttr attrs = fb.getArgAttrDict(p.getArgNumber()))
      step.setArgAttrs(i, attrs);
    auto m = StateAttr::get(ctx, StateKind::MomentM, name, -1);
    auto v = StateAttr::get(ctx, StateKind::MomentV, name, -1);
    step.setArgAttr(n + i, kStateAttrName, m);
    step.setArgAttr(2 * n + i, kStateAttrName, v);
    step.setResultAttr(i, kParamAttrName, name);
    step.setResultAttr(n + i, kStateAttrName, m);
    step.setResultAttr(2 * n + i, kStateAttrName, v);
    // A split parameter (tensor parallelism) has moments split alike.
    if (Attribute sharding = fb.getArgAttr(p.getArgNumber(), kShardingAttrName))
      for (unsigned at : {n + i, 2 * n + i}) {
        step.setArgAttr(at, kShardingAttrName, sharding);
        step.setResultAttr(at - n, kShardingAttrName, sharding);
        step.setResultAttr(at, kShardingAttrName, sharding);
      }
  }
  step.setArgAttr(3 * n, kInputAttrName, InputAttr::get(ctx, InputKind::Step));
  auto overflow = OutputAttr::get(ctx, OutputKind::Overflow);
  if (scaler) {
    // The scaler's state starts at the initial scale and zero counts.
    StateKind kinds[] = {StateKind::LossScale, StateKind::LossScaleGoodSteps,
                         StateKind::OptimizerUpdates};
    for (unsigned k = 0; k < 3; ++k) {
      auto state = StateAttr::get(ctx, kinds[k]);
      step.setArgAttr(3 * n + 1 + k, kStateAttrName, state);
      step.setResultAttr(3 * n + 3 + k, kStateAttrName, state);
    }
    step.setArgAttr(3 * n + 1, kInitAttrName,
                    InitAttr::get(ctx, InitKind::Constant, APFloat(0.0),
                                  APFloat(s.initialLossScale), 0));
    step.setResultAttr(3 * n + 6, kOutputAttrName, overflow);
  }
  if (skipFlag)
    step.setResultAttr(3 * n + 3, kOutputAttrName, overflow);
  for (auto [i, d] : llvm::enumerate(data)) {
    if (DictionaryAttr attrs = fb.getArgAttrDict(d.getArgNumber()))
      step.setArgAttrs(firstData + i, attrs);
    int64_t rows =
        cast<RankedTensorType>(argTypes[firstData + i]).getDimSize(0);
    step.setArgAttr(
        firstData + i, kBatchAttrName,
        b.getDictionaryAttr(
            {b.getNamedAttr(
                 "rows", b.getI64IntegerAttr(s.batchRows ? s.batchRows : rows)),
             b.getNamedAttr("microbatches", b.getI64IntegerAttr(A))}));
  }
  step.setResultAttr(3 * n, kOutputAttrName,
                     OutputAttr::get(ctx, OutputKind::Loss));
  step.setResultAttr(3 * n + 1, kOutputAttrName,
                     OutputAttr::get(ctx, OutputKind::GradNorm));
  step.setResultAttr(3 * n + 2, kOutputAttrName,
                     OutputAttr::get(ctx, OutputKind::LearningRate));

  // 4. The forward-backward computation: cloned as it is for one
  //    microbatch, or into a gptc.accumulate that runs it per microbatch
  //    and sums the losses and gradients.
  b.setInsertionPointToEnd(body);
  Location loc = step.getLoc();
  IRMapping map;
  for (auto [i, p] : llvm::enumerate(params))
    map.map(p, body->getArgument(i));
  Value lossScale = scaler ? body->getArgument(3 * n + 1) : Value();
  if (seed)
    map.map(seed, lossScale);
  Value loss;
  SmallVector<Value> grads;
  if (A == 1) {
    for (auto [i, d] : llvm::enumerate(data))
      map.map(d, body->getArgument(firstData + i));
    for (Operation &op : source.without_terminator())
      b.clone(op, map);
    loss = map.lookup(ret.getOperand(0));
    for (Value g : ret.getOperands().drop_front())
      grads.push_back(map.lookup(g));
  } else {
    // The step's real tokens normalize every microbatch's cross-entropy.
    Operation *ce = findLoss(fb.getBody());
    if (!ce)
      return fb.emitOpError("has no gptc.cross_entropy to accumulate over");
    Value labels;
    SmallVector<Value> stacked;
    for (auto [i, d] : llvm::enumerate(data)) {
      stacked.push_back(body->getArgument(firstData + i));
      if (d == lossLabelsInput(ce))
        labels = stacked.back();
    }
    if (!labels)
      return ce->emitOpError("must take its labels from an input of the "
                             "function to accumulate over microbatches");
    Value count = CountTokensOp::create(b, ce->getLoc(), scalarF32, labels,
                                        lossIgnoreIndex(ce));
    SmallVector<Type> sums;
    for (Value v : ret.getOperands())
      sums.push_back(v.getType());
    auto acc =
        AccumulateOp::create(b, loc, sums, stacked, b.getI64IntegerAttr(A));
    Block *micro = new Block();
    acc.getBody().push_back(micro);
    for (BlockArgument d : data)
      map.map(d, micro->addArgument(d.getType(), d.getLoc()));
    OpBuilder inner = OpBuilder::atBlockEnd(micro);
    for (Operation &op : source.without_terminator())
      inner.clone(op, map);
    setLossNormalizers(acc.getBody(), count);
    SmallVector<Value> yielded;
    for (Value v : ret.getOperands())
      yielded.push_back(map.lookup(v));
    YieldOp::create(inner, ret.getLoc(), yielded);
    loss = acc.getResult(0);
    for (Value g : acc.getResults().drop_front())
      grads.push_back(g);
  }

  // 5. Clipping, schedule and one AdamW update per parameter.
  Value stepArg = body->getArgument(3 * n);
  // The norm sums the squares of split gradients over their grid axes.
  SmallVector<std::pair<Value, SmallVector<int16_t>>> normParts;
  for (auto [i, p] : llvm::enumerate(params))
    normParts.push_back(
        {grads[i], BlockSharding::get(fb.getArgAttrOfType<DictionaryAttr>(
                                          p.getArgNumber(), kShardingAttrName),
                                      cast<RankedTensorType>(p.getType()))
                       .splitAxes()});
  Value norm = buildGradNorm(b, loc, gridName, normParts);
  // fp16: the gradients are the loss scale's multiples. Whether they
  // overflowed is one flag, the maximum over every rank of the grid, so
  // that all ranks skip or none does; the clip scale unscales, and the
  // reported norm is the true one.
  // (The clip scale first: gptc-data-parallel rebuilds the norm in front
  // of it, for every use.)
  Value scale = ClipScaleOp::create(b, loc, scalarF32, norm,
                                    b.getF64FloatAttr(s.gradClip), lossScale);
  Value found, reportedNorm = norm, updateStep = stepArg;
  if (scaler || skipFlag) {
    found = FoundInfOp::create(b, loc, scalarF32, norm);
    if (grid && grid.getRank() > 0) {
      SmallVector<int16_t> all;
      for (int64_t a = 0; a < grid.getRank(); ++a)
        all.push_back(static_cast<int16_t>(a));
      found = shard::AllReduceOp::create(b, loc, scalarF32, gridName, all,
                                         found, shard::ReductionKind::Max);
    }
  }
  if (scaler) {
    reportedNorm = DivOp::create(b, loc, scalarF32, norm, lossScale);
    updateStep = body->getArgument(3 * n + 3);
  }
  Value lr = LearningRateOp::create(
      b, loc, scalarF32, stepArg, b.getF64FloatAttr(s.lr),
      b.getF64FloatAttr(s.minLr), b.getI64IntegerAttr(s.warmup),
      b.getI64IntegerAttr(s.total), LrDecayAttr::get(ctx, s.decay));
  SmallVector<Value> newParams, newM, newV;
  for (auto [i, p] : llvm::enumerate(params)) {
    auto type = cast<RankedTensorType>(p.getType());
    bool embedding =
        fb.getArgAttr(p.getArgNumber(), kEmbeddingTableAttrName) != nullptr;
    bool decays = type.getRank() >= 2 && (!embedding || s.decayEmbeddings);
    auto update =
        AdamWOp::create(b, p.getLoc(), body->getArgument(i), grads[i],
                        body->getArgument(n + i), body->getArgument(2 * n + i),
                        lr, updateStep, scale, b.getF64FloatAttr(s.beta1),
                        b.getF64FloatAttr(s.beta2), b.getF64FloatAttr(s.eps),
                        b.getF64FloatAttr(decays ? s.weightDecay : 0.0), found);
    newParams.push_back(update.getNewParam());
    newM.push_back(update.getNewM());
    newV.push_back(update.getNewV());
  }
  SmallVector<Value> results;
  results.append(newParams);
  results.append(newM);
  results.append(newV);
  results.append({loss, reportedNorm, lr});
  if (scaler) {
    auto next = LossScaleUpdateOp::create(
        b, loc, TypeRange{scalarF32, scalarI32, scalarI32}, lossScale,
        body->getArgument(3 * n + 2), body->getArgument(3 * n + 3), found,
        b.getF64FloatAttr(2.0), b.getF64FloatAttr(0.5),
        b.getI64IntegerAttr(s.growthInterval));
    results.append(next.getResults().begin(), next.getResults().end());
    results.push_back(found);
  }
  if (skipFlag)
    results.push_back(found);
  func::ReturnOp::create(b, ret.getLoc(), results);
  return success();
}

namespace {
struct GptcOptimizerPass final
    : mlir::gptc::impl::GptcOptimizerPassBase<GptcOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto fb = symbols.lookup<func::FuncOp>("forward_backward");
    if (!fb) {
      module.emitError("gptc-optimizer needs @forward_backward (run "
                       "gptc-autodiff first)");
      return signalPassFailure();
    }
    if (symbols.lookup("train_step")) {
      module.emitError("the module already has a symbol 'train_step'");
      return signalPassFailure();
    }
    FailureOr<Settings> settings = readSettings(module);
    shard::GridOp grid;
    module.walk([&](shard::GridOp g) {
      if (!grid)
        grid = g;
    });
    if (failed(settings) ||
        failed(buildTrainStep(fb, *settings, symbols, grid)))
      return signalPassFailure();
  }
};
} // namespace
