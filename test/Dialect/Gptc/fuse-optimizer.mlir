// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-fuse-optimizer))' | FileCheck %s

// The step's updates that share lr, step, scale and the betas become one
// gptc.multi_adamw where the last of them was, the weight decay per
// parameter; the results keep their uses.
// CHECK-LABEL: func.func @two
// CHECK-NOT: gptc.adamw
// CHECK: %[[R:.*]]:6 = gptc.multi_adamw (%arg0, %arg1) grads (%arg2, %arg3) m (%arg4, %arg5) v (%arg6, %arg7) lr %arg8 step %arg9 scale %arg10 beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 decays [1.000000e-01, 0.000000e+00] : tensor<8x4xf32>, tensor<4xf32>
// CHECK-NOT: gptc.adamw
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3, %[[R]]#4, %[[R]]#5
func.func @two(%w: tensor<8x4xf32>, %b: tensor<4xf32>, %gw: tensor<8x4xf32>, %gb: tensor<4xf32>,
               %mw: tensor<8x4xf32>, %mb: tensor<4xf32>, %vw: tensor<8x4xf32>, %vb: tensor<4xf32>,
               %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>)
    -> (tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4xf32>) {
  %w1, %mw1, %vw1 = gptc.adamw %w, %gw, %mw, %vw lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<8x4xf32>
  %b1, %mb1, %vb1 = gptc.adamw %b, %gb, %mb, %vb lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.0 : tensor<4xf32>
  return %w1, %b1, %mw1, %mb1, %vw1, %vb1 : tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4xf32>
}

// -----

// Updates with other betas, or another skip flag, go into other groups; a
// group of one stays a gptc.adamw.
// CHECK-LABEL: func.func @groups
// CHECK: gptc.adamw %arg0, {{.*}} beta1 8.000000e-01
// CHECK: gptc.multi_adamw (%arg0, %arg0) {{.*}} skip %arg5 beta1 9.000000e-01 {{.*}} decays [1.000000e-01, 1.000000e-01]
// CHECK-NOT: gptc.adamw
func.func @groups(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>, %skip: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a, %am, %av = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s skip %skip beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4xf32>
  %b, %bm, %bv = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s beta1 0.8 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4xf32>
  %c, %cm, %cv = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s skip %skip beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// An update whose result is used before the group's last update stays
// where it is (the fused op could not stand after its use).
// CHECK-LABEL: func.func @used_early
// CHECK: %[[A:.*]], %{{.*}}, %{{.*}} = gptc.adamw %arg0
// CHECK: %[[N:.*]] = gptc.global_norm %[[A]]
// CHECK: gptc.multi_adamw (%arg0, %arg0) {{.*}} decays [2.000000e-01, 3.000000e-01]
func.func @used_early(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>) {
  %a, %am, %av = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4xf32>
  %n = gptc.global_norm %a : tensor<4xf32>
  %b, %bm, %bv = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.2 : tensor<4xf32>
  %c, %cm, %cv = gptc.adamw %p, %g, %g, %g lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.3 : tensor<4xf32>
  return %n, %b, %c : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
