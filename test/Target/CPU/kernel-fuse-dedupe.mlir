// RUN: gptc-opt %s --split-input-file -p "builtin.module(func.func(convert-gptc-to-linalg{full=1},gptc-kernel-fuse))" | FileCheck %s

// gptc-kernel-fuse computes twice-computed values once: the loss and its
// gradient in one kernel each find the logits' row maxima (each op's
// lowering has its own reduction, starting from its own fill of -inf).
// One maximum is left, read by both; the sums differ (the loss's also
// picks the label's logit) and both stay.
// CHECK-LABEL: func.func @loss_and_grad
//       CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 : tensor<2x4x7xf32>)
//       CHECK:   arith.maximumf
//   CHECK-NOT:   arith.maximumf
//       CHECK: linalg.generic {{.*}} ins(%arg0, %arg1, %[[MAX]] :
//   CHECK-NOT:   arith.maximumf
//       CHECK: linalg.generic {{.*}} ins(%arg0, %[[MAX]] :
//   CHECK-NOT:   arith.maximumf
//       CHECK: linalg.generic {{.*}} ins(%arg0, %arg1, %[[MAX]],
//   CHECK-NOT:   arith.maximumf
//       CHECK: return
func.func @loss_and_grad(%logits: tensor<2x4x7xf32>, %labels: tensor<2x4xi32>, %g: tensor<f32>, %n: tensor<f32>) -> (tensor<f32>, tensor<2x4x7xf32>) {
  %l = gptc.cross_entropy %logits, %labels over %n ignore -1 : tensor<2x4x7xf32>, tensor<2x4xi32>, tensor<f32> -> tensor<f32>
  %d = gptc.cross_entropy_grad %logits, %labels, %g over %n ignore -1 : tensor<2x4x7xf32>, tensor<2x4xi32>, tensor<f32>, tensor<f32> -> tensor<2x4x7xf32>
  return %l, %d : tensor<f32>, tensor<2x4x7xf32>
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Not the same: another start (a fill of 1.0, not 0.0), or another body.
// CHECK-LABEL: func.func @different
// CHECK-COUNT-3: linalg.generic
func.func @different(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%z0 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %o1 = linalg.fill ins(%one : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%o1 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %s2 = linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%z2 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %s0, %s1, %s2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
