// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-form-kernels))' | FileCheck %s

// A chain of elementwise ops becomes one kernel; the value used twice
// inside it (%s) never leaves it, the two used outside are its results.
// CHECK-LABEL: func.func @chain
//  CHECK-SAME: (%[[A:.*]]: tensor<8x64xf32>, %[[B:.*]]: tensor<8x64xf32>)
//       CHECK: %[[K:.*]]:2 = gptc.kernel "chain_k0_add_gelu_gelu_grad"(%[[A]], %[[B]])
//       CHECK: ^bb0(%[[X:.*]]: tensor<8x64xf32>, %[[Y:.*]]: tensor<8x64xf32>):
//       CHECK:   %[[S:.*]] = gptc.add %[[X]], %[[Y]]
//       CHECK:   %[[G:.*]] = gptc.gelu %[[S]]
//       CHECK:   %[[D:.*]] = gptc.gelu_grad %[[S]], %[[G]]
//       CHECK:   gptc.yield %[[G]], %[[D]]
//       CHECK: return %[[K]]#0, %[[K]]#1
func.func @chain(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = gptc.add %a, %b : tensor<8x64xf32>
  %g = gptc.gelu %s : tensor<8x64xf32>
  %d = gptc.gelu_grad %s, %g : tensor<8x64xf32>
  return %g, %d : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// GEMMs stay library calls: the bias-free linear splits the elementwise
// ops into a kernel before it and one after it, since one kernel placed
// after the linear would define %g after its use.
// CHECK-LABEL: func.func @around_a_gemm
//       CHECK: %[[G:.*]] = gptc.kernel "around_a_gemm_k0_gelu"
//       CHECK: %[[L:.*]] = gptc.linear %[[G]]
//       CHECK: gptc.kernel "around_a_gemm_k1_add"(%[[L]], %[[G]])
//   CHECK-NOT: gptc.kernel
func.func @around_a_gemm(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %g = gptc.gelu %x : tensor<4x8xf32>
  %l = gptc.linear %g, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = gptc.add %l, %g : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Scalars (no dimension to split over threads) and f64 values of other
// shapes: the scalar add stays with the runtime, the f64 gelu is a kernel.
// CHECK-LABEL: func.func @scalar_and_f64
//       CHECK: gptc.add %{{.*}}, %{{.*}} : tensor<f32>
//       CHECK: gptc.kernel "scalar_and_f64_k0_gelu"
func.func @scalar_and_f64(%s: tensor<f32>, %x: tensor<3xf64>) -> (tensor<f32>, tensor<3xf64>) {
  %t = gptc.add %s, %s : tensor<f32>
  %g = gptc.gelu %x : tensor<3xf64>
  return %t, %g : tensor<f32>, tensor<3xf64>
}

// -----

// A region run per microbatch gets kernels of its own; numbering is per
// function.
// CHECK-LABEL: func.func @accumulate
//       CHECK: gptc.accumulate
//       CHECK:   gptc.kernel "accumulate_k0_gelu"
//       CHECK:   gptc.yield
func.func @accumulate(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %r = gptc.accumulate %x microbatches 2 : (tensor<4x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%m: tensor<2x8xf32>):
    %g = gptc.gelu %m : tensor<2x8xf32>
    gptc.yield %g : tensor<2x8xf32>
  }
  return %r : tensor<2x8xf32>
}

// -----

// An op with producers in two kernels merges them into the one it joins
// (the kernel placed at the op): the two casts and the sum are one
// kernel, the casts' values never leave it.
// CHECK-LABEL: func.func @merge_producers
//  CHECK-SAME: (%[[A:.*]]: tensor<8x64xbf16>, %[[B:.*]]: tensor<8x64xbf16>)
//       CHECK: %[[K:.*]] = gptc.kernel "merge_producers_k0_cast_cast_add"(%[[A]], %[[B]])
//       CHECK:   %[[X:.*]] = gptc.cast
//       CHECK:   %[[Y:.*]] = gptc.cast
//       CHECK:   %[[S:.*]] = gptc.add %[[X]], %[[Y]]
//       CHECK:   gptc.yield %[[S]]
//   CHECK-NOT: gptc.kernel
//       CHECK: return %[[K]]
func.func @merge_producers(%a: tensor<8x64xbf16>, %b: tensor<8x64xbf16>) -> tensor<8x64xf32> {
  %x = gptc.cast %a : tensor<8x64xbf16> -> tensor<8x64xf32>
  %y = gptc.cast %b : tensor<8x64xbf16> -> tensor<8x64xf32>
  %s = gptc.add %x, %y : tensor<8x64xf32>
  return %s : tensor<8x64xf32>
}

// -----

// A producer kernel whose value is used before the op stays a kernel of
// its own: placed at the op, the merged kernel would follow that use.
// CHECK-LABEL: func.func @merge_blocked
//       CHECK: %[[X:.*]] = gptc.kernel "merge_blocked_k0_cast"
//       CHECK: %[[L:.*]] = gptc.linear %[[X]]
//       CHECK: gptc.kernel "merge_blocked_k1_cast_add"(%{{.*}}, %[[X]])
func.func @merge_blocked(%a: tensor<8x64xbf16>, %b: tensor<8x64xbf16>, %w: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %x = gptc.cast %a : tensor<8x64xbf16> -> tensor<8x64xf32>
  %y = gptc.cast %b : tensor<8x64xbf16> -> tensor<8x64xf32>
  %l = gptc.linear %x, %w : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32>
  %s = gptc.add %y, %x : tensor<8x64xf32>
  return %s, %l : tensor<8x64xf32>, tensor<8x64xf32>
}
