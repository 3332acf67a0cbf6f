// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-plan-buffers))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-plan-buffers{alignment=256}))' | FileCheck %s --check-prefix=ALIGN

// A chain: %a dies once %b is computed, so %c reuses its memory; %b, read
// while %c is written, does not. The returned %d is the caller's: no
// offset (-1), no arena space (the runtime computes it in the caller's
// buffer).
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {gptc.arena_bytes = 256 : i64}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: 128>}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: -1>}
// ALIGN-LABEL: func.func @chain
// ALIGN-SAME: attributes {gptc.arena_bytes = 512 : i64}
// ALIGN: gptc.offsets = array<i64: 0>
// ALIGN: gptc.offsets = array<i64: 256>
// ALIGN: gptc.offsets = array<i64: 0>
// ALIGN: gptc.offsets = array<i64: -1>
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = gptc.gelu %x : tensor<4x8xf32>
  %b = gptc.gelu %a : tensor<4x8xf32>
  %c = gptc.gelu %b : tensor<4x8xf32>
  %d = gptc.gelu %c : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// A value used late stays alive across the others; the largest value is
// placed first; multi-result ops get one offset per result.
// CHECK-LABEL: func.func @long_lived
// CHECK-SAME: attributes {gptc.arena_bytes = 1152 : i64}
// CHECK: %[[BIG:.*]] = gptc.broadcast {{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.split {{.*}} {gptc.offsets = array<i64: 1024, 1088>}
// CHECK: gptc.reduce_sum {{.*}} {gptc.offsets = array<i64: 1024>}
// CHECK: gptc.add {{.*}} {gptc.offsets = array<i64: 1088>}
// CHECK: gptc.reduce_sum %[[BIG]] {{.*}} {gptc.offsets = array<i64: 1024>}
// CHECK: gptc.add {{.*}} {gptc.offsets = array<i64: -1>}
func.func @long_lived(%x: tensor<8xf32>) -> tensor<8xf32> {
  %big = gptc.broadcast %x [0] : tensor<8xf32> -> tensor<32x8xf32>
  %p:2 = gptc.split %x axis 0 : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
  %s = gptc.reduce_sum %big [0] : tensor<32x8xf32> -> tensor<8xf32>
  %t = gptc.add %s, %x : tensor<8xf32>
  %u = gptc.reduce_sum %big [0] : tensor<32x8xf32> -> tensor<8xf32>
  %r = gptc.add %t, %u : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// A reshape is a view: it shares its operand's offset, and that buffer
// stays alive until the reshape's last use (%b cannot take offset 0 while
// %w is read). A reshape of an argument (not in the arena) gets its own
// (here %b's, dead by then). A returned view keeps its root's place.
// CHECK-LABEL: func.func @reshape_view
// CHECK-SAME: attributes {gptc.arena_bytes = 256 : i64}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.reshape %{{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: 128>}
// CHECK: gptc.reshape %{{.*}} {gptc.offsets = array<i64: 0>}
// CHECK: gptc.add {{.*}} {gptc.offsets = array<i64: -1>}
// CHECK: gptc.reshape %[[X:.*]] {gptc.offsets = array<i64: 128>}
func.func @reshape_view(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<4x8xf32>, tensor<32xf32>) {
  %a = gptc.gelu %x : tensor<4x8xf32>
  %v = gptc.reshape %a : tensor<4x8xf32> -> tensor<32xf32>
  %b = gptc.gelu %x : tensor<4x8xf32>
  %w = gptc.reshape %v : tensor<32xf32> -> tensor<4x8xf32>
  %c = gptc.add %w, %b : tensor<4x8xf32>
  %y = gptc.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  return %v, %c, %y : tensor<32xf32>, tensor<4x8xf32>, tensor<32xf32>
}
