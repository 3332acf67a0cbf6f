//===- GptcDialect.h - gptc dialect --------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H
#define GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace mlir {
class AsmParser;
} // namespace mlir

namespace mlir::gptc {
/// Parsers of the attribute parameters GptcAttrs.td declares.
FailureOr<llvm::APFloat> parseF64Parameter(AsmParser &parser);
FailureOr<bool> parseBoolParameter(AsmParser &parser);
} // namespace mlir::gptc

#include "gptc/Dialect/Gptc/IR/GptcEnums.h.inc"

namespace mlir {
class AsmPrinter;
} // namespace mlir

namespace mlir::gptc {
/// `["data", "tensor", ...]`: #gptc.parallel's axis kinds.
FailureOr<SmallVector<MeshAxisKind>> parseAxisKinds(AsmParser &parser);
void printAxisKinds(AsmPrinter &printer, ArrayRef<MeshAxisKind> kinds);
} // namespace mlir::gptc

#define GET_ATTRDEF_CLASSES
#include "gptc/Dialect/Gptc/IR/GptcAttrs.h.inc"

#include "gptc/Dialect/Gptc/IR/GptcOpsDialect.h.inc"

namespace mlir::gptc {

// The names of the dialect's discardable attributes, declared in
// GptcBase.td (`discardableAttrs`); use these, never a string literal.
/// Argument attribute naming a parameter (`"h.0.attn.c_attn.weight"`).
inline constexpr llvm::StringLiteral kParamAttrName =
    GptcDialect::ParamAttrHelper::getNameStr();
/// Argument attribute naming a data input (`"tokens"`, `"labels"`).
inline constexpr llvm::StringLiteral kInputAttrName =
    GptcDialect::InputAttrHelper::getNameStr();
/// Result attribute naming what a result holds (`"loss"`, `"grad_norm"`).
inline constexpr llvm::StringLiteral kOutputAttrName =
    GptcDialect::OutputAttrHelper::getNameStr();
/// Argument and result attribute of @train_step: the training state it holds
/// (a parameter, `"m:<name>"`, `"v:<name>"`, the loss scaler's).
inline constexpr llvm::StringLiteral kStateAttrName =
    GptcDialect::StateAttrHelper::getNameStr();
/// Result attribute of @forward_backward: the parameter a gradient is for.
inline constexpr llvm::StringLiteral kGradAttrName =
    GptcDialect::GradAttrHelper::getNameStr();
/// Argument attribute describing a parameter's initializer.
inline constexpr llvm::StringLiteral kInitAttrName =
    GptcDialect::InitAttrHelper::getNameStr();
/// Argument attribute marking the token embedding (weight decay may skip it).
inline constexpr llvm::StringLiteral kEmbeddingTableAttrName =
    GptcDialect::EmbeddingTableAttrHelper::getNameStr();
/// Argument attribute of a data input: how the step's rows are laid out.
inline constexpr llvm::StringLiteral kBatchAttrName =
    GptcDialect::BatchAttrHelper::getNameStr();
/// Argument and result attribute: the value is this rank's block of a
/// tensor of `shape`, dimension d split over the grid axes `axes[d]`.
inline constexpr llvm::StringLiteral kShardingAttrName =
    GptcDialect::ShardingAttrHelper::getNameStr();
/// Module attribute: the description's precision, "fp32", "bf16" or "fp16".
inline constexpr llvm::StringLiteral kPrecisionAttrName =
    GptcDialect::PrecisionAttrHelper::getNameStr();
/// Module attribute: the training settings (`#gptc.optimizer<...>`).
inline constexpr llvm::StringLiteral kOptimizerAttrName =
    GptcDialect::OptimizerAttrHelper::getNameStr();
/// Module attribute: the mesh axes' roles (`#gptc.parallel<...>`).
inline constexpr llvm::StringLiteral kParallelAttrName =
    GptcDialect::ParallelAttrHelper::getNameStr();
/// Module attribute: the activation recomputation gptc-recompute applies
/// (`#gptc.recompute<...>`).
inline constexpr llvm::StringLiteral kRecomputeAttrName =
    GptcDialect::RecomputeAttrHelper::getNameStr();
/// Attribute of a `gptc.linear` or `gptc.embedding`: "column", "row" or
/// "vocab", how tensor parallelism splits it (written by
/// gptc-sharding-propagation, read by gptc-tensor-parallel).
inline constexpr llvm::StringLiteral kTensorParallelAttrName =
    GptcDialect::TensorParallelAttrHelper::getNameStr();
/// Attribute of the LM head: the real vocabulary size (before padding).
inline constexpr llvm::StringLiteral kVocabSizeAttrName =
    GptcDialect::VocabSizeAttrHelper::getNameStr();
/// Attribute of an op computed again instead of kept (ZeRO-3's second
/// gather, gptc-recompute's clones): CSE keeps it apart from the first.
inline constexpr llvm::StringLiteral kRematerializeAttrName =
    GptcDialect::RematerializeAttrHelper::getNameStr();
/// Attribute of an op: its results' byte offsets in the arena.
inline constexpr llvm::StringLiteral kOffsetsAttrName =
    GptcDialect::OffsetsAttrHelper::getNameStr();
/// Attribute of a function or region: the bytes of its arena.
inline constexpr llvm::StringLiteral kArenaBytesAttrName =
    GptcDialect::ArenaBytesAttrHelper::getNameStr();
/// Argument attribute of a pipeline chunk: the index of the boundary value
/// it receives from the previous chunk.
inline constexpr llvm::StringLiteral kPipelineInAttrName =
    GptcDialect::PipelineInAttrHelper::getNameStr();
/// Attribute of a pipeline stage's function (`@stage<s>`): its stage.
inline constexpr llvm::StringLiteral kPipelineStageAttrName =
    GptcDialect::PipelineStageAttrHelper::getNameStr();
/// Attribute of a stage's calls, sends and receives (and of its data
/// arguments): the microbatch.
inline constexpr llvm::StringLiteral kMicrobatchAttrName =
    GptcDialect::MicrobatchAttrHelper::getNameStr();
/// Attribute of a stage's sends and receives: the chunk that consumes the
/// message (whose input, or whose output's gradient, it is).
inline constexpr llvm::StringLiteral kChunkAttrName =
    GptcDialect::ChunkAttrHelper::getNameStr();
/// Attribute of a stage's sends and receives of gradients.
inline constexpr llvm::StringLiteral kGradientAttrName =
    GptcDialect::GradientAttrHelper::getNameStr();
/// gptc-model-stats' results on @forward.
inline constexpr llvm::StringLiteral kNumParamsAttrName =
    GptcDialect::NumParamsAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kForwardFlopsAttrName =
    GptcDialect::ForwardFlopsAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kTokensAttrName =
    GptcDialect::TokensAttrHelper::getNameStr();

/// The module's training settings (`gptc.optimizer`), or null.
OptimizerAttr getOptimizerConfig(Operation *module);
/// The roles of the module's mesh axes (`gptc.parallel`), or null when the
/// module runs on one device.
ParallelAttr getParallelConfig(Operation *module);
/// The module's precision (`gptc.precision`); fp32 without one.
Precision getPrecision(Operation *module);

} // namespace mlir::gptc

#endif // GPTC_DIALECT_GPTC_IR_GPTCDIALECT_H
