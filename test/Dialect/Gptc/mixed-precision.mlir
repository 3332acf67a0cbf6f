// RUN: gptc-opt %s --split-input-file --gptc-mixed-precision --canonicalize | FileCheck %s
// RUN: gptc-opt %s --split-input-file --gptc-mixed-precision --gptc-autodiff | FileCheck %s --check-prefix=GRAD

// bf16: the linear layer's input, weight and bias are cast to bf16, its
// bf16 result back to f32; the rest of the graph is unchanged.
// CHECK-LABEL: func.func @forward
//  CHECK-SAME: (%[[W:.*]]: tensor<8x4xf32> {gptc.param = "w"}, %[[B:.*]]: tensor<8xf32> {gptc.param = "b"}, %[[X:.*]]: tensor<2x4xf32>
//       CHECK: %[[XH:.*]] = gptc.cast %[[X]] : tensor<2x4xf32> -> tensor<2x4xbf16>
//       CHECK: %[[WH:.*]] = gptc.cast %[[W]] : tensor<8x4xf32> -> tensor<8x4xbf16>
//       CHECK: %[[BH:.*]] = gptc.cast %[[B]] : tensor<8xf32> -> tensor<8xbf16>
//       CHECK: %[[YH:.*]] = gptc.linear %[[XH]], %[[WH]], %[[BH]] : tensor<2x4xbf16>, tensor<8x4xbf16>, tensor<8xbf16> -> tensor<2x8xbf16>
//       CHECK: %[[Y:.*]] = gptc.cast %[[YH]] : tensor<2x8xbf16> -> tensor<2x8xf32>
//       CHECK: gptc.cross_entropy %[[Y]]

// The backward GEMMs are bf16 too; each gradient is cast back, so the
// parameters' gradients (and the update) are fp32.
// GRAD-LABEL: func.func @forward_backward
//       GRAD: %[[DYH:.*]] = gptc.cast %{{.*}} : tensor<2x8xf32> -> tensor<2x8xbf16>
//   GRAD-DAG: gptc.matmul %[[DYH]], %{{.*}} : tensor<2x8xbf16>, tensor<8x4xbf16> -> tensor<2x4xbf16>
//   GRAD-DAG: %[[DWH:.*]] = gptc.matmul %[[DYH]], %{{.*}} transpose_lhs : tensor<2x8xbf16>, tensor<2x4xbf16> -> tensor<8x4xbf16>
//   GRAD-DAG: %[[DBH:.*]] = gptc.reduce_sum %[[DYH]] [0] : tensor<2x8xbf16> -> tensor<8xbf16>
//   GRAD-DAG: %[[DW:.*]] = gptc.cast %[[DWH]] : tensor<8x4xbf16> -> tensor<8x4xf32>
//   GRAD-DAG: %[[DB:.*]] = gptc.cast %[[DBH]] : tensor<8xbf16> -> tensor<8xf32>
//       GRAD: return %{{.*}}, %[[DW]], %[[DB]] : tensor<f32>, tensor<8x4xf32>, tensor<8xf32>
module attributes {gptc.precision = #gptc.precision<bf16>} {
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %b: tensor<8xf32> {gptc.param = "b"},
                     %x: tensor<2x4xf32>, %l: tensor<2xi32>) -> tensor<f32> {
    %y = gptc.linear %x, %w, %b : tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// fp16 places the same casts with f16 (its loss scaling: loss-scaling.mlir).
// CHECK-LABEL: func.func @forward
//       CHECK: %[[XH:.*]] = gptc.cast %{{.*}} : tensor<2x4xf32> -> tensor<2x4xf16>
//       CHECK: %[[WH:.*]] = gptc.cast %{{.*}} : tensor<8x4xf32> -> tensor<8x4xf16>
//       CHECK: %[[YH:.*]] = gptc.linear %[[XH]], %[[WH]] : tensor<2x4xf16>, tensor<8x4xf16> -> tensor<2x8xf16>
//       CHECK: %[[Y:.*]] = gptc.cast %[[YH]] : tensor<2x8xf16> -> tensor<2x8xf32>
//       CHECK: gptc.cross_entropy %[[Y]]
// GRAD-LABEL: func.func @forward_backward
//   GRAD-DAG: %[[DWH:.*]] = gptc.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x8xf16>, tensor<2x4xf16> -> tensor<8x4xf16>
//   GRAD-DAG: %[[DW:.*]] = gptc.cast %[[DWH]] : tensor<8x4xf16> -> tensor<8x4xf32>
//       GRAD: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<8x4xf32>
module attributes {gptc.precision = #gptc.precision<fp16>} {
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %x: tensor<2x4xf32>, %l: tensor<2xi32>) -> tensor<f32> {
    %y = gptc.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Attention takes 16-bit operands as autocast's scaled_dot_product_attention
// does: a projection's bf16 result feeds it directly (the cast to f32 and
// back folds away), its bf16 result is widened for the f32 graph after it.
// CHECK-LABEL: func.func @forward
//       CHECK: %[[QH:.*]] = gptc.linear %{{.*}} -> tensor<2x4x8xbf16>
//       CHECK: %[[Q:.*]] = gptc.cast %[[QH]] : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
//       CHECK: %[[AH:.*]] = gptc.causal_attention %[[QH]], %[[QH]], %[[QH]] heads 2 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
//       CHECK: %[[A:.*]] = gptc.cast %[[AH]] : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
//       CHECK: gptc.add %[[A]], %[[Q]]
// Its gradient is bf16 too: the output's gradient cast to bf16 in, the
// three operands' gradients out.
// GRAD-LABEL: func.func @forward_backward
//       GRAD: %[[DA:.*]] = gptc.cross_entropy_grad
//       GRAD: %[[DAH:.*]] = gptc.cast %[[DA]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
//       GRAD: gptc.causal_attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[DAH]] heads 2 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
module attributes {gptc.precision = #gptc.precision<bf16>} {
  func.func @forward(%w: tensor<8x8xf32> {gptc.param = "w"}, %x: tensor<2x4x8xf32>, %l: tensor<2x4xi32>) -> tensor<f32> {
    %q = gptc.linear %x, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %a = gptc.causal_attention %q, %q, %q heads 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
    %r = gptc.add %a, %q : tensor<2x4x8xf32>
    %loss = gptc.cross_entropy %r, %l : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// fp32 leaves the module as it is.
// CHECK-LABEL: func.func @forward
//   CHECK-NOT: gptc.cast
//       CHECK: gptc.linear %{{.*}} : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
module attributes {gptc.precision = #gptc.precision<fp32>} {
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %x: tensor<2x4xf32>, %l: tensor<2xi32>) -> tensor<f32> {
    %y = gptc.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
