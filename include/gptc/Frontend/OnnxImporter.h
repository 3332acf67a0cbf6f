//===- OnnxImporter.h - ONNX models to gptc IR -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc as a backend for other frontends: an ONNX model (opsets 13-23)
// becomes a gptc module whose function computes the graph's outputs from
// its inputs and its initializers (docs/Onnx.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_ONNXIMPORTER_H
#define GPTC_FRONTEND_ONNXIMPORTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gptc {

class ModelDescription;
struct DescriptionOverrides;

/// A tensor's data as ONNX stores it: `onnxType` is ONNX's
/// TensorProto.DataType (1 FLOAT, 7 INT64, ...), `bytes` the elements in
/// row-major order, little-endian, at their natural width (a bool a byte).
struct OnnxTensorData {
  std::string name;
  int32_t onnxType = 0;
  std::vector<int64_t> shape;
  std::string bytes;

  int64_t numElements() const;
};

struct OnnxImportOptions {
  /// Values of symbolic dimensions (`dim_param`), by name: {"batch", 4}.
  std::map<std::string, int64_t> dims;
  /// Graph inputs bound to values at import: they are constants, not
  /// arguments (shape operands, masks; the node tests bind their integer
  /// inputs this way).
  std::map<std::string, OnnxTensorData> knownInputs;
  /// Training raises the exported layers to gptc's fused ops
  /// (raiseGptPatterns); false keeps ONNX's primitives (`--onnx-raise=0`:
  /// to compare, or to get past a wrong raise).
  bool raiseLayers = true;
  /// The function's name.
  std::string functionName = "forward";
  /// Whether a tensor whose data lives in an external file (ONNX's
  /// external data: `location`, `offset`, `length`, relative to the
  /// model's directory) is read from it. Off where the bytes come from no
  /// file (the fuzzer).
  bool readExternalData = true;
};

/// What importOnnxModel produces.
struct OnnxImport {
  OwningOpRef<ModuleOp> module;
  /// One per function argument marked `gptc.param`, in argument order: the
  /// initializer's data (the parameters' values).
  std::vector<OnnxTensorData> parameters;
  /// A model torch.onnx.export (dynamo) wrote names the module's parameters
  /// in its graph signature: then only those initializers are parameters
  /// (the rest, constants its optimizer folded: scales, masks, shapes, are
  /// constants), and these are the module's parameters the graph no longer
  /// holds as initializers (the optimizer folded them into constants: a
  /// zero bias dropped, a position table gathered, identical initializers
  /// merged, a weight transposed). Training warns about them.
  std::vector<std::string> foldedParameters;
  /// OnnxImportOptions::raiseLayers, for prepareOnnxForTraining.
  bool raiseLayers = true;
};

/// Imports the serialized ONNX ModelProto in `bytes` (named `fileName` in
/// locations): one function `@<functionName>`
///
///   func.func @forward(<params>..., <inputs>...) -> <outputs>...
///
/// whose parameters are the initializers the graph computes with (float,
/// `gptc.param = "<initializer name>"`), inputs the graph's inputs
/// (`gptc.input`) and results its outputs (`gptc.output`). Integer inputs
/// (token ids, indices) become i32, gptc's id type. Shape arithmetic on
/// constants (Shape, Gather, Concat, ...) is evaluated here. Each op is
/// located at its node: `loc("<node name>"("<file>":<node index>:0))`.
/// Tensors with external data are read from files beside `fileName`.
/// Errors (malformed file, unsupported op or type, dynamic dimension,
/// inconsistent shape) are emitted at the node and give failure.
FailureOr<OnnxImport> importOnnxModel(llvm::StringRef bytes,
                                      llvm::StringRef fileName,
                                      MLIRContext *context,
                                      const OnnxImportOptions &options = {});

/// The sizes an imported language model trains with: its graph's batch
/// (the micro-batch of each rank), sequence length and vocabulary.
struct OnnxTrainingShape {
  int64_t batch = 0;
  int64_t seqLen = 0;
  int64_t vocab = 0;
  /// The architecture read from the raised graph (0 layers when no block
  /// was raised): blocks (causal attentions), heads, width, the MLP's
  /// hidden size, whether the head reads the token table and whether the
  /// linears have biases. --emit=summary sizes the model with it.
  int64_t numLayers = 0, numHeads = 0, modelDim = 0, mlpDim = 0;
  bool tiedEmbeddings = false, bias = false;
  /// The blocks whose ops are located at them (`loc("h.<i>"(...))`, as
  /// gptc's own GPTs'): numLayers, or 0 where the raised blocks are not a
  /// chain of residual steps. Pipeline stages and full recomputation cut
  /// the graph there.
  int64_t locatedLayers = 0;
  /// The parameters' elements (what the architecture's formula must give
  /// for the planner and --emit=summary to size the model by it).
  int64_t numParams = 0;
};

/// Rewrites the imported @forward into gptc's training convention
/// (gptc-verify-model; docs/Onnx.md, "Training"): the integer input that
/// reaches gptc.cross_entropy's labels becomes 'labels', the other integer
/// input 'tokens'; a graph with only token ids and a logits output gets the
/// loss added (with a new 'labels' input); the loss is the only result;
/// parameters nothing reads any more are dropped (from `parameters` too);
/// the tables gptc.embedding reads are marked as embedding tables. Errors
/// say why a graph is not a language model gptc can train.
FailureOr<OnnxTrainingShape> prepareOnnxForTraining(OnnxImport &imported);

/// What raiseGptPatterns rewrote.
struct OnnxRaiseCounts {
  int64_t linear = 0, gelu = 0, attention = 0, layerNorm = 0;
};

/// Raises an exported transformer's primitives to gptc's ops (docs/Onnx.md,
/// "What training raises"): matmul with a transposed weight and a broadcast
/// bias to gptc.linear, the tanh GELU's elementwise ops to gptc.gelu, and
/// masked scaled attention over heads to gptc.causal_attention, a layer norm
/// decomposed into reductions (opsets before 17) to gptc.layer_norm. A pattern
/// that does not match exactly (constants, shapes, the causal mask) is left.
OnnxRaiseCounts raiseGptPatterns(func::FuncOp func);

/// Reads the ONNX model at `path`, imports it and prepares it for training;
/// errors are emitted through `context`.
FailureOr<OnnxImport>
importOnnxFileForTraining(llvm::StringRef path, MLIRContext *context,
                          const OnnxImportOptions &options,
                          OnnxTrainingShape &shape);

/// What gptc sample compiles for an ONNX model: the graph as training
/// imports it (so that its parameters are the checkpoint's), as
/// `@logits(<params>..., tokens) -> logits` (B x T x V: the logits its loss
/// reads; B and T the graph's). Null after an error through `context`.
OwningOpRef<ModuleOp> importOnnxLogits(llvm::StringRef path,
                                       MLIRContext *context,
                                       const OnnxImportOptions &options);

/// The description `gptc train MODEL.onnx` trains with: the graph named by
/// its absolute path, a batch of the graph's rows x the data-parallel size
/// and accumulation `overrides` ask for, the graph's sequence, gptc's
/// defaults for the rest (the overrides then replace them as for any
/// description).
FailureOr<std::string>
onnxTrainingDescription(llvm::StringRef path, const OnnxTrainingShape &shape,
                        const DescriptionOverrides &overrides,
                        std::string &error);

/// The description's sizes against the graph, which fixes them (its token
/// input is one rank's micro-batch) and a pipeline mesh against its located
/// blocks, as errors at the fields.
LogicalResult checkOnnxTrainingShape(const ModelDescription &desc,
                                     const OnnxTrainingShape &shape);

/// For a description that names an ONNX model (`onnx_model`): imports it
/// into `onnx`, unless `onnx` holds it already (gptc train MODEL.onnx
/// imported it to write the description), checks the description's sizes
/// against the graph and gives the description the graph's vocabulary,
/// context and (where blocks were raised) architecture; errors at the
/// description's fields. Nothing to do for gptc's
/// own GPTs.
LogicalResult resolveOnnxModel(ModelDescription &desc, MLIRContext *context,
                               const OnnxImportOptions &options,
                               std::optional<OnnxImport> &onnx,
                               OnnxTrainingShape &shape);

/// The module gptc train compiles for `desc`: the resolved ONNX graph (taken
/// from `onnx`) with the description's training settings, its initializers
/// into `initialValues` (by parameter name); or gptc's own GPT
/// (importModel). Null on error.
OwningOpRef<ModuleOp>
buildTrainingModule(const ModelDescription &desc, MLIRContext *context,
                    std::optional<OnnxImport> &onnx,
                    std::map<std::string, std::string> &initialValues);

/// Parses a serialized TensorProto (the `.pb` files of ONNX's test data).
bool parseOnnxTensor(llvm::StringRef bytes, OnnxTensorData &tensor,
                     std::string &error);

/// Parses NAME=N (a command line's --onnx-dim) into `options.dims`.
bool parseOnnxDim(llvm::StringRef text, OnnxImportOptions &options,
                  std::string &error);

/// The op types importOnnxModel converts, sorted.
std::vector<std::string> supportedOnnxOps();

/// Registers the dialects the imported module uses.
void registerOnnxImporterDialects(DialectRegistry &registry);

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_ONNXIMPORTER_H
