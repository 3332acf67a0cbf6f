// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' -o /dev/null

// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @add
//  CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>)
//       CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
//       CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[ID2]], #[[ID2]], #[[ID2]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:   ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%[[E]] : tensor<4x8xf32>)
//       CHECK:   ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
//       CHECK:   %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
//       CHECK:   linalg.yield %[[S]] : f32
//       CHECK: return %[[R]]
//   CHECK-NOT: gptc.add
func.func @add(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = gptc.add %a, %b : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// GELU in f32: the runtime's rational tanh (clamp to +-7.905, a degree-13
// odd numerator over a degree-6 even denominator), no math.tanh call.
// CHECK-LABEL: func.func @gelu_f32
//   CHECK-DAG: arith.constant 0.797884583 : f32
//   CHECK-DAG: arith.constant -2.76076837E-16 : f32
//   CHECK-DAG: arith.constant 7.90531111 : f32
//       CHECK: linalg.generic
//       CHECK:   arith.minimumf
//       CHECK:   arith.maximumf
//       CHECK:   arith.divf
//   CHECK-NOT:   math.tanh
//       CHECK:   linalg.yield
func.func @gelu_f32(%x: tensor<16xf32>) -> tensor<16xf32> {
  %g = gptc.gelu %x : tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// The exact GELU in f32: 0.5 x (1 + erf(x / sqrt 2)) with the runtime's
// rational erf (clamped to +-4), no tanh; its gradient adds the Gaussian
// density x exp(-x^2 / 2) / sqrt(2 pi).
// CHECK-LABEL: func.func @gelu_exact_f32
//   CHECK-DAG: arith.constant 0.398942292 : f32
//   CHECK-DAG: arith.constant -5.000000e-01 : f32
//   CHECK-DAG: arith.constant 0.707106769 : f32
//   CHECK-DAG: arith.constant 4.000000e+00 : f32
//   CHECK-DAG: arith.constant -2.72614237E-10 : f32
//   CHECK-NOT: arith.constant 0.797884583 : f32
//       CHECK: linalg.generic
//       CHECK:   linalg.yield
//       CHECK: linalg.generic
//       CHECK:   math.exp
//       CHECK:   linalg.yield
func.func @gelu_exact_f32(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %g = gptc.gelu %x exact : tensor<16xf32>
  %d = gptc.gelu_grad %x, %g exact : tensor<16xf32>
  return %g, %d : tensor<16xf32>, tensor<16xf32>
}

// -----

// In f64 (the finite-difference checks) GELU uses math.tanh.
// CHECK-LABEL: func.func @gelu_grad_f64
//       CHECK: linalg.generic
//  CHECK-SAME:   iterator_types = ["parallel", "parallel", "parallel"]
//       CHECK:   math.tanh %{{.*}} : f64
//       CHECK:   linalg.yield
func.func @gelu_grad_f64(%x: tensor<2x3x4xf64>, %dy: tensor<2x3x4xf64>) -> tensor<2x3x4xf64> {
  %d = gptc.gelu_grad %x, %dy : tensor<2x3x4xf64>
  return %d : tensor<2x3x4xf64>
}

// -----

// Casts round to nearest even (arith.truncf) or widen exactly (extf).
// CHECK-LABEL: func.func @casts
//       CHECK: linalg.generic
//       CHECK:   arith.truncf %{{.*}} : f32 to bf16
//       CHECK: linalg.generic
//       CHECK:   arith.extf %{{.*}} : bf16 to f32
func.func @casts(%x: tensor<8xf32>) -> tensor<8xf32> {
  %h = gptc.cast %x : tensor<8xf32> -> tensor<8xbf16>
  %f = gptc.cast %h : tensor<8xbf16> -> tensor<8xf32>
  return %f : tensor<8xf32>
}

// -----

// Ops without a lowering stay (partial conversion); with full=1 they are an
// error.
// (gptc.shard_offset needs the rank: it stays for the collectives.)
// CHECK-LABEL: func.func @no_lowering
//       CHECK: gptc.shard_offset
shard.grid @mesh(shape = 2)
func.func @no_lowering() -> tensor<i32> {
  // expected-error@+1 {{'gptc.shard_offset' op has no lowering to linalg}}
  %o = gptc.shard_offset on @mesh grid_axes = [0] block 4 : tensor<i32>
  return %o : tensor<i32>
}

// -----

// gptc.unary and gptc.binary: one linalg.generic each; erf in f32 is the
// runtime's rational approximation (clamp to +-4), pow is math.powf.
// CHECK-LABEL: func.func @unary_binary
//   CHECK-DAG: arith.constant 4.000000e+00 : f32
//   CHECK-DAG: arith.constant -2.72614237E-10 : f32
//       CHECK: linalg.generic
//       CHECK:   arith.minimumf
//       CHECK:   arith.divf
//   CHECK-NOT:   math.erf
//       CHECK:   linalg.yield
//       CHECK: linalg.generic
//       CHECK:   math.powf
//       CHECK: linalg.generic
//       CHECK:   arith.negf
//       CHECK:   math.exp
//       CHECK:   arith.divf
func.func @unary_binary(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %e = gptc.unary erf %x : tensor<16xf32>
  %p = gptc.binary pow %e, %y : tensor<16xf32>
  %s = gptc.unary sigmoid %p : tensor<16xf32>
  return %s : tensor<16xf32>
}
