//===- OnnxTraining.cpp - An imported ONNX graph as a training step ------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The ONNX importer gives a function of the graph's inputs and outputs. The
// training passes take gptc's convention (gptc-verify-model): parameters,
// then a 'tokens' and a 'labels' input, and one scalar loss. This file
// rewrites an imported language model into it (docs/Onnx.md, "Training"):
//
//  - the labels are the integer input that reaches a gptc.cross_entropy's
//    labels (through reshapes); the tokens the other integer input. A graph
//    with one integer input and a `B x T x V` output (the logits) gets the
//    loss added: cross_entropy over those logits and a new labels input;
//  - the loss becomes the only result (the graph's other outputs are
//    dropped, and with them what only they computed);
//  - parameters nothing reads any more are dropped with their data;
//  - the tables gptc.embedding reads are marked (`gptc.embedding_table`:
//    weight decay treats them as embeddings);
//  - each parameter's initial value stays its initializer's data;
//  - the ops of each raised block are located at it (`loc("h.<i>"(...))`,
//    as gptc's own GPTs are), for pipeline stages and recomputation.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/OnnxImporter.h"

#include "OnnxInternal.h"

#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstring>

using namespace mlir;
using namespace mlir::gptc;

/// The block argument `v` is (through reshapes), or null.
static BlockArgument argumentBehindReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  return dyn_cast<BlockArgument>(v);
}

static bool isIntegerTensor(Type t) {
  auto type = dyn_cast<RankedTensorType>(t);
  return type && type.getElementType().isSignlessInteger();
}

/// A linear reading transpose(W) of a [K, N] float32 parameter W that
/// nothing else reads (Hugging Face's Conv1D, or a weight the exporter
/// stored transposed) reads a parameter of its own instead: W's data
/// transposed to gptc.linear's [N, K], named `<name>.T`. Sharding and the
/// fused-projection split then see an ordinary linear weight.
static void holdTransposedWeights(func::FuncOp func, OnnxImport &imported) {
  Block &body = func.getBody().front();
  unsigned numParams = imported.parameters.size();
  SmallVector<LinearOp> linears;
  func.walk([&](LinearOp op) { linears.push_back(op); });
  OpBuilder b(func.getContext());
  for (LinearOp lin : linears) {
    auto t = lin.getWeight().getDefiningOp<TransposeOp>();
    if (!t || !t.getResult().hasOneUse())
      continue;
    auto arg = dyn_cast<BlockArgument>(t.getInput());
    if (!arg || arg.getOwner() != &body || arg.getArgNumber() >= numParams ||
        !arg.hasOneUse() ||
        imported.parameters[arg.getArgNumber()].onnxType != 1)
      continue;
    const OnnxTensorData &w = imported.parameters[arg.getArgNumber()];
    if (w.shape.size() != 2)
      continue;
    int64_t k = w.shape[0], n = w.shape[1];
    OnnxTensorData held;
    held.name = w.name + ".T";
    held.onnxType = 1;
    held.shape = {n, k};
    held.bytes.resize(w.bytes.size());
    const char *src = w.bytes.data();
    char *dst = held.bytes.data();
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (j * k + i) * 4, src + (i * n + j) * 4, 4);
    unsigned at = imported.parameters.size();
    (void)func.insertArgument(at, t.getResult().getType(),
                              b.getDictionaryAttr(b.getNamedAttr(
                                  kParamAttrName, b.getStringAttr(held.name))),
                              arg.getLoc());
    imported.parameters.push_back(std::move(held));
    t.getResult().replaceAllUsesWith(body.getArgument(at));
    t.erase();
  }
}

/// A linear whose result is only split along its last dimension (GPT-2's
/// fused c_attn: query, key and value) becomes one linear per piece, with
/// the weight's rows and the bias's entries of that piece as parameters of
/// their own (`<name>.part<i>`): tensor parallelism then splits each by
/// heads. Float32 parameters only.
static void splitFusedProjections(func::FuncOp func, OnnxImport &imported) {
  Block &body = func.getBody().front();
  unsigned numParams = imported.parameters.size();
  auto paramIndex = [&](Value v) -> int {
    auto arg = dyn_cast_or_null<BlockArgument>(v);
    if (!arg || arg.getArgNumber() >= numParams || !arg.hasOneUse() ||
        imported.parameters[arg.getArgNumber()].onnxType != 1)
      return -1;
    return static_cast<int>(arg.getArgNumber());
  };
  SmallVector<LinearOp> linears;
  func.walk([&](LinearOp op) { linears.push_back(op); });
  OpBuilder b(func.getContext());
  for (LinearOp lin : linears) {
    auto type = cast<RankedTensorType>(lin.getResult().getType());
    if (!lin.getResult().hasOneUse())
      continue;
    auto split = dyn_cast<SplitOp>(*lin.getResult().getUsers().begin());
    int w = paramIndex(lin.getWeight());
    int bias = lin.getBias() ? paramIndex(lin.getBias()) : -2;
    if (!split || split.getAxis() != uint64_t(type.getRank() - 1) || w < 0 ||
        bias == -1)
      continue;
    const OnnxTensorData weight = imported.parameters[w];
    std::optional<OnnxTensorData> biasData;
    if (bias >= 0)
      biasData = imported.parameters[bias];
    int64_t k = weight.shape[1], row = 0;
    b.setInsertionPoint(split);
    for (auto [i, piece] : llvm::enumerate(split.getResults())) {
      int64_t rows = cast<RankedTensorType>(piece.getType()).getShape().back();
      auto addParam = [&](const OnnxTensorData &whole, int64_t width,
                          ArrayRef<int64_t> shape) -> Value {
        OnnxTensorData part;
        part.name = whole.name + ".part" + std::to_string(i);
        part.onnxType = 1;
        part.shape.assign(shape.begin(), shape.end());
        part.bytes = whole.bytes.substr(row * width * 4, rows * width * 4);
        unsigned at = imported.parameters.size();
        auto argType = RankedTensorType::get(shape, b.getF32Type());
        (void)func.insertArgument(
            at, argType,
            b.getDictionaryAttr(
                b.getNamedAttr(kParamAttrName, b.getStringAttr(part.name))),
            func.getArgument(w).getLoc());
        imported.parameters.push_back(std::move(part));
        return body.getArgument(at);
      };
      Value pw = addParam(weight, k, {rows, k});
      Value pb = biasData ? addParam(*biasData, 1, {rows}) : Value();
      auto part = LinearOp::create(b, lin.getLoc(), lin.getInput(), pw, pb);
      piece.replaceAllUsesWith(part.getResult());
      row += rows;
    }
    split.erase();
    lin.erase();
  }
}

/// Locates each op of the raised blocks at its block, as gptc's own GPTs are
/// (`loc("h.<i>"(<node>))`), so that pipeline stages (gptc-pipeline-split),
/// full recomputation and the kernel report find an imported model's layers.
///
/// Block i starts at its residual stream x_i: walking back from the i-th
/// causal attention's query (through its projection and norm), the first
/// value something outside the attention's inputs also reads (the residual
/// connection). An op belongs to the latest block whose x_i it depends on
/// (the final norm, head and loss to the last); an op that computes no
/// activation (a weight's reshape, the labels' reshape) to the earliest
/// block among its users; the embedding to none. Returns
/// the number of blocks located: 0 when no block was raised or the blocks
/// are not a chain of residual steps (a value of block i read before x_i).
static int64_t locateBlocks(func::FuncOp func, BlockArgument tokens) {
  Block &body = func.getBody().front();
  SmallVector<CausalAttentionOp> attentions;
  for (Operation &op : body)
    if (auto a = dyn_cast<CausalAttentionOp>(op))
      attentions.push_back(a);
  if (attentions.empty())
    return 0;
  // Values computed from the tokens (the activations).
  DenseSet<Value> active;
  active.insert(tokens);
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value r : op.getResults())
        active.insert(r);
  DenseMap<Operation *, int64_t> order;
  for (auto [i, op] : llvm::enumerate(body))
    order[&op] = static_cast<int64_t>(i);

  // 1. Each block's residual input.
  DenseMap<Value, int64_t> blockInput;
  int64_t previous = -1;
  for (auto [i, attention] : llvm::enumerate(attentions)) {
    DenseSet<Operation *> inputs; // the attention's transitive inputs
    SmallVector<Operation *> work{attention};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && active.contains(v) && inputs.insert(def).second)
          work.push_back(def);
    }
    Value x = attention.getQuery();
    Value found;
    while (Operation *def = x.getDefiningOp()) {
      if (llvm::any_of(x.getUsers(), [&](Operation *u) {
            return u != attention.getOperation() && !inputs.contains(u);
          })) {
        found = x;
        break;
      }
      // Up the earliest-computed activation operand.
      Value next;
      for (Value v : def->getOperands())
        if (active.contains(v) && v.getDefiningOp() &&
            (!next || order[v.getDefiningOp()] < order[next.getDefiningOp()]))
          next = v;
      if (!next)
        break;
      x = next;
    }
    if (!found || order[found.getDefiningOp()] <= previous ||
        blockInput.count(found))
      return 0;
    previous = order[found.getDefiningOp()];
    blockInput[found] = static_cast<int64_t>(i);
  }

  // 2. Each op's block: the latest block input it depends on ...
  DenseMap<Operation *, int64_t> block;
  for (Operation &op : body.without_terminator()) {
    int64_t b = -1;
    for (Value v : op.getOperands()) {
      if (auto it = blockInput.find(v); it != blockInput.end())
        b = std::max(b, it->second);
      else if (Operation *def = v.getDefiningOp())
        b = std::max(b, block.lookup(def));
    }
    block[&op] = b;
  }
  // ... or, computing no activation (a constant, a weight's reshape, the
  // labels' reshape), its earliest user's. The embedding stays before the
  // blocks, as gptc's own GPTs'.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (block[&op] >= 0 || llvm::any_of(op.getResults(), [&](Value r) {
          return active.contains(r);
        }))
      continue;
    int64_t b = -1;
    for (Operation *user : op.getUsers())
      if (int64_t u = block.lookup(user); u >= 0)
        b = b < 0 ? u : std::min(b, u);
    block[&op] = b;
  }
  for (auto [i, attention] : llvm::enumerate(attentions))
    if (block[attention] != static_cast<int64_t>(i))
      return 0;

  // 3. The locations.
  MLIRContext *context = func.getContext();
  SmallVector<StringAttr> names;
  for (size_t i = 0; i < attentions.size(); ++i)
    names.push_back(StringAttr::get(context, "h." + Twine(i)));
  for (Operation &op : body.without_terminator())
    if (int64_t b = block[&op]; b >= 0)
      op.setLoc(NameLoc::get(names[b], op.getLoc()));
  return static_cast<int64_t>(attentions.size());
}

FailureOr<OnnxTrainingShape>
mlir::gptc::prepareOnnxForTraining(OnnxImport &imported) {
  ModuleOp module = *imported.module;
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func || !llvm::hasSingleElement(func.getBody()))
    return module.emitError("the imported module has no @forward"), failure();
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Location loc = func.getLoc();
  auto inputName = [&](BlockArgument arg) {
    auto name =
        func.getArgAttrOfType<InputAttr>(arg.getArgNumber(), kInputAttrName);
    return name ? name.str() : std::string("?");
  };

  // The module's parameters an exporter's optimizer folded into constants
  // do not train: say which, and how to keep them.
  if (!imported.foldedParameters.empty()) {
    auto w = emitWarning(loc)
             << imported.foldedParameters.size()
             << " of the parameters the export's signature names are not "
                "initializers of the graph: tied to another (as GPT-2's "
                "embedding and head), or folded into constants by the "
                "exporter's optimizer, which gptc then does not train (";
    for (auto [i, name] : llvm::enumerate(imported.foldedParameters)) {
      if (i == 3) {
        w << ", ...";
        break;
      }
      w << (i ? ", " : "") << "'" << name << "'";
    }
    w << "); to train the module as it is, export it with "
         "torch.onnx.export(..., optimize=False)";
  }

  // 0. The exported layers as gptc's ops (OnnxRaise.cpp), and fused
  //    projections split into one per piece (each piece a parameter).
  if (imported.raiseLayers) {
    raiseGptPatterns(func);
    holdTransposedWeights(func, imported);
    splitFusedProjections(func, imported);
  }

  // 1. The data inputs: integer tensors; a float input has no place in a
  //    language model's step.
  SmallVector<BlockArgument> ids;
  for (BlockArgument arg : body.getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), kInputAttrName))
      continue;
    if (!isIntegerTensor(arg.getType()))
      return emitError(loc, "graph input '")
                 << inputName(arg) << "' is a " << arg.getType()
                 << "; gptc trains language models whose inputs are token "
                    "ids and labels (integer tensors)",
             failure();
    ids.push_back(arg);
  }

  // 2. The loss: a gptc.cross_entropy whose labels are an input.
  SmallVector<CrossEntropyOp> losses;
  func.walk([&](CrossEntropyOp op) { losses.push_back(op); });
  if (losses.size() > 1)
    return emitError(losses[1].getLoc(),
                     "the graph computes more than one cross-entropy loss; "
                     "gptc trains on one"),
           failure();
  OpBuilder b(func.getContext());
  BlockArgument tokens, labels;
  Value loss;
  if (losses.size() == 1) {
    CrossEntropyOp ce = losses.front();
    labels = argumentBehindReshapes(ce.getLabels());
    if (!labels || !llvm::is_contained(ids, labels))
      return emitError(ce.getLoc(), "the cross-entropy's labels are not a "
                                    "graph input (computed labels are not "
                                    "supported)"),
             failure();
    if (ids.size() != 2)
      return emitError(loc, "the graph has ")
                 << ids.size()
                 << " integer inputs; gptc trains a graph with two: the "
                    "token ids and the labels",
             failure();
    tokens = ids[0] == labels ? ids[1] : ids[0];
    loss = ce.getLoss();
    if (cast<RankedTensorType>(loss.getType()).getRank() != 0)
      return emitError(ce.getLoc(), "the cross-entropy loss is not a scalar"),
             failure();
    if (!llvm::is_contained(ret.getOperands(), loss))
      return emitError(ce.getLoc(), "the cross-entropy loss is not a graph "
                                    "output"),
             failure();
  } else {
    // No loss in the graph: the logits output gets one.
    if (ids.size() != 1)
      return emitError(loc, "the graph computes no cross-entropy loss and has ")
                 << ids.size()
                 << " integer inputs; gptc adds the loss to a graph of one "
                    "input (the token ids) and a logits output",
             failure();
    tokens = ids[0];
    auto tokType = cast<RankedTensorType>(tokens.getType());
    Value logits;
    for (Value out : ret.getOperands()) {
      auto type = dyn_cast<RankedTensorType>(out.getType());
      if (type && type.getRank() == tokType.getRank() + 1 &&
          type.getShape().drop_back() == tokType.getShape() &&
          isa<FloatType>(type.getElementType())) {
        logits = out;
        break;
      }
    }
    if (!logits)
      return emitError(loc, "the graph computes no cross-entropy loss and "
                            "no output is logits for its token ids (")
                 << tokType << " ids, an output of their shape x vocabulary)",
             failure();
    unsigned at = func.getNumArguments();
    if (failed(func.insertArgument(at, tokType, {}, loc)))
      return failure();
    labels = body.getArgument(at);
    b.setInsertionPoint(ret);
    loss = CrossEntropyOp::create(b, loc, logits, labels, Value(),
                                  b.getI64IntegerAttr(kPaddingLabel));
  }
  auto tokType = cast<RankedTensorType>(tokens.getType());
  if (tokType.getRank() != 2 || labels.getType() != tokens.getType())
    return emitError(loc, "the token ids ('")
               << inputName(tokens) << "', " << tokType
               << ") and the labels must both be batch x sequence tensors of "
                  "one shape",
           failure();
  // The loss reads the labels input itself, over B x T x V logits (the
  // data-parallel pass weights each rank's loss by the labels it holds):
  // PyTorch's `cross_entropy(logits.view(-1, V), targets.view(-1))`
  // flattens both.
  if (auto ce = loss.getDefiningOp<CrossEntropyOp>();
      ce && ce.getLabels() != labels && !ce.getNormalizer()) {
    auto logitsType = cast<RankedTensorType>(ce.getLogits().getType());
    auto labelsType = cast<RankedTensorType>(ce.getLabels().getType());
    if (logitsType.getRank() != labelsType.getRank() + 1 ||
        labelsType.getNumElements() != tokType.getNumElements())
      return emitError(ce.getLoc(), "the cross-entropy's logits (")
                 << logitsType << ") do not hold one row per label",
             failure();
    b.setInsertionPoint(ce);
    SmallVector<int64_t> shape(tokType.getShape());
    shape.push_back(logitsType.getShape().back());
    auto type = RankedTensorType::get(shape, logitsType.getElementType());
    Value logits = ce.getLogits();
    while (auto r = logits.getDefiningOp<ReshapeOp>())
      logits = r.getInput();
    if (logits.getType() != type)
      logits = ReshapeOp::create(b, ce.getLoc(), type, ce.getLogits());
    auto flat = CrossEntropyOp::create(b, ce.getLoc(), logits, labels, Value(),
                                       ce.getIgnoreIndexAttr());
    ce.getLoss().replaceAllUsesWith(flat.getLoss());
    loss = flat.getLoss();
    ce.erase();
  }

  // 3. The loss is the only result.
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), loss);
  ret.erase();
  onnx_detail::eraseDeadOps(body);
  func.setFunctionType(
      b.getFunctionType(body.getArgumentTypes(), TypeRange{loss.getType()}));
  func.setAllResultAttrs(ArrayRef<DictionaryAttr>{});

  // 4. The arguments: the parameters still read, then tokens and labels.
  unsigned numParams = imported.parameters.size();
  llvm::BitVector erase(body.getNumArguments());
  std::vector<OnnxTensorData> kept;
  for (unsigned i = 0; i < body.getNumArguments(); ++i) {
    BlockArgument arg = body.getArgument(i);
    if (i < numParams) {
      if (arg.use_empty())
        erase.set(i);
      else
        kept.push_back(std::move(imported.parameters[i]));
    } else if (arg != tokens && arg != labels) {
      erase.set(i); // an input only the dropped outputs read
      if (!arg.use_empty())
        return emitError(loc, "graph input '")
                   << inputName(arg) << "' is read by the loss, but is "
                   << "neither its token ids nor its labels",
               failure();
    }
  }
  if (failed(func.eraseArguments(erase)))
    return failure();
  imported.parameters = std::move(kept);
  // Tokens before labels.
  if (tokens.getArgNumber() > labels.getArgNumber()) {
    unsigned t = tokens.getArgNumber();
    if (failed(func.insertArgument(t + 1, labels.getType(), {}, loc)))
      return failure();
    labels.replaceAllUsesWith(body.getArgument(t + 1));
    if (failed(func.eraseArgument(labels.getArgNumber())))
      return failure();
    labels = body.getArgument(t);
    tokens = body.getArgument(t - 1);
  }
  func.setArgAttrs(
      tokens.getArgNumber(),
      b.getDictionaryAttr(b.getNamedAttr(
          kInputAttrName, InputAttr::get(b.getContext(), InputKind::Tokens))));
  func.setArgAttrs(
      labels.getArgNumber(),
      b.getDictionaryAttr(b.getNamedAttr(
          kInputAttrName, InputAttr::get(b.getContext(), InputKind::Labels))));

  // 5. Embedding tables.
  func.walk([&](EmbeddingOp op) {
    if (auto table = dyn_cast<BlockArgument>(op.getTable()))
      if (func.getArgAttr(table.getArgNumber(), kParamAttrName))
        func.setArgAttr(table.getArgNumber(), kEmbeddingTableAttrName,
                        b.getUnitAttr());
  });

  OnnxTrainingShape shape;
  shape.batch = tokType.getDimSize(0);
  shape.seqLen = tokType.getDimSize(1);
  func.walk([&](CrossEntropyOp op) {
    shape.vocab =
        cast<RankedTensorType>(op.getLogits().getType()).getShape().back();
  });
  for (unsigned i = 0; i < imported.parameters.size(); ++i)
    shape.numParams +=
        cast<RankedTensorType>(body.getArgument(i).getType()).getNumElements();
  // 6. The architecture of the raised blocks, and where each starts.
  shape.locatedLayers = locateBlocks(func, tokens);
  func.walk([&](CausalAttentionOp op) {
    ++shape.numLayers;
    shape.numHeads = op.getNumHeads();
    shape.modelDim = op.getQuery().getType().getShape().back();
  });
  func.walk([&](GeluOp op) {
    if (!shape.mlpDim)
      shape.mlpDim = cast<RankedTensorType>(op.getType()).getShape().back();
  });
  func.walk([&](LinearOp op) {
    shape.bias |= static_cast<bool>(op.getBias());
    if (auto w = dyn_cast<BlockArgument>(op.getWeight()))
      shape.tiedEmbeddings |= static_cast<bool>(
          func.getArgAttr(w.getArgNumber(), kEmbeddingTableAttrName));
  });
  return shape;
}

FailureOr<OnnxImport> mlir::gptc::importOnnxFileForTraining(
    llvm::StringRef path, MLIRContext *context,
    const OnnxImportOptions &options, OnnxTrainingShape &shape) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openBoundedInput(path, kMaxOnnxBytes, "ONNX model", error);
  if (!input)
    return emitError(FileLineColLoc::get(context, path, 0, 0), error),
           failure();
  FailureOr<OnnxImport> imported =
      importOnnxModel(input->getBuffer(), path, context, options);
  if (failed(imported))
    return failure();
  FailureOr<OnnxTrainingShape> s = prepareOnnxForTraining(*imported);
  if (failed(s))
    return failure();
  shape = *s;
  return imported;
}

OwningOpRef<ModuleOp>
mlir::gptc::importOnnxLogits(llvm::StringRef path, MLIRContext *context,
                             const OnnxImportOptions &options) {
  OnnxTrainingShape shape;
  FailureOr<OnnxImport> imported =
      importOnnxFileForTraining(path, context, options, shape);
  if (failed(imported))
    return nullptr;
  ModuleOp module = *imported->module;
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  CrossEntropyOp loss;
  func.walk([&](CrossEntropyOp op) { loss = op; });
  if (!loss || loss.getLoss() != ret.getOperand(0))
    return emitError(func.getLoc(),
                     "the graph's loss is not a cross-entropy of its logits "
                     "alone, so gptc cannot read the logits to sample from"),
           nullptr;
  Value logits = loss.getLogits();
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret.getLoc(), logits);
  ret.erase();
  onnx_detail::eraseDeadOps(body);
  // The labels are read by nothing now.
  llvm::BitVector erase(body.getNumArguments());
  for (BlockArgument arg : body.getArguments())
    if (auto input = func.getArgAttrOfType<InputAttr>(arg.getArgNumber(),
                                                      kInputAttrName);
        input && input.getKind() == InputKind::Labels && arg.use_empty())
      erase.set(arg.getArgNumber());
  if (failed(func.eraseArguments(erase)))
    return nullptr;
  func.setFunctionType(
      b.getFunctionType(body.getArgumentTypes(), TypeRange{logits.getType()}));
  func.setSymName("logits");
  return std::move(imported->module);
}

FailureOr<std::string> mlir::gptc::onnxTrainingDescription(
    llvm::StringRef path, const OnnxTrainingShape &shape,
    const DescriptionOverrides &overrides, std::string &error) {
  int64_t dataParallel = 1;
  if (overrides.mesh)
    for (const MeshAxis &axis : *overrides.mesh)
      if (axis.kind == MeshAxis::Kind::Data)
        dataParallel = axis.size;
  int64_t accumulation = overrides.accumulation.value_or(1);
  int64_t batch;
  if (__builtin_mul_overflow(shape.batch, dataParallel, &batch) ||
      __builtin_mul_overflow(batch, accumulation, &batch)) {
    error = "the batch (the graph's " + std::to_string(shape.batch) +
            " sequences x data parallel x accumulation) overflows 64 bits";
    return failure();
  }
  llvm::SmallString<256> absolute(path);
  (void)llvm::sys::fs::make_absolute(absolute);
  std::string name;
  for (char c : llvm::sys::path::stem(path))
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'
                ? c
                : '_';
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# gptc train " << llvm::sys::path::filename(path)
     << ": the ONNX graph is the model; gptc's default training settings "
        "and the command line's\n"
     << "name: \"" << (name.empty() ? "onnx" : name) << "\"\n"
     << "onnx_model: \"";
  for (char c : absolute)
    os << (c == '"' || c == '\\' ? "\\" : "") << c;
  os << "\"\ntraining {\n  batch_size: " << batch
     << "\n  seq_len: " << shape.seqLen << "\n}\n";
  return text;
}

LogicalResult
mlir::gptc::checkOnnxTrainingShape(const ModelDescription &desc,
                                   const OnnxTrainingShape &shape) {
  const ModelConfig &m = desc.getConfig();
  if (m.seqLen != shape.seqLen)
    return emitError(desc.locate({{"training"}, {"seq_len"}}))
           << "seq_len is " << m.seqLen
           << ", but the ONNX graph's token input holds sequences of "
           << shape.seqLen;
  int64_t slots = m.dataParallel * m.gradAccumSteps;
  if (m.batchSize != shape.batch * slots)
    return emitError(desc.locate({{"training"}, {"batch_size"}}))
           << "the ONNX graph takes " << shape.batch
           << " sequences per rank and micro-step, so batch_size must be "
           << shape.batch << " x " << m.dataParallel << " (data parallel) x "
           << m.gradAccumSteps << " (accumulation) = " << shape.batch * slots
           << ", not " << m.batchSize;
  if (m.pipelineParallel > 1) {
    Location mesh = desc.locate({{"mesh"}});
    if (shape.numLayers == 0)
      return emitError(mesh)
             << "an ONNX model trains on a pipeline when its blocks are "
                "raised to gptc's ops (the stages are cut between them), and "
                "none of this graph's was (docs/Onnx.md, \"What training "
                "raises\")";
    if (shape.locatedLayers == 0)
      return emitError(mesh)
             << "this ONNX model's " << shape.numLayers
             << " raised blocks are not a chain of residual steps (a block "
                "reads a value of a later one), so gptc cannot cut it into "
                "pipeline stages";
    if (shape.numLayers < m.pipelineParallel)
      return emitError(mesh) << "pipeline size " << m.pipelineParallel
                             << " exceeds the ONNX model's " << shape.numLayers
                             << " blocks: every stage needs a block";
  }
  return success();
}

LogicalResult mlir::gptc::resolveOnnxModel(ModelDescription &desc,
                                           MLIRContext *context,
                                           const OnnxImportOptions &options,
                                           std::optional<OnnxImport> &onnx,
                                           OnnxTrainingShape &shape) {
  std::string path = desc.getOnnxModelPath();
  if (path.empty())
    return success();
  if (!onnx) {
    if (!llvm::sys::fs::exists(path))
      return emitError(desc.locate({{"onnx_model"}}))
             << "cannot open the ONNX model '" << path << "'";
    FailureOr<OnnxImport> imported =
        importOnnxFileForTraining(path, context, options, shape);
    if (failed(imported))
      return failure();
    onnx = std::move(*imported);
  }
  if (failed(checkOnnxTrainingShape(desc, shape)))
    return failure();
  desc.setImportedModel(shape.vocab, shape.seqLen);
  if (shape.numLayers > 0)
    desc.setImportedArchitecture(shape.numLayers, shape.numHeads,
                                 shape.modelDim, shape.mlpDim,
                                 shape.tiedEmbeddings, shape.bias);
  return success();
}

OwningOpRef<ModuleOp> mlir::gptc::buildTrainingModule(
    const ModelDescription &desc, MLIRContext *context,
    std::optional<OnnxImport> &onnx,
    std::map<std::string, std::string> &initialValues) {
  if (!onnx)
    return importModel(desc, context);
  OwningOpRef<ModuleOp> module = std::move(onnx->module);
  setTrainingAttributes(*module, desc);
  for (OnnxTensorData &p : onnx->parameters)
    initialValues[p.name] = std::move(p.bytes);
  onnx.reset();
  return module;
}
