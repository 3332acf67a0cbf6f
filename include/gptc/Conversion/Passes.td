//===- Passes.td - gptc conversion passes ------------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_CONVERSION_PASSES_TD
#define GPTC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertGptcToLinalgPass
    : InterfacePass<"convert-gptc-to-linalg", "mlir::FunctionOpInterface"> {
  let summary = "Lower gptc ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Rewrites each gptc op that has a lowering into linalg ops on tensors in
    destination-passing style (the destination a `tensor.empty`, filled
    with the identity of a reduction), with the scalar arithmetic in
    `arith` and `math`. One pattern set per op family: elementwise (add,
    gelu, gelu_grad, cast: one `linalg.generic`), data movement (constant,
    iota, reshape, transpose, split, concat, broadcast, reduce_sum:
    `tensor` ops, `linalg.transpose`/`broadcast`, reductions as
    `linalg.generic`), contractions (matmul, linear: `linalg.matmul` /
    `linalg.batch_matmul` after `linalg.transpose` of transposed operands)
    row normalizations (layer_norm, softmax and their gradients:
    reductions over the last dimension, then elementwise passes) and the
    ends of the model (embedding and its scatter-add gradient,
    cross_entropy and its gradient: the label's logit as a masked sum, no
    gather) and the optimizer (the norm's sums in f64, the schedule,
    clipping and fp16's loss scaler on scalars, AdamW and multi_adamw as
    elementwise generics with three results). 16-bit floats accumulate in
    f32.
    The formulas are the runtime's: the tanh of GELU is the same [13/6]
    rational approximation in f32 (vectorizable, within a few ulp of
    `tanh`), `math.tanh` in f64; layer norm's variance is two-pass.
    Causal attention and its gradient lower to the reference form (the
    scores as a `B x H x T x T` tensor, probabilities recomputed where
    used; not a flash-style tiling). `gptc.accumulate` becomes an `scf.for`
    over the microbatches carrying the sums. `shard_offset` (the rank's
    index) and the collectives (`shard` ops) have no lowering, and
    `gptc.kernel` regions are lowered with their kernels; on the CPU only the elementwise
    family is compiled (the others run as library calls, see
    `hasLinalgLowering`).

    ```mlir
    %y = gptc.gelu %x : tensor<4x8xf32>
    // becomes
    %e = tensor.empty() : tensor<4x8xf32>
    %y = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) { ... }
    ```
    Ops without a lowering are left as they are (the pass is partial); with
    `full`, one left behind is an error.
  }];
  let options = [
    Option<"full", "full", "bool", "false",
           "Fail on a gptc op that has no lowering">
  ];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // GPTC_CONVERSION_PASSES_TD
