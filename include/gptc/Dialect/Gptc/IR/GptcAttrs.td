//===- GptcAttrs.td - gptc attributes ----------------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The module's configuration as typed attributes: `#gptc.optimizer<...>`
// (the training settings gptc-optimizer turns into ops) and
// `#gptc.parallel<...>` (the roles of the mesh's axes). Each verifies its
// own values, so a malformed configuration is an error where it is written,
// not in the pass that reads it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCATTRS_TD
#define GPTC_DIALECT_GPTC_IR_GPTCATTRS_TD

include "gptc/Dialect/Gptc/IR/GptcBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Elementwise functions
//===----------------------------------------------------------------------===//

def Gptc_UnaryFn : I32EnumAttr<"UnaryFn", "an elementwise function of one tensor", [
    I32EnumAttrCase<"neg", 0>, I32EnumAttrCase<"sqrt", 1>,
    I32EnumAttrCase<"exp", 2>, I32EnumAttrCase<"log", 3>,
    I32EnumAttrCase<"tanh", 4>, I32EnumAttrCase<"erf", 5>,
    I32EnumAttrCase<"reciprocal", 6>, I32EnumAttrCase<"relu", 7>,
    I32EnumAttrCase<"sigmoid", 8>, I32EnumAttrCase<"abs", 9>,
    I32EnumAttrCase<"step", 10>, I32EnumAttrCase<"sign", 11>]> {
  let cppNamespace = "::mlir::gptc";
}

def Gptc_BinaryFn : I32EnumAttr<"BinaryFn", "an elementwise function of two tensors", [
    I32EnumAttrCase<"sub", 0>, I32EnumAttrCase<"mul", 1>,
    I32EnumAttrCase<"div", 2>, I32EnumAttrCase<"pow", 3>,
    // rhs where lhs is not NaN, else 0: the NaN guard exporters write
    // after a softmax (Where(IsNaN(p), 0, p) is `unless_nan p, p`).
    I32EnumAttrCase<"unless_nan", 4>]> {
  let cppNamespace = "::mlir::gptc";
}

//===----------------------------------------------------------------------===//
// The module's configuration
//===----------------------------------------------------------------------===//

def Gptc_MeshAxisKind : I32EnumAttr<"MeshAxisKind", "the role of a mesh axis", [
    I32EnumAttrCase<"Data", 0, "data">, I32EnumAttrCase<"Tensor", 1, "tensor">,
    I32EnumAttrCase<"Pipeline", 2, "pipeline">,
    I32EnumAttrCase<"Context", 3, "context">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

/// The mesh axes' kinds, written as a list of strings (`["data",
/// "tensor"]`) and held as MeshAxisKind values: a kind that is none of
/// them does not parse.
def Gptc_AxisKindsParameter
    : ArrayRefParameter<"::mlir::gptc::MeshAxisKind", "the axes' kinds"> {
  let parser = [{ ::mlir::gptc::parseAxisKinds($_parser) }];
  let printer = [{ ::mlir::gptc::printAxisKinds($_printer, $_self) }];
}

def Gptc_LrDecay : I32EnumAttr<"LrDecay",
    "the learning rate's decay after its warm-up", [
    I32EnumAttrCase<"Cosine", 0, "cosine">,
    I32EnumAttrCase<"Linear", 1, "linear">,
    I32EnumAttrCase<"Constant", 2, "constant">]> {
  let cppNamespace = "::mlir::gptc";
}

def Gptc_Precision : I32EnumAttr<"Precision",
    "the arithmetic of the step's products and activations", [
    I32EnumAttrCase<"FP32", 0, "fp32">, I32EnumAttrCase<"BF16", 1, "bf16">,
    I32EnumAttrCase<"FP16", 2, "fp16">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_PrecisionAttr : EnumAttr<Gptc_Dialect, Gptc_Precision, "precision"> {
  let summary = "The training step's precision (`gptc.precision`)";
  let description = [{
    fp32, or mixed precision with fp32 master weights: bf16 or fp16 (with
    dynamic loss scaling) products and activations
    (`gptc-mixed-precision`, `gptc-autodiff`, `gptc-optimizer`):
    `gptc.precision = #gptc.precision<bf16>`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Gptc_Recompute : I32EnumAttr<"Recompute",
    "the activations the backward recomputes", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Selective", 1, "selective">,
    I32EnumAttrCase<"Full", 2, "full">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_RecomputeAttr : EnumAttr<Gptc_Dialect, Gptc_Recompute, "recompute"> {
  let summary = "Activation recomputation (`gptc.recompute`)";
  let description = [{
    none, selective (norms and GELUs) or full (each layer's forward again
    in its backward), for `gptc-recompute`:
    `gptc.recompute = #gptc.recompute<full>`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Gptc_NanPolicy : I32EnumAttr<"NanPolicy",
    "what a step with non-finite gradients does", [
    I32EnumAttrCase<"Stop", 0, "stop">, I32EnumAttrCase<"Skip", 1, "skip">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_NanPolicyAttr : EnumAttr<Gptc_Dialect, Gptc_NanPolicy, "nan_policy"> {
  let summary = "The non-finite step policy (`gptc.nan_policy`)";
  let description = [{
    stop (the runtime names the step and ends) or skip (the step carries a
    flag and leaves the state as it was; `gptc-optimizer`):
    `gptc.nan_policy = #gptc.nan_policy<skip>`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

/// A 64-bit float, printed so that it reads back exactly; optional when
/// `default` is given.
class Gptc_F64Parameter<string default = ""> :
    AttrParameter<"::llvm::APFloat", "a 64-bit float"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ ::mlir::gptc::parseF64Parameter($_parser) }];
  let printer = [{ $_printer.printFloat(::llvm::APFloat($_self)) }];
  let defaultValue = !if(!empty(default), "", "::llvm::APFloat(" # default # ")");
}

/// `true` or `false`; optional when `default` is given.
class Gptc_BoolParameter<string default = ""> :
    AttrParameter<"bool", "true or false"> {
  let parser = [{ ::mlir::gptc::parseBoolParameter($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
  let defaultValue = default;
}

class Gptc_Attr<string name, string attrMnemonic>
    : AttrDef<Gptc_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Gptc_OptimizerAttr : Gptc_Attr<"Optimizer", "optimizer"> {
  let summary = "The training settings gptc-optimizer turns into ops";
  let description = [{
    AdamW with decoupled weight decay, gradient clipping by global norm and
    a learning-rate schedule (linear warm-up, then cosine, linear or
    constant decay to `min_lr` at `total_steps`), written on the module by
    the importer from the description's `training` block:

    ```mlir
    module attributes {gptc.optimizer = #gptc.optimizer<lr = 6.0e-4,
        min_lr = 6.0e-5, warmup_steps = 10, total_steps = 100,
        decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8,
        weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0>}
    ```

    `accumulation_steps` (default 1) microbatches make one step of
    `batch_size` sequences (0: the forward function's batch times the
    microbatches). Under `gptc.precision = "fp16"`, dynamic loss scaling
    starts at `initial_loss_scale` (default 65536) and doubles after
    `loss_scale_growth_interval` (default 2000) good steps in a row.
  }];
  let parameters = (ins
    Gptc_F64Parameter<>:$lr,
    Gptc_F64Parameter<>:$min_lr,
    "int64_t":$warmup_steps,
    "int64_t":$total_steps,
    EnumParameter<Gptc_LrDecay>:$decay,
    Gptc_F64Parameter<>:$beta1,
    Gptc_F64Parameter<>:$beta2,
    Gptc_F64Parameter<>:$eps,
    Gptc_F64Parameter<>:$weight_decay,
    Gptc_BoolParameter<>:$decay_embeddings,
    Gptc_F64Parameter<>:$grad_clip,
    DefaultValuedParameter<"int64_t", "1">:$accumulation_steps,
    DefaultValuedParameter<"int64_t", "0">:$batch_size,
    Gptc_F64Parameter<"65536.0">:$initial_loss_scale,
    DefaultValuedParameter<"int64_t", "2000">:$loss_scale_growth_interval
  );
}

def Gptc_ParallelAttr : Gptc_Attr<"Parallel", "parallel"> {
  let summary = "The roles of the device mesh's axes";
  let description = [{
    Beside the module's `shard.grid`, one entry per grid dimension: the
    axis's name and its kind (`"data"`, `"tensor"` or `"pipeline"`), the
    ZeRO stage of data parallelism (0 to 3) and whether tensor parallelism
    also splits the sequence (Megatron-style sequence parallelism), and
    whether context parallelism's attention gathers the keys and values
    (`context_all_gather`) instead of passing them around a ring:

    ```mlir
    module attributes {gptc.parallel = #gptc.parallel<axes = ["dp", "tp"],
        kinds = ["data", "tensor"], zero_stage = 1>}
    ```
  }];
  let parameters = (ins
    "::mlir::ArrayAttr":$axes,
    Gptc_AxisKindsParameter:$kinds,
    DefaultValuedParameter<"int64_t", "0">:$zero_stage,
    Gptc_BoolParameter<"false">:$sequence_parallel,
    Gptc_BoolParameter<"false">:$context_all_gather
  );
  let extraClassDeclaration = [{
    /// The grid dimension whose kind is `kind`, if any.
    std::optional<unsigned> findAxis(::mlir::gptc::MeshAxisKind kind) const;
  }];
}

//===----------------------------------------------------------------------===//
// What a function's arguments and results hold
//===----------------------------------------------------------------------===//

def Gptc_InputKind : I32EnumAttr<"InputKind", "a data input of a step", [
    I32EnumAttrCase<"Tokens", 0, "tokens">,
    I32EnumAttrCase<"Labels", 1, "labels">,
    I32EnumAttrCase<"Step", 2, "step">,
    I32EnumAttrCase<"LossScale", 3, "loss_scale">,
    I32EnumAttrCase<"Cotangent", 4, "cotangent">,
    I32EnumAttrCase<"Graph", 5, "graph">,
    I32EnumAttrCase<"Saved", 6, "saved">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_OutputKind : I32EnumAttr<"OutputKind", "a result of a step", [
    I32EnumAttrCase<"Loss", 0, "loss">,
    I32EnumAttrCase<"GradNorm", 1, "grad_norm">,
    I32EnumAttrCase<"LearningRate", 2, "lr">,
    I32EnumAttrCase<"Overflow", 3, "overflow">,
    I32EnumAttrCase<"Boundary", 4, "boundary">,
    I32EnumAttrCase<"Graph", 5, "graph">,
    I32EnumAttrCase<"Saved", 6, "saved">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_StateKind : I32EnumAttr<"StateKind",
    "optimizer state a training step carries", [
    I32EnumAttrCase<"MomentM", 0, "m">,
    I32EnumAttrCase<"MomentV", 1, "v">,
    I32EnumAttrCase<"LossScale", 2, "loss_scale">,
    I32EnumAttrCase<"LossScaleGoodSteps", 3, "loss_scale_good_steps">,
    I32EnumAttrCase<"OptimizerUpdates", 4, "optimizer_updates">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

/// The role attributes `gptc.input`, `gptc.output` and `gptc.state`: a kind,
/// and for some kinds the parameter or graph value's name or an index,
/// written `<kind>`, `<kind "name">` or `<kind index>`.
class Gptc_RoleAttr<string name, string attrMnemonic, EnumAttrInfo kindEnum>
    : AttrDef<Gptc_Dialect, name> {
  let mnemonic = attrMnemonic;
  let parameters = (ins
    EnumParameter<kindEnum>:$kind,
    DefaultValuedParameter<"::mlir::StringAttr", "::mlir::StringAttr()">:$name,
    DefaultValuedParameter<"int64_t", "-1">:$index
  );
  let builders = [
    AttrBuilder<(ins !strconcat("::mlir::gptc::", kindEnum.className):$kind), [{
      return $_get($_ctxt, kind, ::mlir::StringAttr(), -1);
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The value's name in the artifact and in messages (`tokens`,
    /// `m:wte`, `pipeline.cot.0`, a graph value's own name).
    std::string str() const;
  }];
}

def Gptc_InputAttr : Gptc_RoleAttr<"Input", "input", Gptc_InputKind> {
  let summary = "A data input of a step (`gptc.input`)";
  let description = [{
    `#gptc.input<tokens>`, `<labels>`, `<step>` (the optimizer's step
    number), `<loss_scale>` (fp16's scale seeding the backward),
    `<cotangent k>` (a pipeline chunk's backward: the gradient of its k-th
    boundary output), `<saved k>` (a split backward's weight half: the k-th
    value its input half saved for it) or `<graph "name">` (an imported
    graph's input before it is recognized).
  }];
}

def Gptc_OutputAttr : Gptc_RoleAttr<"Output", "output", Gptc_OutputKind> {
  let summary = "A result of a step (`gptc.output`)";
  let description = [{
    `#gptc.output<loss>`, `<grad_norm>`, `<lr>`, `<overflow>`,
    `<boundary k>` (a pipeline chunk's k-th value for the next chunk),
    `<saved k>` (a split backward's input half: the k-th value its weight
    half takes) or `<graph "name">` (an imported graph's output).
  }];
}

def Gptc_StateAttr : Gptc_RoleAttr<"State", "state", Gptc_StateKind> {
  let summary = "Optimizer state of @train_step (`gptc.state`)";
  let description = [{
    `#gptc.state<m "wte">` and `<v "wte">` (AdamW's moments of a
    parameter), `<loss_scale>`, `<loss_scale_good_steps>` and
    `<optimizer_updates>` (fp16's dynamic loss scaling).
  }];
}

def Gptc_InitKind : I32EnumAttr<"InitKind", "how a parameter starts", [
    I32EnumAttrCase<"Zeros", 0, "zeros">, I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"Constant", 3, "constant">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_InitAttr : Gptc_Attr<"Init", "init"> {
  let summary = "A parameter's initializer (`gptc.init`)";
  let description = [{
    `#gptc.init<kind = normal, std = 0.02>`, `<kind = zeros>`,
    `<kind = ones>` or `<kind = constant, value = 1024.0>`; `rows` (when
    not 0) initializes only the first rows (a padded vocabulary's real
    tokens) and leaves the rest zero.
  }];
  let parameters = (ins
    EnumParameter<Gptc_InitKind>:$kind,
    Gptc_F64Parameter<"0.0">:$std,
    Gptc_F64Parameter<"0.0">:$value,
    DefaultValuedParameter<"int64_t", "0">:$rows
  );
}

//===----------------------------------------------------------------------===//
// Op annotations
//===----------------------------------------------------------------------===//

def Gptc_TensorParallel : I32EnumAttr<"TensorParallel",
    "how tensor parallelism splits a layer", [
    I32EnumAttrCase<"Column", 0, "column">, I32EnumAttrCase<"Row", 1, "row">,
    I32EnumAttrCase<"Vocab", 2, "vocab">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_TensorParallelAttr
    : EnumAttr<Gptc_Dialect, Gptc_TensorParallel, "tensor_parallel"> {
  let summary = "A layer's tensor-parallel split (`gptc.tensor_parallel`)";
  let description = [{
    On a `gptc.linear`: `column` (output features split) or `row` (input
    features split, partial sums); on a `gptc.embedding` or the head:
    `vocab`. Written by `gptc-sharding-propagation`, read by
    `gptc-tensor-parallel`: `gptc.tensor_parallel =
    #gptc.tensor_parallel<column>`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Gptc_KernelTarget : I32EnumAttr<"KernelTarget",
    "the code generation gptc.kernel regions are formed for", [
    I32EnumAttrCase<"Cpu", 0, "cpu">, I32EnumAttrCase<"Cuda", 1, "cuda">]> {
  let cppNamespace = "::mlir::gptc";
  let genSpecializedAttr = 0;
}

def Gptc_GemmEpilogue : I32EnumAttr<"GemmEpilogue",
    "the GEMM library form a gptc.fused_gemm is", [
    I32EnumAttrCase<"GeluAux", 0, "gelu_aux">,
    I32EnumAttrCase<"DGelu", 1, "dgelu">,
    I32EnumAttrCase<"DGeluBGrad", 2, "dgelu_bgrad">,
    I32EnumAttrCase<"BGrad", 3, "bgrad">]> {
  let cppNamespace = "::mlir::gptc";
}

#endif // GPTC_DIALECT_GPTC_IR_GPTCATTRS_TD
