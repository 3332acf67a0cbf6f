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
    Rewrites each gptc op that has a lowering into `linalg.generic` ops on
    tensors in destination-passing style (the destination a
    `tensor.empty`), with the scalar arithmetic in `arith` and `math`. One
    pattern set per op family (`populateGptcElementwiseToLinalgPatterns`).
    The formulas are the runtime's: the tanh of GELU is the same [13/6]
    rational approximation in f32 (vectorizable, within a few ulp of
    `tanh`), `math.tanh` in f64.

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
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"
  ];
}

#endif // GPTC_CONVERSION_PASSES_TD
