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

include "gptc/Dialect/Gptc/IR/GptcAttrs.td"
include "gptc/Dialect/Gptc/IR/GptcBase.td"
include "gptc/Dialect/Gptc/IR/GptcInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Gptc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Gptc_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<Gptc_CostModelOpInterface>])>;

/// An op with a vector-Jacobian rule (lib/Dialect/Gptc/IR/GptcAutodiff.cpp).
class Gptc_DiffOp<string mnemonic, list<Trait> traits = []>
    : Gptc_Op<mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<Gptc_AutodiffOpInterface>])>;

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def Gptc_ConstantOp : Gptc_DiffOp<"constant",
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

def Gptc_IotaOp : Gptc_DiffOp<"iota", [Pure]> {
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

def Gptc_EmbeddingOp : Gptc_DiffOp<"embedding", [Pure, InferTypeOpAdaptor]> {
  let summary = "Row lookup in an embedding table";
  let description = [{
    Gathers rows of `table` (`V x C`) for every id in `ids`; the result has
    the shape of `ids` with `C` appended. Ids must lie in `[0, V)`; the
    runtime checks them. Used for both the token (`wte`) and the position
    (`wpe`) embedding; its vector-Jacobian product is a scatter-add into the
    table.

    With an `offset` (vocabulary parallelism), the table holds the rows of
    ids `[offset, offset + V)` of a larger table: those ids gather their
    row, every other id gives zeros (another rank holds it), and an
    all-reduce over the ranks completes the lookup.

    ```mlir
    %x = gptc.embedding %ids, %wte
        : tensor<4x64xi32>, tensor<50257x768xf32> -> tensor<4x64x768xf32>
    %part = gptc.embedding %ids, %wte_block offset %first
        : tensor<4x64xi32>, tensor<25152x768xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_IndexTensor:$ids, Gptc_FloatTensor:$table,
                       Optional<Gptc_I32Scalar>:$offset);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table (`offset` $offset^)? attr-dict `:` type($ids) `,`
    type($table) `->` type($result)
  }];
}

def Gptc_LinearOp : Gptc_DiffOp<"linear",
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

def Gptc_MatmulOp : Gptc_DiffOp<"matmul", [Pure, InferTypeOpAdaptor]> {
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

def Gptc_LayerNormOp : Gptc_DiffOp<"layer_norm", [Pure, InferTypeOpAdaptor]> {
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

def Gptc_GeluOp : Gptc_DiffOp<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU activation: the tanh approximation (as GPT-2) or exact";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, elementwise: PyTorch's
    `gelu(approximate="tanh")` and GPT-2's. With `exact`, the Gaussian CDF
    itself, `0.5 x (1 + erf(x / sqrt(2)))`: PyTorch's default `gelu(x)` and
    ONNX's `Gelu` without `approximate` (erf in f32 is the runtime's
    rational approximation, within 1e-7 of the library's).

    ```mlir
    %y = gptc.gelu %x : tensor<4x64x3072xf32>
    %z = gptc.gelu %x exact : tensor<4x64x3072xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, UnitAttr:$exact);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$input (`exact` $exact^)? attr-dict `:` type($result)";
}

def Gptc_SoftmaxOp : Gptc_DiffOp<"softmax", [Pure, SameOperandsAndResultType]> {
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

def Gptc_AddOp : Gptc_DiffOp<"add", [Pure, Commutative, SameOperandsAndResultType]> {
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

def Gptc_UnaryOp : Gptc_DiffOp<"unary", [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise function of one tensor";
  let description = [{
    Applies `fn` to every element: `neg` (-x), `sqrt`, `exp`, `log`, `tanh`,
    `erf`, `reciprocal` (1 / x), `relu` (max(x, 0)), `sigmoid` (1 / (1 +
    exp(-x))), `abs`, `step` (1 where x > 0, else 0) and `sign` (-1, 0 or
    1). The general elementwise ops of imported graphs (ONNX's `Neg`,
    `Sqrt`, `Erf`, ...); gptc's own models use the fused ops (`gelu`,
    `layer_norm`) instead. `step` and `sign` are the derivatives of `relu`
    and `abs` and have zero gradients.

    ```mlir
    %e = gptc.unary erf %x : tensor<4x64x3072xf32>
    ```
  }];
  let arguments = (ins Gptc_UnaryFn:$fn, Gptc_FloatTensor:$input);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$fn $input attr-dict `:` type($result)";
}

def Gptc_BinaryOp : Gptc_DiffOp<"binary", [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise function of two tensors of one type";
  let description = [{
    Applies `fn` to the elements at the same index: `sub` (lhs - rhs),
    `mul`, `div` (IEEE: a zero divisor gives an infinity or NaN) or `pow`
    (lhs ^ rhs, NaN for a negative base with a fractional exponent). Like
    `add`, there is no implicit broadcasting: importers insert
    `gptc.broadcast` and `gptc.reshape`.

    ```mlir
    %d = gptc.binary sub %x, %mean : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_BinaryFn:$fn, Gptc_FloatTensor:$lhs,
                       Gptc_FloatTensor:$rhs);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$fn $lhs `,` $rhs attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def Gptc_CausalAttentionOp : Gptc_DiffOp<"causal_attention",
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

    With `positions` (context parallelism), the queries are a subset of
    the sequence the keys and values cover: `query` is `B x Tq x C`, `key`
    and `value` `B x Tk x C` in sequence order, and query row `i` is the
    token at position `positions[i]` (`0 <= positions[i] < Tk`), which
    attends the keys `0 .. positions[i]`. Without it, `Tq = Tk` and row `i`
    is position `i`.

    ```mlir
    %y = gptc.causal_attention %q, %k, %v positions %pos heads 12
        : tensor<4x32x768xf32>, tensor<4x64x768xf32>, tensor<4x64x768xf32>,
          tensor<32xi32> -> tensor<4x32x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$query, Gptc_FloatTensor:$key,
                       Gptc_FloatTensor:$value,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       Optional<Gptc_IndexTensor>:$positions);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`positions` $positions^)? `heads` $num_heads
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`,` type($positions)^)? `->` type($result)
  }];
}

def Gptc_CrossEntropyOp : Gptc_DiffOp<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "Mean next-token cross-entropy over all positions";
  let description = [{
    For logits `B x T x V` and integer labels `B x T`, returns the scalar
    mean over positions of `-log softmax(logits)[label]`. Positions whose
    label equals `ignore_index` (when set) count neither in the sum nor in
    the number of positions, which is how padding is excluded.

    With a `normalizer` (a scalar), the sum is divided by it instead of by
    the number of counted positions. A training step split into
    microbatches or over data-parallel ranks passes the number of real
    tokens of the whole step, so that the parts' losses (and gradients) add
    up to the step's mean, whatever each part holds.

    ```mlir
    %loss = gptc.cross_entropy %logits, %labels
        : tensor<4x64x50257xf32>, tensor<4x64xi32> -> tensor<f32>
    %part = gptc.cross_entropy %logits, %labels over %ntokens ignore -1
        : tensor<4x64x50257xf32>, tensor<4x64xi32>, tensor<f32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$logits, Gptc_IndexTensor:$labels,
                       Optional<0DTensorOf<[AnyFloat]>>:$normalizer,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss);
  let assemblyFormat = [{
    $logits `,` $labels (`over` $normalizer^)? (`ignore` $ignore_index^)?
    attr-dict `:` type($logits) `,` type($labels) (`,` type($normalizer)^)?
    `->` type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and broadcasts
//===----------------------------------------------------------------------===//

def Gptc_ReduceSumOp : Gptc_DiffOp<"reduce_sum", [Pure, InferTypeOpAdaptor]> {
  let summary = "Sum over some dimensions";
  let description = [{
    Sums `input` over the listed dimensions (strictly increasing), which
    disappear from the result. The backward pass uses it for bias gradients;
    summing over every dimension gives a scalar.

    ```mlir
    %db = gptc.reduce_sum %dy [0, 1] : tensor<4x64x768xf32> -> tensor<768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, DenseI64ArrayAttr:$dimensions);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $input $dimensions attr-dict `:` type($input) `->` type($result)
  }];
}

def Gptc_BroadcastOp : Gptc_DiffOp<"broadcast", [Pure]> {
  let summary = "Repeat a tensor along new dimensions";
  let description = [{
    The inverse of `reduce_sum`: inserts the listed result dimensions
    (strictly increasing) and repeats `input` along them. The remaining
    result dimensions must equal the input's, in order.

    ```mlir
    %y = gptc.broadcast %b [0, 1] : tensor<768xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, DenseI64ArrayAttr:$dimensions);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $input $dimensions attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gptc_ConcatOp : Gptc_DiffOp<"concat", [Pure]> {
  let summary = "Concatenate tensors along one dimension";
  let description = [{
    The inverse of `split`: joins the inputs along `axis`; the other
    dimensions and the element types must agree.

    ```mlir
    %qkv = gptc.concat %q, %k, %v axis 2
        : tensor<4x64x768xf32>, tensor<4x64x768xf32>, tensor<4x64x768xf32>
        -> tensor<4x64x2304xf32>
    ```
  }];
  let arguments = (ins Variadic<Gptc_AnyTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs Gptc_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops
//
// The vector-Jacobian products that are not compositions of forward ops.
// Each recomputes what it needs from the forward inputs (layer-norm
// statistics, attention probabilities, softmax of the logits) instead of
// keeping it, so the activations the backward pass holds are exactly the
// forward values its operands name.
//===----------------------------------------------------------------------===//

def Gptc_EmbeddingGradOp : Gptc_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of an embedding table: scatter-add of row gradients";
  let description = [{
    Adds `grad[i...]` (the gradient of `embedding(ids, table)`) into row
    `ids[i...]` of a zero table of the result's shape `V x C`; with an
    `offset`, into row `ids[i...] - offset` for the ids the block holds.

    ```mlir
    %dwte = gptc.embedding_grad %ids, %dx
        : tensor<4x64xi32>, tensor<4x64x768xf32> -> tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Gptc_IndexTensor:$ids, Gptc_FloatTensor:$grad,
                       Optional<Gptc_I32Scalar>:$offset);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad (`offset` $offset^)? attr-dict `:` type($ids) `,`
    type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Gptc_LayerNormGradOp : Gptc_Op<"layer_norm_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of layer normalization";
  let description = [{
    Given the forward `input`, `gamma`, `epsilon` and the gradient `grad` of
    the output, returns the gradients of the input, `gamma` and `beta`.
    Mean and variance are recomputed from `input`.

    ```mlir
    %dx, %dg, %db = gptc.layer_norm_grad %x, %g, %dy eps 1.0e-05
        : tensor<4x64x768xf32>, tensor<768xf32>, tensor<4x64x768xf32>
        -> tensor<4x64x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, Gptc_FloatTensor:$gamma,
                       Gptc_FloatTensor:$grad, F64Attr:$epsilon);
  let results = (outs Gptc_FloatTensor:$input_grad,
                      Gptc_FloatTensor:$gamma_grad,
                      Gptc_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $grad `eps` $epsilon attr-dict `:` type($input) `,`
    type($gamma) `,` type($grad) `->` type($input_grad) `,` type($gamma_grad)
    `,` type($beta_grad)
  }];
}

def Gptc_GeluGradOp : Gptc_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of GELU (the tanh approximation, or exact)";
  let description = [{
    `grad * gelu'(input)`, elementwise; with `exact`, of the exact GELU:
    `gelu'(x) = 0.5 (1 + erf(x / sqrt(2))) + x exp(-x^2 / 2) / sqrt(2 pi)`.

    ```mlir
    %dx = gptc.gelu_grad %x, %dy : tensor<4x64x3072xf32>
    %dz = gptc.gelu_grad %x, %dy exact : tensor<4x64x3072xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, Gptc_FloatTensor:$grad,
                       UnitAttr:$exact);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $grad (`exact` $exact^)? attr-dict `:` type($result)";
}

def Gptc_SoftmaxGradOp : Gptc_Op<"softmax_grad",
    [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of softmax over the last dimension";
  let description = [{
    Given the forward result `output` (`y`) and its gradient `grad` (`dy`),
    returns `y * (dy - sum(dy * y))` along the last dimension.

    ```mlir
    %dx = gptc.softmax_grad %y, %dy : tensor<4x12x64x64xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$output, Gptc_FloatTensor:$grad);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gptc_CausalAttentionGradOp : Gptc_Op<"causal_attention_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of causal multi-head attention";
  let description = [{
    Given the forward `query`, `key`, `value` and the gradient of the output,
    returns the gradients of query, key and value. The probabilities are
    recomputed, as flash attention's backward pass does.

    ```mlir
    %dq, %dk, %dv = gptc.causal_attention_grad %q, %k, %v, %dy heads 12
        : tensor<4x64x768xf32>, tensor<4x64x768xf32>, tensor<4x64x768xf32>,
          tensor<4x64x768xf32>
        -> tensor<4x64x768xf32>, tensor<4x64x768xf32>, tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$query, Gptc_FloatTensor:$key,
                       Gptc_FloatTensor:$value, Gptc_FloatTensor:$grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       Optional<Gptc_IndexTensor>:$positions);
  let results = (outs Gptc_FloatTensor:$query_grad,
                      Gptc_FloatTensor:$key_grad,
                      Gptc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad (`positions` $positions^)? `heads`
    $num_heads attr-dict `:` type($query) `,` type($key) `,` type($value) `,`
    type($grad) (`,` type($positions)^)? `->` type($query_grad) `,`
    type($key_grad) `,` type($value_grad)
  }];
}

//===----------------------------------------------------------------------===//
// Ring attention (context parallelism)
//===----------------------------------------------------------------------===//

def Gptc_AttentionBlockOp : Gptc_DiffOp<"attention_block",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Causal attention of queries against one block of keys, with its log-sum-exp";
  let description = [{
    One step of ring attention. `query` is `B x Tq x C` at the sequence
    positions `query_positions`, `key` and `value` are `B x Tk x C` at
    `key_positions` (ascending); query row `i` attends the keys whose
    position is at most `query_positions[i]`. Returns the attention output
    normalized over this block alone and, per batch element, query and
    head, the log-sum-exp of the block's scaled scores (`B x Tq x H`,
    `-inf` with a zero output row where the query sees none of the block's
    keys). `gptc.attention_merge` combines two blocks' results into the
    attention over both (the online softmax across blocks). With bf16 or
    f16 operands (mixed precision) the output and log-sum-exp are f32, so
    that the merges accumulate in fp32.

    ```mlir
    %o, %lse = gptc.attention_block %q, %k, %v at %qpos, %kpos heads 12
        : tensor<4x32x768xf32>, tensor<4x32x768xf32>, tensor<4x32x768xf32>,
          tensor<32xi32>, tensor<32xi32>
        -> tensor<4x32x768xf32>, tensor<4x32x12xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$query, Gptc_FloatTensor:$key,
                       Gptc_FloatTensor:$value,
                       Gptc_IndexTensor:$query_positions,
                       Gptc_IndexTensor:$key_positions,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Gptc_FloatTensor:$result, Gptc_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value `at` $query_positions `,` $key_positions
    `heads` $num_heads attr-dict `:` type($query) `,` type($key) `,`
    type($value) `,` type($query_positions) `,` type($key_positions) `->`
    type($result) `,` type($lse)
  }];
}

def Gptc_AttentionBlockGradOp : Gptc_Op<"attention_block_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of gptc.attention_block";
  let description = [{
    Given the forward operands and the gradients of the block's output
    (`grad`) and of its log-sum-exp (`lse_grad`), returns the gradients of
    query, key and value. The probabilities are recomputed; with
    `D = rowsum(grad * output) - lse_grad` the scores' gradient is
    `P (dP - D)`, flash attention's backward with the log-sum-exp's
    gradient folded in.

    ```mlir
    %dq, %dk, %dv = gptc.attention_block_grad %q, %k, %v at %qpos, %kpos,
        %do, %dlse heads 12 : ...
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$query, Gptc_FloatTensor:$key,
                       Gptc_FloatTensor:$value,
                       Gptc_IndexTensor:$query_positions,
                       Gptc_IndexTensor:$key_positions,
                       Gptc_FloatTensor:$grad, Gptc_FloatTensor:$lse_grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Gptc_FloatTensor:$query_grad,
                      Gptc_FloatTensor:$key_grad,
                      Gptc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `at` $query_positions `,` $key_positions `,`
    $grad `,` $lse_grad `heads` $num_heads attr-dict `:` type($query) `,`
    type($key) `,` type($value) `,` type($query_positions) `,`
    type($key_positions) `,` type($grad) `,` type($lse_grad) `->`
    type($query_grad) `,` type($key_grad) `,` type($value_grad)
  }];
}

def Gptc_AttentionMergeOp : Gptc_DiffOp<"attention_merge",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Attention over two blocks of keys from each block's result (online softmax)";
  let description = [{
    With `lse = log(exp(lse_a) + exp(lse_b))` per batch element, query and
    head, returns `exp(lse_a - lse) * a + exp(lse_b - lse) * b` (each head's
    `D` columns weighted by its head's factor) and `lse`: the attention
    over the keys of both blocks, from gptc.attention_block's results for
    each. A row with no key in either block stays zero, its `lse` `-inf`.

    ```mlir
    %o, %lse = gptc.attention_merge %a, %lse_a, %b, %lse_b
        : tensor<4x32x768xf32>, tensor<4x32x12xf32>, tensor<4x32x768xf32>,
          tensor<4x32x12xf32> -> tensor<4x32x768xf32>, tensor<4x32x12xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$a, Gptc_FloatTensor:$lse_a,
                       Gptc_FloatTensor:$b, Gptc_FloatTensor:$lse_b);
  let results = (outs Gptc_FloatTensor:$result, Gptc_FloatTensor:$lse);
  let assemblyFormat = [{
    $a `,` $lse_a `,` $b `,` $lse_b attr-dict `:` type($a) `,` type($lse_a)
    `,` type($b) `,` type($lse_b) `->` type($result) `,` type($lse)
  }];
}

def Gptc_AttentionMergeGradOp : Gptc_Op<"attention_merge_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of gptc.attention_merge";
  let description = [{
    Given the forward operands and the gradients of the merged output and
    log-sum-exp, returns the gradients of `a`, `lse_a`, `b` and `lse_b`:
    with `w_a = exp(lse_a - lse)`, `da = w_a * grad` and
    `dlse_a = w_a * (lse_grad + rowsum_head(grad * (a - result)))`, and
    the same for `b`.

    ```mlir
    %da, %dla, %db, %dlb = gptc.attention_merge_grad %a, %lse_a, %b, %lse_b,
        %do, %dlse : ...
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$a, Gptc_FloatTensor:$lse_a,
                       Gptc_FloatTensor:$b, Gptc_FloatTensor:$lse_b,
                       Gptc_FloatTensor:$grad, Gptc_FloatTensor:$lse_grad);
  let results = (outs Gptc_FloatTensor:$a_grad, Gptc_FloatTensor:$lse_a_grad,
                      Gptc_FloatTensor:$b_grad, Gptc_FloatTensor:$lse_b_grad);
  let assemblyFormat = [{
    $a `,` $lse_a `,` $b `,` $lse_b `,` $grad `,` $lse_grad attr-dict `:`
    type($a) `,` type($lse_a) `,` type($b) `,` type($lse_b) `,` type($grad)
    `,` type($lse_grad) `->` type($a_grad) `,` type($lse_a_grad) `,`
    type($b_grad) `,` type($lse_b_grad)
  }];
}

def Gptc_CrossEntropyGradOp : Gptc_Op<"cross_entropy_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `grad * (softmax(logits) - onehot(labels)) / n`, where `n` counts the
    positions whose label is not `ignore_index` (or is the `normalizer`,
    as in `gptc.cross_entropy`); ignored positions get zero.

    ```mlir
    %dlogits = gptc.cross_entropy_grad %logits, %labels, %dloss
        : tensor<4x64x50257xf32>, tensor<4x64xi32>, tensor<f32>
        -> tensor<4x64x50257xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$logits, Gptc_IndexTensor:$labels,
                       Gptc_FloatTensor:$grad,
                       Optional<0DTensorOf<[AnyFloat]>>:$normalizer,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`over` $normalizer^)?
    (`ignore` $ignore_index^)? attr-dict `:`
    type($logits) `,` type($labels) `,` type($grad) (`,` type($normalizer)^)?
    `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer
//
// The update of a training step, as ops, so that every decision (clipping,
// the schedule, which parameters decay) is visible in the IR. Scalars are
// rank-0 tensors. Built by gptc-optimizer from the `gptc.optimizer` module
// attribute.
//===----------------------------------------------------------------------===//

def Gptc_GlobalNormOp : Gptc_Op<"global_norm", [Pure]> {
  let summary = "Euclidean norm of a list of tensors taken together";
  let description = [{
    `sqrt(sum_i sum(x_i^2))`, accumulated in double precision; the gradient
    norm that clipping and the training log use.

    ```mlir
    %n = gptc.global_norm %g0, %g1 : tensor<8x4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Gptc_FloatTensor>:$inputs);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Gptc_AccumulateOp : Gptc_Op<"accumulate", [
    RecursiveMemoryEffects, RecursivelySpeculatable,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Run a region once per microbatch and sum what it yields";
  let description = [{
    Gradient accumulation without unrolling: each input holds
    `microbatches` microbatches stacked on dimension 0; the region runs
    once per microbatch, its block arguments bound to that microbatch's
    slices (dimension 0 divided by `microbatches`), and the op's results
    are the sums over microbatches of the values the region yields (the
    loss and the gradients of a training step). The region may use values
    defined above it (parameters, the step's token count).

    ```mlir
    %loss, %dw = gptc.accumulate %tokens, %labels microbatches 4
        : (tensor<32x64xi32>, tensor<32x64xi32>) -> (tensor<f32>, tensor<64x64xf32>) {
    ^bb0(%t: tensor<8x64xi32>, %l: tensor<8x64xi32>):
      ...
      gptc.yield %part_loss, %part_dw : tensor<f32>, tensor<64x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gptc_AnyTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntPositive]>:$microbatches);
  let results = (outs Variadic<Gptc_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs `microbatches` $microbatches attr-dict `:`
    functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def Gptc_KernelOp : Gptc_Op<"kernel", [
    IsolatedFromAbove, RecursiveMemoryEffects, RecursivelySpeculatable,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "A group of ops that runs as one generated kernel";
  let description = [{
    The unit of code generation, like IREE's dispatch regions: the ops of
    the region run as one fused, compiled kernel, so the values they pass
    to each other never reach memory. `gptc-form-kernels` groups ops into
    kernels; the CPU target (`gptc-outline-kernels`, then
    `gptc-kernel-lowering-pipeline`) lowers each region through `linalg`
    to a machine-code function named `name`, and the runtime launches it
    with the buffers of its operands and results. The region takes the
    operands as block arguments (it is isolated from above) and yields the
    results.

    ```mlir
    %y = gptc.kernel "train_step_k0" (%x, %r)
        : (tensor<16x64x256xf32>, tensor<16x64x256xf32>) -> tensor<16x64x256xf32> {
    ^bb0(%a: tensor<16x64x256xf32>, %b: tensor<16x64x256xf32>):
      %s = gptc.add %a, %b : tensor<16x64x256xf32>
      %g = gptc.gelu %s : tensor<16x64x256xf32>
      gptc.yield %g : tensor<16x64x256xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gptc_AnyTensor>:$inputs, StrAttr:$name);
  let results = (outs Variadic<Gptc_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasVerifier = 1;
}

def Gptc_FusedGemmOp : Gptc_Op<"fused_gemm", [
    IsolatedFromAbove, Pure, SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "A GEMM library call with the elementwise work it fuses";
  let description = [{
    One matrix product and its epilogue, run as one call of the GEMM
    library (cuBLASLt's epilogues on the GPU; on the CPU the product and
    then the epilogue over its rows while they are in cache). The region
    is the computation, in gptc's own ops, so the IR says exactly what the
    call computes; `epilogue` names which of the library's forms it is,
    and the verifier checks that the region is that form. Its first op is
    the product (`gptc.linear` or 2-D `gptc.matmul`) of the first two
    block arguments (and the bias, for a linear). The forms, as
    `gptc-fuse-gemm-epilogues` builds them:

    - `gelu_aux`: `pre = linear(x, w [, b])`, `act = gelu(pre)` (in
      f32 when `pre` is 16-bit, between exact casts, as the unfused
      program computes it); yields `act, pre`: the activation and the GELU
      input that the backward pass keeps (cuBLASLt `GELU_AUX[_BIAS]`).
    - `dgelu` / `dgelu_bgrad`: operands `lhs, rhs, pre`; `g =
      matmul(lhs, rhs)` viewed in `pre`'s shape, `d = gelu_grad(pre, g)`
      (in f32 for 16-bit values); yields `d` and, with `_bgrad`, its sum
      over every dimension but the last: the bias gradient of the layer
      whose output `pre` is (cuBLASLt `DGELU[_BGRAD]`).
    - `bgrad`: `dw = matmul(dy, x) transpose_lhs`, `db = reduce_sum(dy,
      [0])`: a weight gradient and the bias gradient read from the same
      operand (cuBLASLt `BGRADB`).

    ```mlir
    %a, %h = gptc.fused_gemm gelu_aux (%x, %w, %b)
        : (tensor<1024x64xf32>, tensor<256x64xf32>, tensor<256xf32>)
        -> (tensor<1024x256xf32>, tensor<1024x256xf32>) {
    ^bb0(%x0: tensor<1024x64xf32>, %w0: tensor<256x64xf32>, %b0: tensor<256xf32>):
      %h0 = gptc.linear %x0, %w0, %b0 : tensor<1024x64xf32>, tensor<256x64xf32>, tensor<256xf32> -> tensor<1024x256xf32>
      %a0 = gptc.gelu %h0 : tensor<1024x256xf32>
      gptc.yield %a0, %h0 : tensor<1024x256xf32>, tensor<1024x256xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Gptc_AnyTensor>:$inputs, Gptc_GemmEpilogue:$epilogue);
  let results = (outs Variadic<Gptc_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $epilogue `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let extraClassDeclaration = [{
    /// The product: the region's first op (a gptc.linear or gptc.matmul).
    Operation *getGemm() { return &getBody().front().front(); }
  }];
  let hasVerifier = 1;
}

def Gptc_YieldOp : Gptc_Op<"yield", [Pure, Terminator,
                                      ParentOneOf<["AccumulateOp", "KernelOp", "FusedGemmOp"]>]> {
  let summary = "The values a gptc.accumulate, gptc.kernel or gptc.fused_gemm region yields";
  let arguments = (ins Variadic<Gptc_AnyTensor>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Gptc_GradAllReduceOp : Gptc_DiffOp<"grad_all_reduce", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Identity whose gradient is all-reduced over grid axes";
  let description = [{
    Megatron's "f": the input of a column-parallel layer is replicated over
    the tensor-parallel ranks, but each rank's use of it contributes only
    part of its gradient, so the gradient is summed over `grid_axes`. The
    forward value passes through unchanged (the op folds away once the
    gradient is built); its partner "g", the all-reduce after a
    row-parallel layer, is `shard.all_reduce`, whose gradient is the
    identity.

    ```mlir
    %x1 = gptc.grad_all_reduce %x on @mesh grid_axes = [1] : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let hasFolder = 1;
}

def Gptc_ShardOffsetOp : Gptc_Op<"shard_offset", [Pure]> {
  let summary = "This rank's first index of a dimension split in blocks";
  let description = [{
    `block` times this rank's index in its group over `grid_axes` (the
    order of `shard` collectives): the first vocabulary id of a rank's
    block of a vocabulary-parallel embedding table.

    ```mlir
    %first = gptc.shard_offset on @mesh grid_axes = [1] block 128 : tensor<i32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block);
  let results = (outs Gptc_I32Scalar:$result);
  let assemblyFormat = [{
    `on` $grid `grid_axes` `=` $grid_axes `block` $block attr-dict `:`
    type($result)
  }];
}

def Gptc_BucketAllReduceOp : Gptc_Op<"bucket_all_reduce", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Sums several tensors over grid axes in one collective";
  let description = [{
    A gradient bucket: result `i` is the sum of operand `i` over the ranks
    that differ from this one only along `grid_axes` of `grid`, as
    `shard.all_reduce` with the sum would compute it, but the operands are
    reduced together, as one message. One collective per bucket rather than
    one per tensor is how data-parallel trainers (PyTorch DDP's 25 MiB
    buckets, Megatron's contiguous gradient buffer) pay a collective's
    latency once for many small gradients.

    `gptc-bucket-all-reduces` forms it from consecutive all-reduces;
    `gptc-plan-buffers` stores the operands one after another and each
    result over its operand, so that the runtime reduces the bucket in
    place with one call (NCCL or MPI) and no copies. The operands share an
    element type; the results have the operands' types.

    ```mlir
    %g:2 = gptc.bucket_all_reduce %dw, %db on @mesh grid_axes = [0]
        : tensor<64x256xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Gptc_FloatTensor>:$inputs,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs Variadic<Gptc_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

// Buckets of block collectives along dimension 0 (ZeRO's gathers and
// reduce-scatters): the results' types are given, the group's size comes
// from the grid.
class Gptc_BucketBlocksOp<string mnemonic> : Gptc_Op<mnemonic, [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let arguments = (ins Variadic<Gptc_FloatTensor>:$inputs,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs Variadic<Gptc_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    type($inputs) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Gptc_BucketAllGatherOp : Gptc_BucketBlocksOp<"bucket_all_gather"> {
  let summary = "Gathers several tensors' blocks along dimension 0 at once";
  let description = [{
    Result `i` is the blocks of operand `i` of every rank of the group
    (those that differ from this one only along `grid_axes` of `grid`)
    stacked along dimension 0 in group order, as `shard.all_gather` with
    `gather_axis = 0` computes it; the operands travel as one message
    (each rank's blocks one after another), so the collective's latency is
    paid once for many small tensors, as FSDP's flat parameters or
    DeepSpeed's ZeRO-3 buckets do. `gptc-bucket-all-reduces` forms it from
    consecutive all-gathers (ZeRO-1's parameters after the update, ZeRO-3's
    before each phase).

    ```mlir
    %w:2 = gptc.bucket_all_gather %ws, %bs on @mesh grid_axes = [0]
        : tensor<32x64xf32>, tensor<32xf32> -> tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
}

def Gptc_BucketReduceScatterOp : Gptc_BucketBlocksOp<"bucket_reduce_scatter"> {
  let summary = "Sums several tensors and scatters their blocks at once";
  let description = [{
    Result `i` is this rank's block (along dimension 0, in group order) of
    the sum of operand `i` over the group, as `shard.reduce_scatter` with
    the sum and `scatter_axis = 0` computes it; the operands travel as one
    message. `gptc-bucket-all-reduces` forms it from consecutive
    reduce-scatters (ZeRO-2's and 3's gradients).

    ```mlir
    %g:2 = gptc.bucket_reduce_scatter %dw, %db on @mesh grid_axes = [0]
        : tensor<64x64xf32>, tensor<64xf32> -> tensor<32x64xf32>, tensor<32xf32>
    ```
  }];
}

def Gptc_RowMaxOp : Gptc_Op<"row_max", [Pure, InferTypeOpAdaptor]> {
  let summary = "Maximum over the last dimension";
  let description = [{
    The per-position maximum of this rank's logits; a max all-reduce makes
    it the maximum over the whole vocabulary, the shift that keeps a
    vocabulary-parallel cross-entropy's exponentials finite. The loss does
    not depend on the shift, so nothing differentiates through it.

    ```mlir
    %m = gptc.row_max %logits : tensor<4x64x25152xf32> -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Gptc_VocabParallelPartialsOp : Gptc_DiffOp<"vocab_parallel_partials",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "A vocabulary block's parts of the softmax sum and the target logit";
  let description = [{
    For this rank's logits `B x T x Vb` (vocabulary ids `[offset, offset +
    Vb)`), the global row maxima `max` (`B x T`) and the labels: `sum_exp`
    = `sum_j exp(logits[..., j] - max)` and `target` = the logit of the
    label when this block holds it, else 0. Sum all-reduces over the
    vocabulary ranks complete both; `gptc.vocab_parallel_loss` combines
    them. With `vocab_size`, ids from it on are padding (the table was
    padded to a multiple of the tensor-parallel size): their logits count
    in neither sum.

    ```mlir
    %s, %t = gptc.vocab_parallel_partials %logits, %max, %labels offset %first
        : tensor<4x64x25152xf32>, tensor<4x64xf32>, tensor<4x64xi32>
        -> tensor<4x64xf32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$logits, Gptc_FloatTensor:$max,
                       Gptc_IndexTensor:$labels, Gptc_I32Scalar:$offset,
                       OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Gptc_FloatTensor:$sum_exp, Gptc_FloatTensor:$target);
  let assemblyFormat = [{
    $logits `,` $max `,` $labels `offset` $offset (`vocab` $vocab_size^)?
    attr-dict `:` type($logits)
    `,` type($max) `,` type($labels) `->` type($sum_exp) `,` type($target)
  }];
}

def Gptc_VocabParallelPartialsGradOp : Gptc_Op<"vocab_parallel_partials_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradient of the logits from those of the partial sums";
  let description = [{
    `exp(logits - max) * d_sum_exp + onehot(labels - offset) * d_target`,
    rows broadcast over the vocabulary block; zero for padding ids (from
    `vocab_size` on).

    ```mlir
    %dl = gptc.vocab_parallel_partials_grad %logits, %max, %labels offset %first, %ds, %dt
        : tensor<4x64x25152xf32>, tensor<4x64xf32>, tensor<4x64xi32>,
          tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64x25152xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$logits, Gptc_FloatTensor:$max,
                       Gptc_IndexTensor:$labels, Gptc_I32Scalar:$offset,
                       Gptc_FloatTensor:$d_sum_exp, Gptc_FloatTensor:$d_target,
                       OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Gptc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $max `,` $labels `offset` $offset `,` $d_sum_exp `,` $d_target
    (`vocab` $vocab_size^)? attr-dict `:` type($logits) `,` type($max) `,` type($labels) `,`
    type($d_sum_exp) `,` type($d_target) `->` type($result)
  }];
}

def Gptc_VocabParallelLossOp : Gptc_DiffOp<"vocab_parallel_loss", [Pure,
    AllTypesMatch<["max", "sum_exp", "target"]>]> {
  let summary = "Cross-entropy from the vocabulary-wide maxima, sums and targets";
  let description = [{
    `sum over kept positions of (log sum_exp + max - target)`, divided by
    the number of kept positions (labels other than `ignore_index`) or by
    `normalizer`, as `gptc.cross_entropy`, which it equals when the
    operands cover the whole vocabulary.

    ```mlir
    %loss = gptc.vocab_parallel_loss %max, %sum, %target, %labels ignore -1
        : tensor<4x64xf32>, tensor<4x64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$max, Gptc_FloatTensor:$sum_exp,
                       Gptc_FloatTensor:$target, Gptc_IndexTensor:$labels,
                       Optional<0DTensorOf<[AnyFloat]>>:$normalizer,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss);
  let assemblyFormat = [{
    $max `,` $sum_exp `,` $target `,` $labels (`over` $normalizer^)?
    (`ignore` $ignore_index^)? attr-dict `:` type($max) `,` type($labels)
    (`,` type($normalizer)^)? `->` type($loss)
  }];
  let hasVerifier = 1;
}

def Gptc_VocabParallelLossGradOp : Gptc_Op<"vocab_parallel_loss_grad", [Pure,
    AllTypesMatch<["sum_exp", "d_sum_exp", "d_target"]>]> {
  let summary = "Gradients of the vocabulary-parallel loss's sums and targets";
  let description = [{
    For each kept position, `d_sum_exp = grad / (n * sum_exp)` and
    `d_target = -grad / n` (`n` as in `gptc.vocab_parallel_loss`); zero at
    ignored positions.

    ```mlir
    %ds, %dt = gptc.vocab_parallel_loss_grad %sum, %labels, %dloss ignore -1
        : tensor<4x64xf32>, tensor<4x64xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$sum_exp, Gptc_IndexTensor:$labels,
                       Gptc_FloatTensor:$grad,
                       Optional<0DTensorOf<[AnyFloat]>>:$normalizer,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gptc_FloatTensor:$d_sum_exp, Gptc_FloatTensor:$d_target);
  let assemblyFormat = [{
    $sum_exp `,` $labels `,` $grad (`over` $normalizer^)?
    (`ignore` $ignore_index^)? attr-dict `:` type($sum_exp) `,` type($labels)
    `,` type($grad) (`,` type($normalizer)^)?
  }];
}

def Gptc_SumSquaresOp : Gptc_Op<"sum_squares", [Pure]> {
  let summary = "Sum of the squares of a list of tensors";
  let description = [{
    `sum_i sum(x_i^2)`, accumulated in double precision. When gradients are
    sharded (ZeRO 2 and 3), each rank sums the squares of its shards, an
    all-reduce adds the ranks' sums, and `gptc.sqrt` gives the global norm.

    ```mlir
    %s = gptc.sum_squares %g0, %g1 : tensor<8x4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Gptc_FloatTensor>:$inputs);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Gptc_SqrtOp : Gptc_Op<"sqrt", [Pure]> {
  let summary = "Square root of a scalar";
  let description = [{
    ```mlir
    %norm = gptc.sqrt %sum_of_squares
    ```
  }];
  let arguments = (ins Gptc_F32Scalar:$input);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = "$input attr-dict";
}

def Gptc_CountTokensOp : Gptc_Op<"count_tokens", [Pure]> {
  let summary = "Number of labels that are not ignored";
  let description = [{
    Counts the elements of `labels` that differ from `ignore_index` (all of
    them when it is not set), as an f32 scalar (exact below 2^24 tokens a
    step). The normalizer of a training step's cross-entropy when the step
    is split into microbatches or over data-parallel ranks.

    ```mlir
    %n = gptc.count_tokens %labels ignore -1 : tensor<16x64xi32>
    ```
  }];
  let arguments = (ins Gptc_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = [{
    $labels (`ignore` $ignore_index^)? attr-dict `:` type($labels)
  }];
}

def Gptc_ClipScaleOp : Gptc_Op<"clip_scale", [Pure]> {
  let summary = "Gradient scale for clipping by global norm";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`, as PyTorch's `clip_grad_norm_`;
    1 when `max_norm` is 0 (clipping disabled).

    With a `loss_scale` S (fp16's dynamic loss scaling), `norm` is the norm
    of the scaled gradients and the result is the factor that takes a
    scaled gradient to the clipped true one: `min(1, max_norm / (norm / S +
    1e-6)) / S`, as PyTorch's `GradScaler.unscale_` followed by
    `clip_grad_norm_`.

    ```mlir
    %s = gptc.clip_scale %norm max 1.0
    %u = gptc.clip_scale %scaled_norm max 1.0 loss_scale %S
    ```
  }];
  let arguments = (ins Gptc_F32Scalar:$norm, F64Attr:$max_norm,
                       Optional<Gptc_F32Scalar>:$loss_scale);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = [{
    $norm `max` $max_norm (`loss_scale` $loss_scale^)? attr-dict
  }];
}

def Gptc_DivOp : Gptc_Op<"div", [Pure]> {
  let summary = "Quotient of two scalars";
  let description = [{
    `lhs / rhs` in f32 (IEEE: a zero divisor gives an infinity or NaN).
    Unscales the gradient norm that fp16's dynamic loss scaling reports.

    ```mlir
    %norm = gptc.div %scaled_norm, %loss_scale
    ```
  }];
  let arguments = (ins Gptc_F32Scalar:$lhs, Gptc_F32Scalar:$rhs);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict";
}

def Gptc_FoundInfOp : Gptc_Op<"found_inf", [Pure]> {
  let summary = "Whether a tensor holds an infinity or a NaN";
  let description = [{
    1.0 when any element of `input` is not finite, else 0.0 (f32, so that
    `shard.all_reduce` with `max` gives the answer over ranks). Applied to
    the norm of the scaled gradients, it is fp16's overflow test: the norm
    is not finite exactly when some gradient element is not (its squares
    sum to infinity or NaN), or when the squares overflow f32, which is
    an overflow too.

    ```mlir
    %found = gptc.found_inf %norm : tensor<f32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$input);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Gptc_LossScaleUpdateOp : Gptc_Op<"loss_scale_update", [Pure]> {
  let summary = "Dynamic loss scaling: the next scale and step counters";
  let description = [{
    One step of the loss scaler's state machine, PyTorch's `GradScaler`
    (`_amp_update_scale_`) with the optimizer's step count beside it.
    With `found` the step's overflow flag (nonzero: the gradients
    overflowed, on some rank), `scale` the loss scale, `good` the steps
    since the last overflow or growth and `updates` the optimizer updates
    applied so far:

    ```
    found:     scale' = scale * backoff, good' = 0,        updates' = updates
    otherwise: good' = good + 1,         updates' = updates + 1, and
               scale' = scale * growth,  good' = 0   when good + 1 == interval
               (and scale * growth is finite), else scale' = scale
    ```
    `updates` is the step that AdamW's bias correction counts: a skipped
    step does not advance it, as `GradScaler` skips `optimizer.step()`.

    ```mlir
    %s1, %g1, %u1 = gptc.loss_scale_update %s, %g, %u, %found
        growth 2.0 backoff 5.0e-01 interval 2000
    ```
  }];
  let arguments = (ins Gptc_F32Scalar:$scale, Gptc_I32Scalar:$good,
                       Gptc_I32Scalar:$updates, Gptc_F32Scalar:$found,
                       F64Attr:$growth, F64Attr:$backoff, I64Attr:$interval);
  let results = (outs Gptc_F32Scalar:$new_scale, Gptc_I32Scalar:$new_good,
                      Gptc_I32Scalar:$new_updates);
  let assemblyFormat = [{
    $scale `,` $good `,` $updates `,` $found `growth` $growth `backoff`
    $backoff `interval` $interval attr-dict
  }];
  let hasVerifier = 1;
}

def Gptc_LearningRateOp : Gptc_Op<"learning_rate", [Pure]> {
  let summary = "Learning rate at a step: linear warmup, then decay";
  let description = [{
    For the 0-based `step`: `peak * (step + 1) / warmup` while
    `step < warmup`; afterwards, with `p = (step - warmup) / (total -
    warmup)` clamped to [0, 1], `min + c (peak - min)` where `c` is
    `(1 + cos(pi p)) / 2` (`cosine`), `1 - p` (`linear`) or 1 (`constant`).

    ```mlir
    %lr = gptc.learning_rate %step peak 6.0e-04 min 6.0e-05 warmup 700 total 19073 cosine
    ```
  }];
  let arguments = (ins Gptc_I32Scalar:$step, F64Attr:$peak, F64Attr:$min,
                       I64Attr:$warmup, I64Attr:$total,
                       Gptc_LrDecay:$decay);
  let results = (outs Gptc_F32Scalar:$result);
  let assemblyFormat = [{
    $step `peak` $peak `min` $min `warmup` $warmup `total` $total $decay
    attr-dict
  }];
  let hasVerifier = 1;
}

def Gptc_AdamWOp : Gptc_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "One AdamW update of a parameter and its moments";
  let description = [{
    With `g = grad * scale` and `t = step + 1` (PyTorch's order):

    ```
    m' = beta1 m + (1 - beta1) g
    v' = beta2 v + (1 - beta2) g^2
    p' = p (1 - lr weight_decay)
    p' = p' - lr (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + eps)
    ```
    A weight decay of 0 leaves the parameter undecayed (biases, norms and,
    unless configured, embeddings). With `skip` nonzero (fp16's overflow
    flag) the results are the parameter and moments unchanged.

    ```mlir
    %p1, %m1, %v1 = gptc.adamw %p, %g, %m, %v lr %lr step %step scale %s
        beta1 0.9 beta2 0.95 eps 1.0e-08 decay 0.1 : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Gptc_FloatTensor:$param, Gptc_FloatTensor:$grad,
                       Gptc_FloatTensor:$m, Gptc_FloatTensor:$v,
                       Gptc_F32Scalar:$lr, Gptc_I32Scalar:$step,
                       Gptc_F32Scalar:$scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay,
                       Optional<Gptc_F32Scalar>:$skip);
  let results = (outs Gptc_FloatTensor:$new_param, Gptc_FloatTensor:$new_m,
                      Gptc_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `lr` $lr `step` $step `scale` $scale
    (`skip` $skip^)?
    `beta1` $beta1 `beta2` $beta2 `eps` $eps `decay` $weight_decay attr-dict
    `:` type($param)
  }];
  let hasVerifier = 1;
}

def Gptc_MultiAdamWOp : Gptc_Op<"multi_adamw", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptor]> {
  let summary = "AdamW over many parameters in one kernel";
  let description = [{
    The updates of several `gptc.adamw` ops that share the learning rate,
    step, clipping scale, skip flag and betas, as one op (formed by
    `gptc-fuse-optimizer`): parameter `i` is updated from `grads[i]`,
    `m[i]` and `v[i]` exactly as `gptc.adamw` would, with weight decay
    `decays[i]`. The results are the new parameters, then the new first
    moments, then the new second moments, in the operands' order. One
    kernel walks every tensor, so the runtime pays one launch (one
    parallel region on the CPU, one grid on a GPU) for the whole update.

    ```mlir
    %r:6 = gptc.multi_adamw (%w, %b) grads (%gw, %gb) m (%mw, %mb)
        v (%vw, %vb) lr %lr step %step scale %s beta1 0.9 beta2 0.95
        eps 1.0e-08 decays [0.1, 0.0] : tensor<8x4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Gptc_FloatTensor>:$params,
                       Variadic<Gptc_FloatTensor>:$grads,
                       Variadic<Gptc_FloatTensor>:$m,
                       Variadic<Gptc_FloatTensor>:$v,
                       Gptc_F32Scalar:$lr, Gptc_I32Scalar:$step,
                       Gptc_F32Scalar:$scale,
                       Optional<Gptc_F32Scalar>:$skip,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       DenseF64ArrayAttr:$decays);
  let results = (outs Variadic<Gptc_FloatTensor>:$results);
  let assemblyFormat = [{
    ` ` `(` $params `)` `grads` ` ` `(` $grads `)` `m` ` ` `(` $m `)`
    `v` ` ` `(` $v `)`
    `lr` $lr `step` $step `scale` $scale (`skip` $skip^)?
    `beta1` $beta1 `beta2` $beta2 `eps` $eps `decays` $decays attr-dict
    `:` type($params)
    custom<SameAsParams>(ref(type($params)), type($grads), type($m), type($v))
  }];
  let extraClassDeclaration = [{
    /// The number of parameters updated.
    unsigned getNumParams() { return getParams().size(); }
    ::mlir::Value getNewParam(unsigned i) { return getResult(i); }
    ::mlir::Value getNewM(unsigned i) { return getResult(getNumParams() + i); }
    ::mlir::Value getNewV(unsigned i) {
      return getResult(2 * getNumParams() + i);
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Gptc_ReshapeOp : Gptc_DiffOp<"reshape", [Pure]> {
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

def Gptc_TransposeOp : Gptc_DiffOp<"transpose", [Pure, InferTypeOpAdaptor]> {
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

def Gptc_SplitOp : Gptc_DiffOp<"split", [Pure]> {
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

def Gptc_CastOp : Gptc_DiffOp<"cast", [Pure, SameOperandsAndResultShape]> {
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
  let hasCanonicalizer = 1;
}

#endif // GPTC_DIALECT_GPTC_IR_GPTCOPS_TD
