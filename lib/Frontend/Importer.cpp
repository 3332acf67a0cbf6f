//===- Importer.cpp - Model description to gptc IR ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Emits the forward graph of a GPT-2-style decoder for one micro-batch:
//
//   x = wte[tokens] + wpe[positions]
//   for each block:  x += attn(ln_1(x));  x += mlp(ln_2(x))
//   loss = cross_entropy(ln_f(x) W_head^T, labels)
//
// Attention projections are three `linear`s (query, key, value) rather than
// GPT-2's fused `c_attn`: each then splits by heads over a tensor-parallel
// axis as a plain column-parallel layer. A later fusion may merge GEMMs that
// share an input; the parameter count is the same.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/Importer.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// A parameter the forward function takes: name, shape, initializer.
struct Param {
  std::string name;
  SmallVector<int64_t> shape;
  enum class Init { Normal, Zeros, Ones } init;
  double std = 0;
  Location loc;
  /// > 0: only the first rows are drawn, the rest (padding) are zero.
  int64_t initRows = 0;
};

class Importer {
public:
  /// With `logitsBatch` > 0, builds @logits for that batch instead of
  /// @forward.
  Importer(const ModelDescription &desc, MLIRContext *ctx,
           int64_t logitsBatch = 0)
      : desc(desc), m(desc.getConfig()), ctx(ctx), b(ctx),
        logitsBatch(logitsBatch) {}

  OwningOpRef<ModuleOp> run();

private:
  /// The location of an op: its module path, at the field that sizes it.
  Location at(const Twine &name, ArrayRef<FieldRef> field) {
    return NameLoc::get(StringAttr::get(ctx, name), desc.locate(field));
  }
  /// The vocabulary rounded up to a multiple of the tensor-parallel size,
  /// so that it splits evenly; the padding ids are never tokens or labels,
  /// and the vocabulary-parallel loss leaves their logits out.
  int64_t paddedVocab() const {
    int64_t t = std::max<int64_t>(m.tensorParallel, 1);
    return (m.vocabSize / t + (m.vocabSize % t != 0)) * t;
  }
  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, b.getF32Type());
  }
  /// Declares a parameter; returns its index among the parameters.
  unsigned declare(const Twine &name, ArrayRef<int64_t> shape, Param::Init init,
                   double std, Location loc) {
    params.push_back({name.str(), SmallVector<int64_t>(shape), init, std, loc});
    return params.size() - 1;
  }
  void declareParams();
  void buildBody(func::FuncOp func);

  const ModelDescription &desc;
  const ModelConfig &m;
  MLIRContext *ctx;
  OpBuilder b;
  int64_t logitsBatch;
  SmallVector<Param> params;
};
} // namespace

/// The path of a field of the `model` block.
static SmallVector<FieldRef, 2> modelField(StringRef f) {
  return {{"model"}, {f}};
}

void Importer::declareParams() {
  int64_t C = m.modelDim, F = m.mlpDim;
  double std = m.initStd;
  double residualStd =
      m.scaleResidualInit ? std / std::sqrt(2.0 * m.numLayers) : std;
  auto N = Param::Init::Normal, Z = Param::Init::Zeros, O = Param::Init::Ones;

  int64_t V = paddedVocab();
  declare("wte", {V, C}, N, std, at("wte", modelField("vocab_size")));
  if (V != m.vocabSize)
    params.back().initRows = m.vocabSize;
  declare("wpe", {m.contextLength, C}, N, std,
          at("wpe", modelField("context_length")));
  for (int64_t l = 0; l < m.numLayers; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    auto linear = [&](StringRef sub, int64_t out, int64_t in, double s,
                      ArrayRef<FieldRef> field) {
      Location loc = at(h + sub, field);
      declare(h + sub + ".weight", {out, in}, N, s, loc);
      if (m.bias)
        declare(h + sub + ".bias", {out}, Z, 0, loc);
    };
    auto norm = [&](StringRef sub) {
      Location loc = at(h + sub, modelField("layer_norm_epsilon"));
      declare(h + sub + ".weight", {C}, O, 0, loc);
      declare(h + sub + ".bias", {C}, Z, 0, loc);
    };
    norm("ln_1");
    linear("attn.q_proj", C, C, std, modelField("num_heads"));
    linear("attn.k_proj", C, C, std, modelField("num_heads"));
    linear("attn.v_proj", C, C, std, modelField("num_heads"));
    linear("attn.c_proj", C, C, residualStd, modelField("model_dim"));
    norm("ln_2");
    linear("mlp.c_fc", F, C, std, modelField("mlp_ratio"));
    linear("mlp.c_proj", C, F, residualStd, modelField("mlp_ratio"));
  }
  Location lnf = at("ln_f", modelField("layer_norm_epsilon"));
  declare("ln_f.weight", {C}, O, 0, lnf);
  declare("ln_f.bias", {C}, Z, 0, lnf);
  if (!m.tiedEmbeddings) {
    declare("lm_head.weight", {V, C}, N, std,
            at("lm_head", modelField("tied_embeddings")));
    if (V != m.vocabSize)
      params.back().initRows = m.vocabSize;
  }
}

void Importer::buildBody(func::FuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  int64_t B = logitsBatch ? logitsBatch : m.microBatchSize, T = m.seqLen;
  unsigned next = 0;
  auto param = [&]() -> Value { return entry.getArgument(next++); };
  Value tokens = entry.getArgument(params.size());
  Value labels = logitsBatch ? Value() : entry.getArgument(params.size() + 1);
  auto idsType = RankedTensorType::get({B, T}, b.getI32Type());
  auto eps = b.getF64FloatAttr(m.layerNormEpsilon);

  // 1. Token and position embeddings.
  Value wte = param(), wpe = param();
  auto tokOp = EmbeddingOp::create(b, at("wte", modelField("vocab_size")),
                                   tokens, wte, Value());
  Value tok = tokOp;
  Value pos = IotaOp::create(b, at("wpe", modelField("context_length")),
                             idsType, b.getI64IntegerAttr(1));
  Value posEmb = EmbeddingOp::create(b, at("wpe", modelField("context_length")),
                                     pos, wpe, Value());
  Value x = AddOp::create(b, at("embed", modelField("model_dim")), tok, posEmb);

  // No layout is written here: with a tensor axis,
  // gptc-sharding-propagation derives Megatron's from the graph.
  auto linear = [&](Location loc, Value in) -> Value {
    Value w = param();
    Value bias = m.bias ? param() : Value();
    return LinearOp::create(b, loc, in, w, bias);
  };
  auto norm = [&](Location loc, Value in) -> Value {
    Value g = param(), beta = param();
    return LayerNormOp::create(b, loc, in, g, beta, eps);
  };

  // 2. The blocks.
  for (int64_t l = 0; l < m.numLayers; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    auto heads = modelField("num_heads");
    Value a = norm(at(h + "ln_1", modelField("layer_norm_epsilon")), x);
    Value q = linear(at(h + "attn.q_proj", heads), a);
    Value k = linear(at(h + "attn.k_proj", heads), a);
    Value v = linear(at(h + "attn.v_proj", heads), a);
    Value y =
        CausalAttentionOp::create(b, at(h + "attn", heads), q, k, v,
                                  b.getI64IntegerAttr(m.numHeads), Value());
    y = linear(at(h + "attn.c_proj", modelField("model_dim")), y);
    x = AddOp::create(b, at(h + "residual_1", modelField("num_layers")), x, y);
    Value z = norm(at(h + "ln_2", modelField("layer_norm_epsilon")), x);
    z = linear(at(h + "mlp.c_fc", modelField("mlp_ratio")), z);
    z = GeluOp::create(b, at(h + "mlp.gelu", modelField("mlp_ratio")), z);
    z = linear(at(h + "mlp.c_proj", modelField("mlp_ratio")), z);
    x = AddOp::create(b, at(h + "residual_2", modelField("num_layers")), x, z);
  }

  // 3. Final norm, language-model head and loss.
  x = norm(at("ln_f", modelField("layer_norm_epsilon")), x);
  Value head = m.tiedEmbeddings ? wte : param();
  auto headOp = LinearOp::create(
      b, at("lm_head", modelField("tied_embeddings")), x, head, Value());
  if (paddedVocab() != m.vocabSize)
    headOp->setAttr(kVocabSizeAttrName, b.getI64IntegerAttr(m.vocabSize));
  Value logits = headOp;
  if (logitsBatch) {
    func::ReturnOp::create(b, at("lm_head", modelField("tied_embeddings")),
                           logits);
    return;
  }
  Value loss = CrossEntropyOp::create(
      b, at("loss", {{"training"}, {"seq_len"}}), logits, labels, Value(),
      b.getI64IntegerAttr(kPaddingLabel));
  func::ReturnOp::create(b, at("loss", {{"training"}, {"seq_len"}}), loss);
}

OwningOpRef<ModuleOp> Importer::run() {
  Location fileLoc = desc.locate({});
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc, desc.getName());
  b.setInsertionPointToEnd(module->getBody());
  setTrainingAttributes(*module, desc);

  // 2. The signature: parameters, then the data inputs.
  declareParams();
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  for (const Param &p : params) {
    argTypes.push_back(f32(p.shape));
    argLocs.push_back(p.loc);
  }
  int64_t batch = logitsBatch ? logitsBatch : m.microBatchSize;
  auto idsType = RankedTensorType::get({batch, m.seqLen}, b.getI32Type());
  Location batchLoc = desc.locate({{"training"}, {"batch_size"}});
  argTypes.push_back(idsType);
  argLocs.push_back(batchLoc);
  if (!logitsBatch) {
    argTypes.push_back(idsType);
    argLocs.push_back(batchLoc);
  }
  Type resultType =
      logitsBatch ? Type(f32({batch, m.seqLen, m.vocabSize})) : Type(f32({}));
  auto func = func::FuncOp::create(b, desc.locate({{"model"}}),
                                   logitsBatch ? "logits" : "forward",
                                   b.getFunctionType(argTypes, {resultType}));
  func.getBody().push_back(new Block);
  func.getBody().front().addArguments(argTypes, argLocs);

  // 3. Argument attributes: names and initializers.
  for (auto [i, p] : llvm::enumerate(params)) {
    func.setArgAttr(i, kParamAttrName, b.getStringAttr(p.name));
    InitKind kind = p.init == Param::Init::Normal  ? InitKind::Normal
                    : p.init == Param::Init::Zeros ? InitKind::Zeros
                                                   : InitKind::Ones;
    func.setArgAttr(
        i, kInitAttrName,
        InitAttr::get(b.getContext(), kind,
                      APFloat(kind == InitKind::Normal ? p.std : 0.0),
                      APFloat(0.0), std::max<int64_t>(p.initRows, 0)));
    if (p.name == "wte" || p.name == "wpe")
      func.setArgAttr(i, kEmbeddingTableAttrName, b.getUnitAttr());
  }
  func.setArgAttr(params.size(), kInputAttrName,
                  InputAttr::get(b.getContext(), InputKind::Tokens));
  if (!logitsBatch)
    func.setArgAttr(params.size() + 1, kInputAttrName,
                    InputAttr::get(b.getContext(), InputKind::Labels));

  buildBody(func);
  return module;
}

void mlir::gptc::setTrainingAttributes(ModuleOp module,
                                       const ModelDescription &desc) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<GptcDialect, func::FuncDialect, shard::ShardDialect>();
  const ModelConfig &m = desc.getConfig();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(module.getBody());
  GptcDialect::PrecisionAttrHelper(ctx).setAttr(
      module, PrecisionAttr::get(ctx, m.precision));

  if (m.skipNonFinite)
    GptcDialect::NanPolicyAttrHelper(ctx).setAttr(
        module, NanPolicyAttr::get(ctx, NanPolicy::Skip));
  if (!desc.getPlanNote().empty())
    GptcDialect::PlanAttrHelper(ctx).setAttr(
        module, b.getStringAttr(desc.getPlanNote()));
  if (m.recompute != Recompute::None && m.pipelineParallel == 1)
    GptcDialect::RecomputeAttrHelper(ctx).setAttr(
        module, RecomputeAttr::get(ctx, m.recompute));

  // 1. The device mesh becomes a grid; the axis roles stay beside it.
  ArrayRef<MeshAxis> axes = desc.getMeshAxes();
  if (!axes.empty()) {
    SmallVector<int64_t> shape;
    SmallVector<Attribute> names;
    SmallVector<MeshAxisKind> kinds;
    for (const MeshAxis &axis : axes) {
      shape.push_back(axis.size);
      names.push_back(b.getStringAttr(axis.name));
      kinds.push_back(axis.kind);
    }
    shard::GridOp::create(b, desc.locate({{"mesh"}}), "mesh", shape);
    GptcDialect::ParallelAttrHelper(ctx).setAttr(
        module,
        ParallelAttr::get(ctx, b.getArrayAttr(names), kinds, m.zeroStage,
                          m.sequenceParallel, m.contextAllGather));
  }

  // The training settings the optimizer pass turns into ops (fp16's loss
  // scaling settings are the description's, or the defaults it shares
  // with the attribute).
  const OptimizerConfig &opt = m.optimizer;
  GptcDialect::OptimizerAttrHelper(ctx).setAttr(
      module,
      OptimizerAttr::get(
          ctx, APFloat(opt.lr), APFloat(opt.lr * opt.minLrRatio),
          opt.warmupSteps, m.steps, opt.decay, APFloat(opt.beta1),
          APFloat(opt.beta2), APFloat(opt.eps), APFloat(opt.weightDecay),
          opt.decayEmbeddings, APFloat(opt.gradClip), m.gradAccumSteps,
          m.batchSize, APFloat(m.initialLossScale), m.lossScaleGrowthInterval));
}

/// A description of an ONNX model has no architecture to build.
static bool namesOnnxModel(const ModelDescription &desc) {
  if (desc.getOnnxModelPath().empty())
    return false;
  emitError(desc.locate({{"onnx_model"}}))
      << "this description's model is an ONNX graph, which gptc train "
         "imports; the other commands build gptc's own GPT from a 'model' "
         "block";
  return true;
}

OwningOpRef<ModuleOp> mlir::gptc::importModel(const ModelDescription &desc,
                                              MLIRContext *context) {
  context->loadDialect<GptcDialect, func::FuncDialect, shard::ShardDialect>();
  if (namesOnnxModel(desc))
    return nullptr;
  return Importer(desc, context).run();
}

OwningOpRef<ModuleOp> mlir::gptc::importLogits(const ModelDescription &desc,
                                               MLIRContext *context,
                                               int64_t batch) {
  context->loadDialect<GptcDialect, func::FuncDialect, shard::ShardDialect>();
  if (namesOnnxModel(desc))
    return nullptr;
  return Importer(desc, context, batch).run();
}

void mlir::gptc::registerImporterDialects(DialectRegistry &registry) {
  registry.insert<GptcDialect, func::FuncDialect, shard::ShardDialect>();
}
