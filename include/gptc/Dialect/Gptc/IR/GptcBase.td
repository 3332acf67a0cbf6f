//===- GptcBase.td - gptc dialect definition ---------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The `gptc` dialect: tensor-level operations of a GPT-2-style decoder.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCBASE_TD
#define GPTC_DIALECT_GPTC_IR_GPTCBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Gptc_Dialect : Dialect {
  let name = "gptc";
  let cppNamespace = "::mlir::gptc";
  let summary = "Tensor-level operations of a GPT-style decoder";
  let description = [{
    The `gptc` dialect holds the operations a GPT-2-style decoder is built
    from: token and position embedding, linear layers, layer norm, GELU,
    causal multi-head attention, softmax, residual add and the cross-entropy
    loss, plus the data-movement ops the graph needs (reshape, transpose,
    split, constants, casts).

    All tensors have static shapes: gptc compiles a training step for one
    fixed microbatch shape, as XLA does. Floating-point operands may be
    `f32`, `bf16`, `f16` or `f64` (the last for finite-difference checks);
    token ids and positions are signless integers.

    A model module holds `func.func @forward` (parameters marked
    `gptc.param`, then the `tokens` and `labels` inputs, returning the loss;
    checked by `gptc-verify-model`). It carries `gptc.precision` and, when the
    description has a mesh, a `shard.grid @mesh` with the axis roles in
    `gptc.parallel`; see `docs/ModelDescription.md`.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;

  // The attributes gptc's passes put on ops, functions and their arguments
  // and results: one name for each (`gptc.<name>`), read and written
  // through the generated helpers (`GptcDialect::ParamAttrHelper`, ...).
  let discardableAttrs = (ins
    // Function arguments and results: what each holds for the caller.
    "::mlir::StringAttr":$param,
    "::mlir::gptc::InputAttr":$input,
    "::mlir::gptc::OutputAttr":$output,
    "::mlir::gptc::StateAttr":$state,
    "::mlir::StringAttr":$grad,
    "::mlir::gptc::InitAttr":$init,
    "::mlir::UnitAttr":$embedding_table,
    "::mlir::DictionaryAttr":$batch,
    "::mlir::DictionaryAttr":$sharding,
    // The module's configuration.
    "::mlir::gptc::PrecisionAttr":$precision,
    "::mlir::gptc::OptimizerAttr":$optimizer,
    "::mlir::gptc::ParallelAttr":$parallel,
    "::mlir::gptc::RecomputeAttr":$recompute,
    // skip: a step whose gradients are not finite is not applied.
    "::mlir::gptc::NanPolicyAttr":$nan_policy,
    "::mlir::StringAttr":$plan,
    // Op annotations.
    "::mlir::gptc::TensorParallelAttr":$tensor_parallel,
    "::mlir::IntegerAttr":$vocab_size,
    "::mlir::UnitAttr":$rematerialize,
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::IntegerAttr":$arena_bytes,
    // Pipelines (gptc-pipeline-split, gptc-pipeline-schedule): a chunk's
    // incoming boundary value, a stage function's stage, and on its calls,
    // sends and receives the microbatch, the chunk and whether a message
    // is a gradient.
    "::mlir::IntegerAttr":$pipeline_in,
    "::mlir::IntegerAttr":$pipeline_stage,
    "::mlir::IntegerAttr":$microbatch,
    "::mlir::IntegerAttr":$chunk,
    "::mlir::UnitAttr":$gradient,
    // gptc-model-stats' results on @forward.
    "::mlir::IntegerAttr":$num_params,
    "::mlir::IntegerAttr":$forward_flops,
    "::mlir::IntegerAttr":$tokens
  );
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Gptc_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Gptc_IndexTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def Gptc_AnyTensor : StaticShapeTensorOf<[AnyType]>;

/// Rank-0 tensors: the scalars of the optimizer (loss, norms, rates, step).
def Gptc_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
def Gptc_I32Scalar : 0DTensorOf<[I32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getIntegerType(32))">;

#endif // GPTC_DIALECT_GPTC_IR_GPTCBASE_TD
