// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// causal_attention: q, k and v viewed per head (B x T x H x D), the scores
// as a contraction over D into B x H x T x T, the causal row maximum and
// sum of exponentials of the scaled scores (keys after the query masked
// with j <= i), then the output as the probability-weighted sum of values
// (each probability recomputed where it is used), merged back to B x T x C.
// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1], [2, 3]] output_shape [2, 5, 2, 4]
// CHECK: %[[K:.*]] = tensor.expand_shape %arg1
// CHECK: %[[V:.*]] = tensor.expand_shape %arg2
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : {{.*}}) outs(%{{.*}} : tensor<2x2x5x5xf32>)
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<2x2x5x5xf32>) outs(%{{.*}} : tensor<2x2x5xf32>)
// CHECK:   arith.cmpi ule
// CHECK:   arith.maximumf
// CHECK: %[[Z:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[M]] : {{.*}}) outs(%{{.*}} : tensor<2x2x5xf32>)
// CHECK:   math.exp
// CHECK: %[[O:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[M]], %[[Z]], %[[V]] : {{.*}}) outs(%{{.*}} : tensor<2x5x2x4xf32>)
// CHECK: tensor.collapse_shape %[[O]] {{\[}}[0], [1], [2, 3]] : tensor<2x5x2x4xf32> into tensor<2x5x8xf32>
func.func @attention(%q: tensor<2x5x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %o = gptc.causal_attention %q, %k, %v heads 2 : tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32> -> tensor<2x5x8xf32>
  return %o : tensor<2x5x8xf32>
}

// -----

// causal_attention_grad: the forward's statistics recomputed, then dv, the
// probabilities' gradients, their row dot products, the scores' gradients
// and dq, dk; bf16 operands accumulate in f32 and round at the end.
// CHECK-LABEL: func.func @attention_grad_bf16
// CHECK-COUNT-3: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK: tensor.collapse_shape {{.*}} into tensor<1x4x8xf32>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @attention_grad_bf16(%q: tensor<1x4x8xbf16>, %dy: tensor<1x4x8xbf16>) -> (tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>) {
  %dq, %dk, %dv = gptc.causal_attention_grad %q, %q, %q, %dy heads 2 : tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16> -> tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>
  return %dq, %dk, %dv : tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>
}
