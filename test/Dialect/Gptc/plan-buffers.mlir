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

// -----

// An all-reduce whose operand nothing else reads is planned in place: its
// result is stored over its operand, and that buffer stays alive until the
// result's last use, so %b (planned while %r lives) cannot take it. On a
// GPU the reduction runs on its own stream; no kernel may reuse its
// buffer before the result is read.
// CHECK-LABEL: func.func @all_reduce_in_place
// CHECK-SAME: attributes {gptc.arena_bytes = 256 : i64}
// CHECK: gptc.gelu %{{.*}} {gptc.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: shard.all_reduce {{.*}} {gptc.offsets = array<i64: [[A]]>}
// CHECK-NOT: gptc.offsets = array<i64: [[A]]>
// CHECK: gptc.add {{.*}} {gptc.offsets = array<i64: -1>}
shard.grid @mesh(shape = 2)
func.func @all_reduce_in_place(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = gptc.gelu %x : tensor<4x8xf32>
  %r = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = gptc.gelu %x : tensor<4x8xf32>
  %c = gptc.add %r, %b : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// A bucket's operands, read by nothing else, are one interval: placed one
// after another (20 bytes, then the next 64-byte boundary), each result
// over its operand, so the runtime reduces [0, 88) with one call.
// CHECK-LABEL: func.func @bucket_contiguous
// CHECK-SAME: attributes {gptc.arena_bytes = 128 : i64}
// CHECK: gptc.gelu %arg0 {gptc.offsets = array<i64: 0>}
// CHECK: gptc.gelu %arg1 {gptc.offsets = array<i64: 64>}
// CHECK: gptc.bucket_all_reduce {{.*}} {gptc.offsets = array<i64: 0, 64>}
shard.grid @mesh(shape = 2)
func.func @bucket_contiguous(%x: tensor<5xf32>, %y: tensor<3x2xf32>)
    -> (tensor<5xf32>, tensor<3x2xf32>) {
  %a = gptc.gelu %x : tensor<5xf32>
  %b = gptc.gelu %y : tensor<3x2xf32>
  %r:2 = gptc.bucket_all_reduce %a, %b on @mesh grid_axes = [0] : tensor<5xf32>, tensor<3x2xf32>
  %c = gptc.add %r#0, %x : tensor<5xf32>
  %d = gptc.add %r#1, %y : tensor<3x2xf32>
  return %c, %d : tensor<5xf32>, tensor<3x2xf32>
}

// -----

// An operand read after the bucket must keep its value: the bucket is
// planned apart from its operands (the runtime packs it around its call);
// so is one whose result the caller stores.
// CHECK-LABEL: func.func @bucket_apart
// CHECK: gptc.gelu %arg0 {gptc.offsets = array<i64: 0>}
// CHECK: gptc.gelu %arg1 {gptc.offsets = array<i64: 64>}
// CHECK: gptc.bucket_all_reduce {{.*}} {gptc.offsets = array<i64: 128, -1>}
shard.grid @mesh(shape = 2)
func.func @bucket_apart(%x: tensor<16xf32>, %y: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>) {
  %a = gptc.gelu %x : tensor<16xf32>
  %b = gptc.gelu %y : tensor<16xf32>
  %r:2 = gptc.bucket_all_reduce %a, %b on @mesh grid_axes = [0] : tensor<16xf32>, tensor<16xf32>
  %e = gptc.add %a, %r#0 : tensor<16xf32>
  return %e, %r#1 : tensor<16xf32>, tensor<16xf32>
}
