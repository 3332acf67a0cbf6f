// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// adamw: the bias corrections once, on f64 scalars, then one elementwise
// generic with three results; the skip flag selects the old state.
// CHECK-LABEL: func.func @adamw
// CHECK: math.powf
// CHECK: math.powf
// CHECK: arith.cmpf une
// CHECK: %[[R:.*]]:3 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1, %arg2, %arg3 : {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
// CHECK:   math.sqrt
// CHECK:   arith.select
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @adamw(%p: tensor<4x3xf32>, %g: tensor<4x3xf32>, %m: tensor<4x3xf32>, %v: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>, %skip: tensor<f32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %p1, %m1, %v1 = gptc.adamw %p, %g, %m, %v lr %lr step %step scale %s skip %skip beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4x3xf32>
  return %p1, %m1, %v1 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// multi_adamw: one generic per parameter, sharing the scalars.
// CHECK-LABEL: func.func @multi_adamw
// CHECK: %[[A:.*]]:3 = linalg.generic {{.*}} ins(%arg0, %arg2, %arg4, %arg6 : {{.*}})
// CHECK: %[[B:.*]]:3 = linalg.generic {{.*}} ins(%arg1, %arg3, %arg5, %arg7 : {{.*}})
// CHECK: return %[[A]]#0, %[[B]]#0, %[[A]]#1, %[[B]]#1, %[[A]]#2, %[[B]]#2
func.func @multi_adamw(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %gw: tensor<4x3xf32>, %gb: tensor<3xf32>, %mw: tensor<4x3xf32>, %mb: tensor<3xf32>, %vw: tensor<4x3xf32>, %vb: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>) {
  %r:6 = gptc.multi_adamw (%w, %b) grads (%gw, %gb) m (%mw, %mb) v (%vw, %vb) lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decays [0.1, 0.0] : tensor<4x3xf32>, tensor<3xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>
}

// -----

// The norm: each input's squares summed in f64, the square root of the
// total rounded to f32; clipping and the schedule on f64 scalars.
// CHECK-LABEL: func.func @norm_and_schedule
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<4x3xf32>) outs(%{{.*}} : tensor<f64>)
// CHECK:   arith.extf %{{.*}} : f32 to f64
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<3xf32>) outs(%{{.*}} : tensor<f64>)
// CHECK: math.sqrt %{{.*}} : f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: tensor.from_elements
// CHECK: arith.minimumf
// CHECK: math.cos
// CHECK: arith.select
func.func @norm_and_schedule(%g: tensor<4x3xf32>, %b: tensor<3xf32>, %step: tensor<i32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %n = gptc.global_norm %g, %b : tensor<4x3xf32>, tensor<3xf32>
  %c = gptc.clip_scale %n max 1.0
  %lr = gptc.learning_rate %step peak 6.0e-4 min 6.0e-5 warmup 10 total 100 "cosine"
  return %n, %c, %lr : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// fp16's loss scaling: found_inf as a reduction (x - x is NaN exactly for
// inf and NaN), the scaler's update on scalars.
// CHECK-LABEL: func.func @loss_scaling
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%arg0 : tensor<8xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK:   arith.subf
// CHECK:   arith.cmpf uno
// CHECK:   arith.select
// CHECK:   arith.maximumf
// CHECK: arith.cmpi sge
// CHECK: tensor.from_elements {{.*}} : tensor<f32>
// CHECK: tensor.from_elements {{.*}} : tensor<i32>
// CHECK: tensor.from_elements {{.*}} : tensor<i32>
func.func @loss_scaling(%g: tensor<8xf32>, %scale: tensor<f32>, %good: tensor<i32>, %updates: tensor<i32>) -> (tensor<f32>, tensor<i32>, tensor<i32>) {
  %found = gptc.found_inf %g : tensor<8xf32>
  %s, %k, %u = gptc.loss_scale_update %scale, %good, %updates, %found growth 2.0 backoff 0.5 interval 2000
  return %s, %k, %u : tensor<f32>, tensor<i32>, tensor<i32>
}
