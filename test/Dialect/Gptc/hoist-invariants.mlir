// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-hoist-invariants))' | FileCheck %s

// The parameter's 16-bit copy and its reshape depend on no microbatch:
// they run once, before the loop. What reads the microbatch stays, and so
// do a broadcast of the parameter (larger than what it reads) and the
// positions' embedding (its ids, an iota, read nothing).
// CHECK-LABEL: func.func @cast_before_loop
//  CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x8xf32>, %[[P:.*]]: tensor<16x8xf32>)
//       CHECK: %[[W16:.*]] = gptc.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
//       CHECK: gptc.reshape %[[W16]]
//       CHECK: gptc.accumulate %[[X]] microbatches 2
//       CHECK:   ^bb0(%[[M:.*]]: tensor<2x8xbf16>):
//   CHECK-NOT:   gptc.cast %[[W]]
//       CHECK:   gptc.broadcast %[[W]]
//       CHECK:   gptc.iota
//       CHECK:   gptc.embedding
//       CHECK:   %[[Y:.*]] = gptc.matmul %[[M]], %[[W16]]
//       CHECK:   gptc.reshape %[[Y]]
func.func @cast_before_loop(%x: tensor<4x8xbf16>, %w: tensor<8x8xf32>, %p: tensor<16x8xf32>) -> (tensor<2x8xbf16>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) {
  %r:3 = gptc.accumulate %x microbatches 2 : (tensor<4x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) {
  ^bb0(%m: tensor<2x8xbf16>):
    %w16 = gptc.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
    %b = gptc.broadcast %w [0] : tensor<8x8xf32> -> tensor<2x8x8xf32>
    %ids = gptc.iota dim 1 : tensor<2x8xi32>
    %pos = gptc.embedding %ids, %p : tensor<2x8xi32>, tensor<16x8xf32> -> tensor<2x8x8xf32>
    %y = gptc.matmul %m, %w16 : tensor<2x8xbf16>, tensor<8x8xbf16> -> tensor<2x8xbf16>
    %flat = gptc.reshape %w16 : tensor<8x8xbf16> -> tensor<2x32xbf16>
    %row = gptc.reshape %y : tensor<2x8xbf16> -> tensor<2x8xbf16>
    %s = gptc.add %row, %y : tensor<2x8xbf16>
    gptc.yield %s, %b, %pos : tensor<2x8xbf16>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<2x8xbf16>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
}
