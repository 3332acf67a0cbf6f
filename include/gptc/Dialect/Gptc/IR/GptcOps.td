//===- GptcOps.td - gptc dialect operations ----------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The operations of a GPT-2-style decoder. Every op has a summary, a
// description with an IR example, an assembly format, a verifier (through
// type inference or an explicit `verify()`), and a FLOP count.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCOPS_TD
#define GPTC_DIALECT_GPTC_IR_GPTCOPS_TD

include "gptc/Dialect/Gptc/IR/GptcBase.td"
include "gptc/Dialect/Gptc/IR/GptcInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Gptc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Gptc_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<Gptc_CostModelOpInterface>])>;

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def Gptc_ConstantOp : Gptc_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "Tensor constant";
  let description = [{
    Materializes a dense tensor constant. The folder of every gptc op uses
    it to materialize folded values.

    ```mlir
    %c = gptc.constant dense<1.0> : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Gptc_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Gptc_IotaOp : Gptc_Op<"iota", [Pure]> {
  let summary = "Integer sequence 0, 1, ... along one dimension";
  let description = [{
    Fills the result with its index along `dimension`, broadcast over the
    other dimensions. The frontend uses it for the position ids that index
    the position-embedding table.

    ```mlir
    %pos = gptc.iota dim 1 : tensor<4x64xi32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$dimension);
  let results = (outs Gptc_IndexTensor:$result);
  let assemblyFormat = "`dim` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding and dense layers
//===----------------------------------------------------------------------===//

def Gptc_EmbeddingOp : Gptc_Op<"embedding", [Pure, InferTypeOpAdaptor]> {
  let summary = "Row lookup in an embedding table";
  let description = [{
    Gathers rows of `table` (`V x C`) for every id in `ids`; the result has
    the shape of `ids` with `C` appended. Ids must lie in `[0, V)`; the
    runtime checks them. Used for both the token (`wte`) and the position
    (`wpe`) embedding; its vector-Jacobian product is a scatter-add into the
    table.

    ```mlir
    %x = gptc.embedding %ids, %wte
        : tensor<4x64xi32>, tensor<50257x768xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_IndexTensor:$ids, Gptc_FloatTensor:$table);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->` type($result)
  }];
}

def Gptc_LinearOp : Gptc_Op<"linear",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Affine layer y = x W^T + b over the last dimension";
  let description = [{
    Contracts the last dimension of `input` (`... x K`) with the second
    dimension of `weight` (`N x K`, PyTorch `nn.Linear` layout) and adds the
    optional `bias` (`N`). The layout makes the tied language-model head a
    `linear` with the token-embedding table as its weight. The leading
    dimensions of `input` are batch dimensions.

    ```mlir
    %h = gptc.linear %x, %w, %b
        : tensor<4x64x768xf32>, tensor<3072x768xf32>, tensor<3072xf32>
        -> tensor<4x64x3072xf32>
    %logits = gptc.linear %y, %wte
        : tensor<4x64x768xf32>, tensor<50257x768xf32> -> tensor<4x64x50257xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, Gptc_FloatTensor:$weight,
                       Optional<Gptc_FloatTensor>:$bias);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
}

def Gptc_MatmulOp : Gptc_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product with optional transposed operands";
  let description = [{
    Multiplies the last two dimensions of `lhs` and `rhs`; all leading
    dimensions are batch dimensions and must be equal. With `transpose_lhs`
    (`transpose_rhs`) the operand's last two dimensions are swapped before the
    product, which is how the backward pass writes `dW = dY^T X` without a
    separate transpose.

    ```mlir
    %c = gptc.matmul %a, %b transpose_rhs
        : tensor<8x64x32xf32>, tensor<8x16x32xf32> -> tensor<8x64x16xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$lhs, Gptc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Normalization and activations
//===----------------------------------------------------------------------===//

def Gptc_LayerNormOp : Gptc_Op<"layer_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta`, with the biased
    variance over the last dimension `C`; `gamma` and `beta` have shape `C`.

    ```mlir
    %y = gptc.layer_norm %x, %g, %b eps 1.0e-05
        : tensor<4x64x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, Gptc_FloatTensor:$gamma,
                       Gptc_FloatTensor:$beta,
                       F64Attr:$epsilon);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `eps` $epsilon attr-dict `:` type($input) `,`
    type($gamma) `,` type($beta) `->` type($result)
  }];
}

def Gptc_GeluOp : Gptc_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU activation, tanh approximation (as GPT-2)";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, elementwise; this is
    PyTorch's `gelu(approximate="tanh")`.

    ```mlir
    %y = gptc.gelu %x : tensor<4x64x3072xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Gptc_SoftmaxOp : Gptc_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "Numerically stable softmax over the last dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along the last dimension.

    ```mlir
    %p = gptc.softmax %s : tensor<4x12x64x64xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gptc_AddOp : Gptc_Op<"add", [Pure, Commutative, SameOperandsAndResultType]> {
  let summary = "Elementwise sum (residual connection)";
  let description = [{
    Adds two tensors of the same type, element by element. Broadcasting is
    explicit in gptc: there is none.

    ```mlir
    %r = gptc.add %x, %y : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$lhs, Gptc_FloatTensor:$rhs);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def Gptc_CausalAttentionOp : Gptc_Op<"causal_attention",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Causal multi-head scaled dot-product attention";
  let description = [{
    Splits the last dimension `C` of `query`, `key` and `value` (each
    `B x T x C`) into `num_heads` heads of size `D = C / num_heads` and
    computes, per batch and head, `softmax(Q K^T / sqrt(D) + M) V` where `M`
    masks every key position after the query position. The heads are
    concatenated back into `B x T x C`.

    Attention is one op, not a decomposition into matmul/softmax, because
    (1) the T x T score matrix never needs to exist in the IR, so kernels can
    use a fused (flash-style) algorithm; (2) heads are a batch-like dimension
    that tensor parallelism splits without communication, which is simplest
    to state on a single op; (3) its vector-Jacobian rule can recompute the
    probabilities instead of keeping them.

    ```mlir
    %y = gptc.causal_attention %q, %k, %v heads 12
        : tensor<4x64x768xf32>, tensor<4x64x768xf32>, tensor<4x64x768xf32>
        -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$query, Gptc_FloatTensor:$key,
                       Gptc_FloatTensor:$value,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `heads` $num_heads attr-dict `:` type($query)
    `,` type($key) `,` type($value) `->` type($result)
  }];
}

def Gptc_CrossEntropyOp : Gptc_Op<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "Mean next-token cross-entropy over all positions";
  let description = [{
    For logits `B x T x V` and integer labels `B x T`, returns the scalar
    mean over positions of `-log softmax(logits)[label]`. Positions whose
    label equals `ignore_index` (when set) count neither in the sum nor in
    the number of positions, which is how padding is excluded.

    ```mlir
    %loss = gptc.cross_entropy %logits, %labels
        : tensor<4x64x50257xf32>, tensor<4x64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$logits, Gptc_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss);
  let assemblyFormat = [{
    $logits `,` $labels (`ignore` $ignore_index^)? attr-dict `:` type($logits)
    `,` type($labels) `->` type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Gptc_ReshapeOp : Gptc_Op<"reshape", [Pure]> {
  let summary = "Reinterpret a tensor with another shape of the same size";
  let description = [{
    Row-major reshape; the element count and type must not change.

    ```mlir
    %y = gptc.reshape %x : tensor<4x64x768xf32> -> tensor<256x768xf32>
    ```
  }];
  let arguments = (ins Gptc_AnyTensor:$input);
  let results = (outs Gptc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Gptc_TransposeOp : Gptc_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "Permute the dimensions of a tensor";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %y = gptc.transpose %x [0, 2, 1] : tensor<4x64x768xf32> -> tensor<4x768x64xf32>
    ```
  }];
  let arguments = (ins Gptc_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Gptc_AnyTensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Gptc_SplitOp : Gptc_Op<"split", [Pure]> {
  let summary = "Split a tensor into consecutive slices along one dimension";
  let description = [{
    Cuts `input` along `axis` into as many consecutive pieces as there are
    results; each result's size along `axis` is read from its type and the
    sizes must add up to the input's. Used to separate the fused `c_attn`
    projection into query, key and value.

    ```mlir
    %q, %k, %v = gptc.split %qkv axis 2
        : tensor<4x64x2304xf32> -> tensor<4x64x768xf32>, tensor<4x64x768xf32>,
          tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_AnyTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs Variadic<Gptc_AnyTensor>:$results);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Gptc_CastOp : Gptc_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "Element-type cast used at mixed-precision boundaries";
  let description = [{
    Converts `input` to the element type of `result` with round-to-nearest-
    even; shapes must match. Inserted at fp32/bf16/fp16 boundaries by the
    mixed-precision pass.

    ```mlir
    %1 = gptc.cast %0 : tensor<8x768xf32> -> tensor<8x768xbf16>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

#endif // GPTC_DIALECT_GPTC_IR_GPTCOPS_TD
