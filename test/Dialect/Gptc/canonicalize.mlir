// RUN: gptc-opt %s --split-input-file --canonicalize --cse | FileCheck %s

// CHECK-LABEL: func.func @cast_to_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT: gptc.cast
// CHECK: return %[[X]]
func.func @cast_to_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = gptc.cast %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A cast that changes the type stays: rounding is not undone.
// CHECK-LABEL: func.func @cast_round_trip_is_kept
// CHECK: %[[A:.*]] = gptc.cast %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK: %[[B:.*]] = gptc.cast %[[A]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK: return %[[B]]
func.func @cast_round_trip_is_kept(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = gptc.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = gptc.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Widening is exact, so narrowing back gives the value itself: a 16-bit
// GEMM result widened to f32 and cast back to bf16 for attention is the
// GEMM's result.
// CHECK-LABEL: func.func @widen_then_narrow_folds
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>, %[[H:.*]]: tensor<4xf16>, %[[F:.*]]: tensor<4xf32>)
// CHECK-NOT: gptc.cast
// CHECK: return %[[X]], %[[H]], %[[F]]
func.func @widen_then_narrow_folds(%x: tensor<4xbf16>, %h: tensor<4xf16>, %f: tensor<4xf32>)
    -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>) {
  %0 = gptc.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %1 = gptc.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = gptc.cast %h : tensor<4xf16> -> tensor<4xf64>
  %3 = gptc.cast %2 : tensor<4xf64> -> tensor<4xf16>
  %4 = gptc.cast %f : tensor<4xf32> -> tensor<4xf64>
  %5 = gptc.cast %4 : tensor<4xf64> -> tensor<4xf32>
  return %1, %3, %5 : tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>
}

// -----

// The same through a split: the pieces of a widened bf16 value cast back
// to bf16 are the pieces of the bf16 value (one split after CSE); a piece
// cast to another type keeps the f32 split.
// CHECK-LABEL: func.func @narrow_split_pieces
// CHECK-SAME: (%[[X:.*]]: tensor<2x12xbf16>)
// CHECK: %[[W:.*]] = gptc.cast %[[X]] : tensor<2x12xbf16> -> tensor<2x12xf32>
// CHECK: %[[S:.*]]:3 = gptc.split %[[W]] axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-DAG: %[[H:.*]] = gptc.cast %[[S]]#2 : tensor<2x4xf32> -> tensor<2x4xf16>
// CHECK-DAG: %[[N:.*]]:3 = gptc.split %[[X]] axis 1 : tensor<2x12xbf16> -> tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>
// CHECK: return %[[N]]#0, %[[N]]#1, %[[H]]
func.func @narrow_split_pieces(%x: tensor<2x12xbf16>)
    -> (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xf16>) {
  %w = gptc.cast %x : tensor<2x12xbf16> -> tensor<2x12xf32>
  %q, %k, %v = gptc.split %w axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  %qh = gptc.cast %q : tensor<2x4xf32> -> tensor<2x4xbf16>
  %kh = gptc.cast %k : tensor<2x4xf32> -> tensor<2x4xbf16>
  %vh = gptc.cast %v : tensor<2x4xf32> -> tensor<2x4xf16>
  return %qh, %kh, %vh : tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xf16>
}

// -----

// Between two 16-bit types (bf16 -> f16 is no widening) both casts stay.
// CHECK-LABEL: func.func @cross_16_bit_casts_are_kept
// CHECK: gptc.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf16>
// CHECK: gptc.cast %{{.*}} : tensor<4xf16> -> tensor<4xbf16>
func.func @cross_16_bit_casts_are_kept(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = gptc.cast %x : tensor<4xbf16> -> tensor<4xf16>
  %1 = gptc.cast %0 : tensor<4xf16> -> tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = gptc.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NOT: gptc.reshape
// CHECK: return %[[R]]
func.func @reshape_chain(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  %0 = gptc.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = gptc.reshape %0 : tensor<32xf32> -> tensor<2x16xf32>
  return %1 : tensor<2x16xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_identity
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gptc.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = gptc.reshape %0 : tensor<32xf32> -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gptc.transpose %x [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_inverse(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = gptc.transpose %x [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = gptc.transpose %0 [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Two transposes that do not cancel stay.
// CHECK-LABEL: func.func @transpose_not_inverse
// CHECK-COUNT-2: gptc.transpose
func.func @transpose_not_inverse(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = gptc.transpose %x [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = gptc.transpose %0 [1, 2, 0] : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----

// Constants are uniqued; dead pure ops disappear.
// CHECK-LABEL: func.func @constants
// CHECK: %[[C:.*]] = gptc.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NOT: gptc.constant
// CHECK-NOT: gptc.gelu
// CHECK: gptc.add %[[C]], %[[C]]
func.func @constants() -> tensor<4xf32> {
  %a = gptc.constant dense<2.0> : tensor<4xf32>
  %b = gptc.constant dense<2.0> : tensor<4xf32>
  %dead = gptc.gelu %a : tensor<4xf32>
  %0 = gptc.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
