//===- ExportProgram.cpp - gptc IR to the runtime's artifact ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/ExportProgram.h"

#include "gptc/Analysis/KernelReport.h"
#include "gptc/Analysis/KernelSharing.h"
#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::gptc;
namespace pg = ::gptc::program;

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

static FailureOr<pg::DType> dtypeOf(Type element) {
  if (element.isF32())
    return pg::F32;
  if (element.isF64())
    return pg::F64;
  if (element.isBF16())
    return pg::BF16;
  if (element.isF16())
    return pg::F16;
  if (element.isSignlessInteger(32))
    return pg::I32;
  if (element.isSignlessInteger(64))
    return pg::I64;
  return failure();
}

/// "file:line:col (h.0.attn)" for a NameLoc around a FileLineColLoc; the
/// parts of a fused location (a kernel's ops) joined by " + ".
static std::string describe(Location loc) { return describeLocation(loc); }

/// Appends the elements of a dense constant, little-endian, to `data`.
static LogicalResult appendElements(DenseElementsAttr attr, std::string &data) {
  Type element = attr.getElementType();
  auto put = [&](const auto &value) {
    data.append(reinterpret_cast<const char *>(&value), sizeof(value));
  };
  if (element.isF32()) {
    for (float v : attr.getValues<float>())
      put(v);
  } else if (element.isF64()) {
    for (double v : attr.getValues<double>())
      put(v);
  } else if (element.isSignlessInteger(32)) {
    for (int32_t v : attr.getValues<int32_t>())
      put(v);
  } else if (element.isSignlessInteger(64)) {
    for (int64_t v : attr.getValues<int64_t>())
      put(v);
  } else {
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// One function
//===----------------------------------------------------------------------===//

namespace {
class FunctionExporter {
public:
  FunctionExporter(pg::Function &out, SymbolTableCollection &symbols,
                   const llvm::StringMap<std::string> &kernelFunctions)
      : out(out), symbols(symbols), kernelFunctions(kernelFunctions) {}

  LogicalResult run(func::FuncOp func);
  /// Exports the single block of a gptc.accumulate region as a function
  /// whose inputs are its block arguments, then `captures`.
  LogicalResult runRegion(AccumulateOp op, ArrayRef<Value> captures);

private:
  /// Records the grid the function's collectives use (one per function).
  LogicalResult setGrid(shard::GridOp grid, Operation *user) {
    if (gridOp && gridOp != grid)
      return user->emitOpError("uses a second grid; a function's "
                               "collectives run on one grid");
    if (!gridOp) {
      gridOp = grid;
      // A gptc.accumulate body exported first may have recorded the grid
      // already (its collectives come first); it is the same grid.
      bool recorded = out.grid_shape_size() > 0;
      if (recorded && static_cast<int64_t>(out.grid_shape_size()) !=
                          static_cast<int64_t>(grid.getShape().size()))
        return user->emitOpError("uses a second grid; a function's "
                                 "collectives run on one grid");
      for (auto [i, d] : llvm::enumerate(grid.getShape())) {
        if (d <= 0)
          return grid.emitOpError("needs a static shape to be exported");
        if (!recorded)
          out.add_grid_shape(d);
        else if (out.grid_shape(i) != d)
          return user->emitOpError("uses a second grid; a function's "
                                   "collectives run on one grid");
      }
    }
    return success();
  }

  /// Declares `value` with an optional name; returns its id.
  FailureOr<int32_t> declare(Value value, StringRef name, Operation *where);
  LogicalResult lower(Operation *op);
  // The families of ops `lower` turns into kernels: each sets the kernel's
  // op and attributes, or gives nullopt for an op not of its family.
  std::optional<LogicalResult> lowerForward(Operation *op, pg::Kernel &kernel);
  std::optional<LogicalResult> lowerGradient(Operation *op, pg::Kernel &kernel);
  std::optional<LogicalResult> lowerOptimizer(Operation *op,
                                              pg::Kernel &kernel);
  std::optional<LogicalResult> lowerParallel(Operation *op, pg::Kernel &kernel);
  std::optional<LogicalResult> lowerRegion(Operation *op, pg::Kernel &kernel,
                                           llvm::SetVector<Value> &captures);

  pg::Function &out;
  SymbolTableCollection &symbols;
  /// The function each kernel runs (kernels with one body share one).
  const llvm::StringMap<std::string> &kernelFunctions;
  /// Records the grid `grid` names (checking it exists).
  LogicalResult useGrid(Operation *op, FlatSymbolRefAttr grid) {
    FailureOr<shard::GridOp> g = shard::getGridOrNull(op, grid, symbols);
    if (failed(g) || !*g)
      return op->emitOpError("refers to an unknown grid");
    return setGrid(*g, op);
  }

  shard::GridOp gridOp;
  DenseMap<Value, int32_t> ids;
};
} // namespace

FailureOr<int32_t> FunctionExporter::declare(Value value, StringRef name,
                                             Operation *where) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  FailureOr<pg::DType> dtype =
      type ? dtypeOf(type.getElementType()) : FailureOr<pg::DType>(failure());
  if (failed(dtype) || !type.hasStaticShape())
    return where->emitOpError("has a value of type ")
           << value.getType() << " that the runtime cannot hold";
  int32_t id = out.values_size();
  pg::Value *v = out.add_values();
  v->set_id(id);
  v->set_name(name.str());
  v->set_offset(-1);
  v->mutable_type()->set_dtype(*dtype);
  for (int64_t d : type.getShape())
    v->mutable_type()->add_shape(d);
  ids[value] = id;
  return id;
}

namespace {
/// What a function's argument or result holds for the runtime.
struct ValueRole {
  pg::Role role = pg::ROLE_NONE;
  int64_t index = 0;
};
} // namespace

/// The role of an argument or result, from its attributes. `boundary` maps
/// the names of a pipeline chunk's received values (arguments with
/// gptc.pipeline_in, differentiated like parameters) to their index, so
/// their gradients are told from the parameters'.
static ValueRole roleOf(DictionaryAttr attrs,
                        const llvm::StringMap<int64_t> &boundary) {
  if (!attrs)
    return {};
  if (auto in = attrs.getAs<IntegerAttr>(kPipelineInAttrName))
    return {pg::ROLE_BOUNDARY, in.getInt()};
  if (attrs.get(kParamAttrName))
    return {pg::ROLE_PARAMETER};
  if (auto grad = attrs.getAs<StringAttr>(kGradAttrName)) {
    auto it = boundary.find(grad.getValue());
    if (it != boundary.end())
      return {pg::ROLE_BOUNDARY_GRADIENT, it->second};
    return {pg::ROLE_GRADIENT};
  }
  if (auto state = attrs.getAs<StateAttr>(kStateAttrName)) {
    switch (state.getKind()) {
    case StateKind::MomentM:
      return {pg::ROLE_MOMENT_M};
    case StateKind::MomentV:
      return {pg::ROLE_MOMENT_V};
    case StateKind::LossScale:
      return {pg::ROLE_LOSS_SCALE};
    case StateKind::LossScaleGoodSteps:
      return {pg::ROLE_LOSS_SCALE_GOOD_STEPS};
    case StateKind::OptimizerUpdates:
      return {pg::ROLE_OPTIMIZER_UPDATES};
    }
  }
  if (auto input = attrs.getAs<InputAttr>(kInputAttrName)) {
    switch (input.getKind()) {
    case InputKind::Tokens:
      return {pg::ROLE_TOKENS};
    case InputKind::Labels:
      return {pg::ROLE_LABELS};
    case InputKind::Step:
      return {pg::ROLE_STEP};
    case InputKind::LossScale:
      return {pg::ROLE_LOSS_SCALE};
    case InputKind::Cotangent:
      return {pg::ROLE_COTANGENT, input.getIndex()};
    case InputKind::Saved:
      return {pg::ROLE_SAVED, input.getIndex()};
    case InputKind::Graph:
      return {};
    }
  }
  if (auto output = attrs.getAs<OutputAttr>(kOutputAttrName)) {
    switch (output.getKind()) {
    case OutputKind::Loss:
      return {pg::ROLE_LOSS};
    case OutputKind::GradNorm:
      return {pg::ROLE_GRAD_NORM};
    case OutputKind::LearningRate:
      return {pg::ROLE_LEARNING_RATE};
    case OutputKind::Overflow:
      return {pg::ROLE_OVERFLOW};
    case OutputKind::Boundary:
      return {pg::ROLE_BOUNDARY, output.getIndex()};
    case OutputKind::Saved:
      return {pg::ROLE_SAVED, output.getIndex()};
    case OutputKind::Graph:
      return {};
    }
  }
  return {};
}

static void setRole(pg::Value &value, ValueRole role) {
  value.set_role(role.role);
  if (role.index)
    value.set_index(static_cast<int32_t>(role.index));
}

/// `gptc.sharding = {shape, axes}` and `gptc.batch = {rows, microbatches,
/// axes}` of an argument or result.
static LogicalResult exportLayout(DictionaryAttr attrs, pg::Value &value,
                                  func::FuncOp func) {
  if (!attrs)
    return success();
  if (auto sharding = attrs.getAs<DictionaryAttr>(kShardingAttrName)) {
    auto shape = sharding.getAs<DenseI64ArrayAttr>("shape");
    auto axes = sharding.getAs<ArrayAttr>("axes");
    if (!shape || !axes || axes.size() != shape.asArrayRef().size())
      return func.emitOpError("has a malformed gptc.sharding on '")
             << value.name() << "'";
    pg::Sharding *out = value.mutable_sharding();
    for (int64_t d : shape.asArrayRef())
      out->add_shape(d);
    for (Attribute a : axes) {
      auto list = dyn_cast<DenseI64ArrayAttr>(a);
      if (!list)
        return func.emitOpError("has a malformed gptc.sharding on '")
               << value.name() << "'";
      pg::AxisList *l = out->add_axes();
      for (int64_t x : list.asArrayRef())
        l->add_axes(x);
    }
  }
  if (auto batch = attrs.getAs<DictionaryAttr>(kBatchAttrName)) {
    auto rows = batch.getAs<IntegerAttr>("rows");
    auto micro = batch.getAs<IntegerAttr>("microbatches");
    if (!rows || !micro)
      return func.emitOpError("has a malformed gptc.batch on '")
             << value.name() << "'";
    pg::BatchLayout *out = value.mutable_batch();
    out->set_rows(rows.getInt());
    out->set_microbatches(micro.getInt());
    if (auto axes = batch.getAs<DenseI64ArrayAttr>("axes"))
      for (int64_t a : axes.asArrayRef())
        out->add_axes(a);
  }
  return success();
}

LogicalResult FunctionExporter::run(func::FuncOp func) {
  out.set_name(func.getSymName().str());
  if (!llvm::hasSingleElement(func.getBody()))
    return func.emitOpError("must have a single block to be exported");
  Block &body = func.getBody().front();

  // 1. Inputs, named after their parameter or input role.
  llvm::StringMap<int64_t> boundary;
  for (BlockArgument arg : body.getArguments())
    if (auto in = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     kPipelineInAttrName))
      if (auto p = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     kParamAttrName))
        boundary[p.getValue()] = in.getInt();
  for (BlockArgument arg : body.getArguments()) {
    std::string name;
    if (auto p = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   kParamAttrName))
      name = p.getValue().str();
    else if (auto in = func.getArgAttrOfType<InputAttr>(arg.getArgNumber(),
                                                        kInputAttrName))
      name = in.str();
    else if (auto state = func.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                           kStateAttrName))
      name = state.str();
    FailureOr<int32_t> id = declare(arg, name, func);
    if (failed(id))
      return failure();
    out.add_inputs(*id);
    setRole(*out.mutable_values(*id),
            roleOf(func.getArgAttrDict(arg.getArgNumber()), boundary));
    // 1b. Slices and batch layouts.
    if (failed(exportLayout(func.getArgAttrDict(arg.getArgNumber()),
                            *out.mutable_values(*id), func)))
      return failure();
    // 1c. How the runtime initializes a parameter.
    if (auto init = func.getArgAttrOfType<InitAttr>(arg.getArgNumber(),
                                                    kInitAttrName)) {
      pg::ParamInit *pi = out.mutable_values(*id)->mutable_init();
      switch (init.getKind()) {
      case InitKind::Zeros:
        pi->set_kind(pg::ParamInit::ZEROS);
        break;
      case InitKind::Ones:
        pi->set_kind(pg::ParamInit::ONES);
        break;
      case InitKind::Normal:
        pi->set_kind(pg::ParamInit::NORMAL);
        pi->set_std(init.getStd().convertToDouble());
        break;
      case InitKind::Constant:
        pi->set_kind(pg::ParamInit::CONSTANT);
        pi->set_value(init.getValue().convertToDouble());
        break;
      }
      if (init.getRows())
        pi->set_rows(init.getRows());
    }
  }

  // 2. One kernel per op.
  for (Operation &op : body.without_terminator())
    if (failed(lower(&op)))
      return failure();

  if (auto arena = func->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
    out.set_arena_bytes(arena.getInt());

  // 3. Outputs, named after their role when they have one.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
    int32_t id = ids.lookup(operand);
    out.add_outputs(id);
    pg::Value *v = out.mutable_values(id);
    if (ValueRole role = roleOf(func.getResultAttrDict(i), boundary); role.role)
      setRole(*v, role);
    if (failed(exportLayout(func.getResultAttrDict(i), *v, func)))
      return failure();
    if (v->name().empty()) {
      if (auto g = func.getResultAttrOfType<StringAttr>(i, kGradAttrName))
        v->set_name(("grad:" + g.getValue()).str());
      else if (auto o =
                   func.getResultAttrOfType<OutputAttr>(i, kOutputAttrName))
        v->set_name(o.str());
      else if (auto p = func.getResultAttrOfType<StringAttr>(i, kParamAttrName))
        v->set_name(("new:" + p.getValue()).str());
      else if (auto st = func.getResultAttrOfType<StateAttr>(i, kStateAttrName))
        v->set_name("new:" + st.str());
    }
  }
  return success();
}

LogicalResult FunctionExporter::runRegion(AccumulateOp op,
                                          ArrayRef<Value> captures) {
  out.set_name("accumulate");
  Block &body = op.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    FailureOr<int32_t> id = declare(arg, "", op);
    if (failed(id))
      return failure();
    out.add_inputs(*id);
  }
  for (Value v : captures) {
    FailureOr<int32_t> id = declare(v, "", op);
    if (failed(id))
      return failure();
    out.add_inputs(*id);
  }
  for (Operation &inner : body.without_terminator())
    if (failed(lower(&inner)))
      return failure();
  if (auto arena = op->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
    out.set_arena_bytes(arena.getInt());
  for (Value v : body.getTerminator()->getOperands())
    out.add_outputs(ids.lookup(v));
  return success();
}

/// A loss kernel's ignored label, when it has one.
static void setIgnoreIndex(pg::Kernel &kernel, std::optional<int64_t> index) {
  pg::LabelParams *labels = kernel.mutable_labels();
  if (index)
    labels->set_ignore_index(*index);
}

static void setDims(pg::Kernel &kernel, ArrayRef<int64_t> values) {
  kernel.mutable_dims()->mutable_dims()->Add(values.begin(), values.end());
}

template <typename Params>
static void gridAxes(Params *params, ArrayRef<int16_t> axes) {
  for (int16_t a : axes)
    params->add_grid_axes(a);
}

/// The forward ops and data movement.
std::optional<LogicalResult>
FunctionExporter::lowerForward(Operation *op, pg::Kernel &kernel) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ConstantOp c) -> LogicalResult {
        kernel.set_op(pg::CONSTANT);
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense || failed(appendElements(
                          dense, *kernel.mutable_constant()->mutable_data())))
          return c.emitOpError("has a constant the runtime cannot hold");
        return success();
      })
      .Case([&](IotaOp o) {
        kernel.set_op(pg::IOTA);
        kernel.mutable_axis()->set_axis(o.getDimension());
        return success();
      })
      .Case([&](EmbeddingOp) {
        kernel.set_op(pg::EMBEDDING);
        return success();
      })
      .Case([&](LinearOp) {
        kernel.set_op(pg::LINEAR);
        return success();
      })
      .Case([&](MatmulOp o) {
        kernel.set_op(pg::MATMUL);
        kernel.mutable_matmul()->set_transpose_lhs(o.getTransposeLhs());
        kernel.mutable_matmul()->set_transpose_rhs(o.getTransposeRhs());
        return success();
      })
      .Case([&](LayerNormOp o) {
        kernel.set_op(pg::LAYER_NORM);
        kernel.mutable_norm()->set_epsilon(o.getEpsilon().convertToDouble());
        return success();
      })
      .Case([&](GeluOp o) {
        kernel.set_op(pg::GELU);
        if (o.getExact())
          kernel.mutable_elementwise()->set_gelu_exact(true);
        return success();
      })
      .Case([&](SoftmaxOp) {
        kernel.set_op(pg::SOFTMAX);
        return success();
      })
      .Case([&](AddOp) {
        kernel.set_op(pg::ADD);
        return success();
      })
      .Case([&](UnaryOp o) -> LogicalResult {
        kernel.set_op(pg::UNARY);
        // The artifact's enum lists the IR's functions in its order,
        // after UNARY_UNSPECIFIED.
        int value = static_cast<int>(o.getFn()) + 1;
        if (!pg::UnaryFunction_IsValid(value) ||
            pg::UnaryFunction_Name(static_cast<pg::UnaryFunction>(value)) !=
                "UNARY_" + stringifyUnaryFn(o.getFn()).upper())
          return o.emitOpError("has a function the artifact lacks: ")
                 << stringifyUnaryFn(o.getFn());
        kernel.mutable_elementwise()->set_unary(
            static_cast<pg::UnaryFunction>(value));
        return success();
      })
      .Case([&](BinaryOp o) -> LogicalResult {
        kernel.set_op(pg::BINARY);
        int value = static_cast<int>(o.getFn()) + 1;
        if (!pg::BinaryFunction_IsValid(value) ||
            pg::BinaryFunction_Name(static_cast<pg::BinaryFunction>(value)) !=
                "BINARY_" + stringifyBinaryFn(o.getFn()).upper())
          return o.emitOpError("has a function the artifact lacks: ")
                 << stringifyBinaryFn(o.getFn());
        kernel.mutable_elementwise()->set_binary(
            static_cast<pg::BinaryFunction>(value));
        return success();
      })
      .Case([&](CausalAttentionOp o) {
        kernel.set_op(pg::CAUSAL_ATTENTION);
        kernel.mutable_attention()->set_num_heads(o.getNumHeads());
        return success();
      })
      .Case([&](AttentionBlockOp o) {
        kernel.set_op(pg::ATTENTION_BLOCK);
        kernel.mutable_attention()->set_num_heads(o.getNumHeads());
        return success();
      })
      .Case([&](AttentionMergeOp) {
        kernel.set_op(pg::ATTENTION_MERGE);
        return success();
      })
      .Case([&](CrossEntropyOp o) {
        kernel.set_op(pg::CROSS_ENTROPY);
        setIgnoreIndex(kernel, o.getIgnoreIndex());
        return success();
      })
      .Case([&](ReshapeOp) {
        kernel.set_op(pg::RESHAPE);
        return success();
      })
      .Case([&](TransposeOp o) {
        kernel.set_op(pg::TRANSPOSE);
        setDims(kernel, o.getPermutation());
        return success();
      })
      .Case([&](SplitOp o) {
        kernel.set_op(pg::SPLIT);
        kernel.mutable_axis()->set_axis(o.getAxis());
        return success();
      })
      .Case([&](ConcatOp o) {
        kernel.set_op(pg::CONCAT);
        kernel.mutable_axis()->set_axis(o.getAxis());
        return success();
      })
      .Case([&](CastOp) {
        kernel.set_op(pg::CAST);
        return success();
      })
      .Case([&](ReduceSumOp o) {
        kernel.set_op(pg::REDUCE_SUM);
        setDims(kernel, o.getDimensions());
        return success();
      })
      .Case([&](BroadcastOp o) {
        kernel.set_op(pg::BROADCAST);
        setDims(kernel, o.getDimensions());
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The backward ops (gptc-autodiff's gradients).
std::optional<LogicalResult>
FunctionExporter::lowerGradient(Operation *op, pg::Kernel &kernel) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](EmbeddingGradOp) {
        kernel.set_op(pg::EMBEDDING_GRAD);
        return success();
      })
      .Case([&](LayerNormGradOp o) {
        kernel.set_op(pg::LAYER_NORM_GRAD);
        kernel.mutable_norm()->set_epsilon(o.getEpsilon().convertToDouble());
        return success();
      })
      .Case([&](GeluGradOp o) {
        kernel.set_op(pg::GELU_GRAD);
        if (o.getExact())
          kernel.mutable_elementwise()->set_gelu_exact(true);
        return success();
      })
      .Case([&](SoftmaxGradOp) {
        kernel.set_op(pg::SOFTMAX_GRAD);
        return success();
      })
      .Case([&](CausalAttentionGradOp o) {
        kernel.set_op(pg::CAUSAL_ATTENTION_GRAD);
        kernel.mutable_attention()->set_num_heads(o.getNumHeads());
        return success();
      })
      .Case([&](AttentionBlockGradOp o) {
        kernel.set_op(pg::ATTENTION_BLOCK_GRAD);
        kernel.mutable_attention()->set_num_heads(o.getNumHeads());
        return success();
      })
      .Case([&](AttentionMergeGradOp) {
        kernel.set_op(pg::ATTENTION_MERGE_GRAD);
        return success();
      })
      .Case([&](CrossEntropyGradOp o) {
        kernel.set_op(pg::CROSS_ENTROPY_GRAD);
        setIgnoreIndex(kernel, o.getIgnoreIndex());
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The optimizer's ops: norms, clipping, the schedule, AdamW, loss
/// scaling.
std::optional<LogicalResult>
FunctionExporter::lowerOptimizer(Operation *op, pg::Kernel &kernel) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](GlobalNormOp) {
        kernel.set_op(pg::GLOBAL_NORM);
        return success();
      })
      .Case([&](ClipScaleOp o) {
        kernel.set_op(pg::CLIP_SCALE);
        kernel.mutable_clip()->set_max_norm(o.getMaxNorm().convertToDouble());
        return success();
      })
      .Case([&](LearningRateOp o) {
        kernel.set_op(pg::LEARNING_RATE);
        pg::ScheduleParams *schedule = kernel.mutable_schedule();
        schedule->set_peak(o.getPeak().convertToDouble());
        schedule->set_min(o.getMin().convertToDouble());
        schedule->set_warmup(o.getWarmup());
        schedule->set_total(o.getTotal());
        schedule->set_decay(scheduleDecay(o.getDecay()));
        return success();
      })
      .Case([&](AdamWOp o) {
        kernel.set_op(pg::ADAMW);
        pg::AdamWParams *adamw = kernel.mutable_adamw();
        adamw->set_beta1(o.getBeta1().convertToDouble());
        adamw->set_beta2(o.getBeta2().convertToDouble());
        adamw->set_eps(o.getEps().convertToDouble());
        adamw->set_weight_decay(o.getWeightDecay().convertToDouble());
        return success();
      })
      .Case([&](MultiAdamWOp o) {
        kernel.set_op(pg::MULTI_ADAMW);
        pg::MultiAdamWParams *adamw = kernel.mutable_multi_adamw();
        adamw->set_beta1(o.getBeta1().convertToDouble());
        adamw->set_beta2(o.getBeta2().convertToDouble());
        adamw->set_eps(o.getEps().convertToDouble());
        for (double d : o.getDecays())
          adamw->add_weight_decays(d);
        return success();
      })
      .Case([&](SumSquaresOp) {
        kernel.set_op(pg::SUM_SQUARES);
        return success();
      })
      .Case([&](SqrtOp) {
        kernel.set_op(pg::SQRT);
        return success();
      })
      .Case([&](DivOp) {
        kernel.set_op(pg::DIV);
        return success();
      })
      .Case([&](FoundInfOp) {
        kernel.set_op(pg::FOUND_INF);
        return success();
      })
      .Case([&](LossScaleUpdateOp o) {
        kernel.set_op(pg::LOSS_SCALE_UPDATE);
        pg::LossScaleParams *scale = kernel.mutable_loss_scale();
        scale->set_growth(o.getGrowth().convertToDouble());
        scale->set_backoff(o.getBackoff().convertToDouble());
        scale->set_interval(o.getInterval());
        return success();
      })
      .Case([&](CountTokensOp o) {
        kernel.set_op(pg::COUNT_TOKENS);
        setIgnoreIndex(kernel, o.getIgnoreIndex());
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Collectives and the tensor-parallel ops.
std::optional<LogicalResult>
FunctionExporter::lowerParallel(Operation *op, pg::Kernel &kernel) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](shard::AllReduceOp o) -> LogicalResult {
        if (o.getReduction() != shard::ReductionKind::Sum &&
            o.getReduction() != shard::ReductionKind::Max)
          return o.emitOpError("has no CPU kernel for this reduction "
                               "(only sum and max)");
        if (failed(useGrid(o, o.getGridAttr())))
          return failure();
        kernel.set_op(o.getReduction() == shard::ReductionKind::Sum
                          ? pg::ALL_REDUCE
                          : pg::ALL_REDUCE_MAX);
        gridAxes(kernel.mutable_collective(), o.getGridAxes());
        return success();
      })
      .Case([&](BucketAllReduceOp o) -> LogicalResult {
        // One ALL_REDUCE over every operand: n inputs, n outputs.
        if (failed(useGrid(o, o.getGridAttr())))
          return failure();
        kernel.set_op(pg::ALL_REDUCE);
        gridAxes(kernel.mutable_collective(), o.getGridAxes());
        return success();
      })
      .Case<BucketAllGatherOp, BucketReduceScatterOp>(
          [&](auto o) -> LogicalResult {
            // One collective over every operand along dimension 0: n
            // inputs, n outputs.
            if (failed(useGrid(o, o.getGridAttr())))
              return failure();
            kernel.set_op(isa<BucketAllGatherOp>(o.getOperation())
                              ? pg::ALL_GATHER
                              : pg::REDUCE_SCATTER);
            kernel.mutable_collective()->set_axis(0);
            gridAxes(kernel.mutable_collective(), o.getGridAxes());
            return success();
          })
      .Case([&](shard::ShiftOp o) -> LogicalResult {
        if (!o.getRotate())
          return o.emitOpError("has no CPU kernel without `rotate`");
        if (failed(useGrid(o, o.getGridAttr())))
          return failure();
        kernel.set_op(pg::SHIFT);
        pg::CollectiveParams *params = kernel.mutable_collective();
        gridAxes(params, o.getGridAxes());
        params->set_shift_axis(o.getShiftAxis().getSExtValue());
        params->set_offset(o.getOffsetAttr().getInt());
        return success();
      })
      .Case([&](ShardOffsetOp o) -> LogicalResult {
        if (failed(useGrid(o, o.getGridAttr())))
          return failure();
        kernel.set_op(pg::SHARD_OFFSET);
        kernel.mutable_shard_offset()->set_block(o.getBlock());
        gridAxes(kernel.mutable_shard_offset(), o.getGridAxes());
        return success();
      })
      .Case([&](RowMaxOp) {
        kernel.set_op(pg::ROW_MAX);
        return success();
      })
      .Case([&](VocabParallelPartialsOp o) {
        kernel.set_op(pg::VOCAB_PARTIALS);
        pg::VocabParams *vocab = kernel.mutable_vocab();
        if (auto size = o.getVocabSize())
          vocab->set_vocab_size(*size);
        return success();
      })
      .Case([&](VocabParallelPartialsGradOp o) {
        kernel.set_op(pg::VOCAB_PARTIALS_GRAD);
        pg::VocabParams *vocab = kernel.mutable_vocab();
        if (auto size = o.getVocabSize())
          vocab->set_vocab_size(*size);
        return success();
      })
      .Case([&](VocabParallelLossOp o) {
        kernel.set_op(pg::VOCAB_LOSS);
        setIgnoreIndex(kernel, o.getIgnoreIndex());
        return success();
      })
      .Case([&](VocabParallelLossGradOp o) {
        kernel.set_op(pg::VOCAB_LOSS_GRAD);
        setIgnoreIndex(kernel, o.getIgnoreIndex());
        return success();
      })
      .Case([&](GradAllReduceOp) {
        // The identity once differentiated (canonicalization folds it).
        kernel.set_op(pg::RESHAPE);
        return success();
      })
      .Case<shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp>(
          [&](auto o) -> LogicalResult {
            using OpT = decltype(o);
            if constexpr (std::is_same_v<OpT, shard::ReduceScatterOp>)
              if (o.getReduction() != shard::ReductionKind::Sum)
                return o.emitOpError("has no CPU kernel for this reduction "
                                     "(only sum)");
            if (failed(useGrid(o, o.getGridAttr())))
              return failure();
            int64_t axis;
            if constexpr (std::is_same_v<OpT, shard::AllGatherOp>) {
              kernel.set_op(pg::ALL_GATHER);
              axis = o.getGatherAxis().getSExtValue();
            } else if constexpr (std::is_same_v<OpT, shard::ReduceScatterOp>) {
              kernel.set_op(pg::REDUCE_SCATTER);
              axis = o.getScatterAxis().getSExtValue();
            } else {
              kernel.set_op(pg::ALL_SLICE);
              axis = o.getSliceAxis().getSExtValue();
            }
            kernel.mutable_collective()->set_axis(axis);
            gridAxes(kernel.mutable_collective(), o.getGridAxes());
            return success();
          })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ops with regions: a fused GEMM, a generated kernel, an accumulation
/// loop (the values a region captures are added to `captures`).
std::optional<LogicalResult>
FunctionExporter::lowerRegion(Operation *op, pg::Kernel &kernel,
                              llvm::SetVector<Value> &captures) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](FusedGemmOp o) -> LogicalResult {
        // One library call; the region says what it computes.
        using MP = pg::MatmulParams;
        pg::MatmulParams *params = kernel.mutable_matmul();
        switch (o.getEpilogue()) {
        case GemmEpilogue::GeluAux:
          params->set_epilogue(MP::GELU_AUX);
          break;
        case GemmEpilogue::DGelu:
          params->set_epilogue(MP::DGELU);
          break;
        case GemmEpilogue::DGeluBGrad:
          params->set_epilogue(MP::DGELU_BGRAD);
          break;
        case GemmEpilogue::BGrad:
          params->set_epilogue(MP::BGRAD);
          break;
        }
        if (auto matmul = dyn_cast<MatmulOp>(o.getGemm())) {
          kernel.set_op(pg::MATMUL);
          params->set_transpose_lhs(matmul.getTransposeLhs());
          params->set_transpose_rhs(matmul.getTransposeRhs());
        } else {
          kernel.set_op(pg::LINEAR);
        }
        return success();
      })
      .Case([&](KernelOp o) -> LogicalResult {
        // Generated code: the CPU target compiles the region into the
        // program's kernel library under the kernel's name.
        kernel.set_op(pg::COMPILED);
        pg::CompiledParams *compiled = kernel.mutable_compiled();
        auto function = kernelFunctions.find(o.getName());
        if (function == kernelFunctions.end())
          return o.emitOpError("is not a kernel of the module");
        compiled->set_symbol(function->second);
        if (function->second != o.getName())
          compiled->set_name(o.getName().str());
        // The CPU splits dimension 0 over threads; a GPU kernel's
        // launch plan has its own mapping and may compute scalars
        // (extent 0, which the CPU executor refuses).
        auto first = dyn_cast<RankedTensorType>(o.getResult(0).getType());
        if (!first)
          return o.emitOpError("needs ranked tensor results");
        compiled->set_extent(first.getRank() ? first.getDimSize(0) : 0);
        return success();
      })
      .Case([&](AccumulateOp o) -> LogicalResult {
        kernel.set_op(pg::ACCUMULATE);
        pg::AccumulateParams *accumulate = kernel.mutable_accumulate();
        accumulate->set_microbatches(o.getMicrobatches());
        accumulate->set_stacked_inputs(o.getInputs().size());
        getUsedValuesDefinedAbove(o.getBody(), captures);
        FunctionExporter inner(*accumulate->mutable_body(), symbols,
                               kernelFunctions);
        if (failed(inner.runRegion(o, captures.getArrayRef())))
          return failure();
        // The body's grid is the function's.
        if (inner.out.grid_shape_size() && !out.grid_shape_size())
          out.mutable_grid_shape()->CopyFrom(inner.out.grid_shape());
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult FunctionExporter::lower(Operation *op) {
  pg::Kernel kernel;
  llvm::SetVector<Value> captures;
  kernel.set_location(describe(op->getLoc()));

  // 1. The op's kind and attributes, by family.
  std::optional<LogicalResult> known = lowerForward(op, kernel);
  if (!known)
    known = lowerGradient(op, kernel);
  if (!known)
    known = lowerOptimizer(op, kernel);
  if (!known)
    known = lowerParallel(op, kernel);
  if (!known)
    known = lowerRegion(op, kernel, captures);
  if (!known)
    return op->emitOpError("has no CPU kernel");
  if (failed(*known))
    return failure();

  // 2. Operands (and the values a region captures) and results.
  SmallVector<Value> operands(op->getOperands());
  operands.append(captures.begin(), captures.end());
  for (Value operand : operands) {
    auto it = ids.find(operand);
    if (it == ids.end())
      return op->emitOpError("uses a value defined outside its function");
    kernel.add_inputs(it->second);
  }
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttrName);
  if (offsets && offsets.size() != static_cast<int64_t>(op->getNumResults()))
    return op->emitOpError("has a buffer plan of the wrong length");
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    FailureOr<int32_t> id = declare(result, "", op);
    if (failed(id))
      return failure();
    if (offsets)
      out.mutable_values(*id)->set_offset(offsets[i]);
    kernel.add_outputs(*id);
  }
  *out.add_kernels() = std::move(kernel);
  return success();
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> mlir::gptc::cloneExported(ModuleOp module,
                                                ArrayRef<StringRef> functions) {
  OwningOpRef<ModuleOp> exported = module.clone();
  if (!functions.empty())
    for (auto func :
         llvm::make_early_inc_range(exported->getOps<func::FuncOp>()))
      if (!llvm::is_contained(functions, func.getName()))
        func.erase();
  return exported;
}

pg::ScheduleParams::Decay mlir::gptc::scheduleDecay(LrDecay decay) {
  switch (decay) {
  case LrDecay::Cosine:
    return pg::ScheduleParams::COSINE;
  case LrDecay::Linear:
    return pg::ScheduleParams::LINEAR;
  case LrDecay::Constant:
    return pg::ScheduleParams::CONSTANT;
  }
  llvm_unreachable("unknown learning-rate decay");
}

LogicalResult mlir::gptc::exportProgram(ModuleOp module,
                                        ArrayRef<StringRef> functions,
                                        pg::Program &program) {
  program.set_format_version(kProgramFormatVersion);
  if (std::optional<StringRef> name = module.getName())
    program.set_model(name->str());
  bool any = false;
  SymbolTableCollection symbols;
  // The kernels' code: one function per distinct body among the exported
  // functions' kernels, which is what the targets compile.
  llvm::StringMap<std::string> kernelFunctions =
      kernelFunctionNames(module, functions);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!functions.empty() && !llvm::is_contained(functions, func.getSymName()))
      continue;
    any = true;
    FunctionExporter exporter(*program.add_functions(), symbols,
                              kernelFunctions);
    if (failed(exporter.run(func)))
      return failure();
  }
  if (!any)
    return module.emitError("no function to export");
  return success();
}
