// RUN: gptc-run %s --print-program | FileCheck %s

// One kernel per op, one value per SSA value; inputs and outputs named
// after their roles; each op's attributes in its own message (`params`);
// constants as bytes.

// CHECK: format_version: 3
// CHECK: model: "m"
// CHECK: functions {
// CHECK-NEXT: name: "forward"
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: inputs: 1
// CHECK-NEXT: inputs: 2
// CHECK-NEXT: outputs: 7
// Value 0 (proto3 omits a zero id):
// CHECK-NEXT: values {
// CHECK-NEXT: type {
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 10
// CHECK-NEXT: shape: 4
// CHECK-NEXT: }
// CHECK-NEXT: name: "wte"
// CHECK-NEXT: offset: -1
// Each input and output says what it holds for the caller.
// CHECK-NEXT: role: ROLE_PARAMETER
// CHECK:      id: 1
// CHECK-NEXT: type {
// CHECK-NEXT: dtype: I32
// CHECK:      name: "tokens"
// CHECK:      role: ROLE_TOKENS
// CHECK:      id: 7
// CHECK:      name: "loss"
// CHECK:      role: ROLE_LOSS
// CHECK:      kernels {
// CHECK-NEXT: op: EMBEDDING
// CHECK-NEXT: inputs: 1
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: outputs: 3
// CHECK-NEXT: location: "model.pbtxt:3:5 (wte)"
// CHECK:      kernels {
// CHECK-NEXT: op: CONSTANT
// CHECK-NEXT: outputs: 4
// CHECK-NEXT: location: "{{.*}}export-program.mlir:{{[0-9]+}}:{{[0-9]+}}"
// Four little-endian 0.5f (0x3f000000):
// CHECK-NEXT: constant {
// CHECK-NEXT: data: "\000\000\000?\000\000\000?\000\000\000?\000\000\000?"
// CHECK-NEXT: }
// CHECK:      kernels {
// CHECK-NEXT: op: LAYER_NORM
// CHECK-NEXT: inputs: 3
// CHECK-NEXT: inputs: 4
// CHECK-NEXT: inputs: 4
// CHECK-NEXT: outputs: 5
// CHECK-NEXT: location:
// CHECK-NEXT: norm {
// CHECK-NEXT: epsilon: 1e-05
// CHECK-NEXT: }
// CHECK:      kernels {
// CHECK-NEXT: op: LINEAR
// CHECK-NEXT: inputs: 5
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: outputs: 6
// CHECK:      kernels {
// CHECK-NEXT: op: CROSS_ENTROPY
// CHECK-NEXT: inputs: 6
// CHECK-NEXT: inputs: 2
// CHECK-NEXT: outputs: 7
// CHECK-NEXT: location:
// CHECK-NEXT: labels {
// CHECK-NEXT: ignore_index: -1
// CHECK-NEXT: }

// The other parameter messages.
// CHECK-LABEL: name: "params"
// CHECK:      op: MATMUL
// CHECK:      matmul {
// CHECK-NEXT: transpose_rhs: true
// CHECK-NEXT: }
// CHECK:      op: CAUSAL_ATTENTION
// CHECK:      attention {
// CHECK-NEXT: num_heads: 2
// CHECK-NEXT: }
// CHECK:      op: TRANSPOSE
// CHECK:      dims {
// CHECK-NEXT: dims: 0
// CHECK-NEXT: dims: 2
// CHECK-NEXT: dims: 1
// CHECK-NEXT: }
// CHECK:      op: REDUCE_SUM
// CHECK:      dims {
// CHECK-NEXT: dims: 0
// CHECK-NEXT: dims: 1
// CHECK-NEXT: }
// Without an ignored label, `labels` is empty.
// CHECK:      op: CROSS_ENTROPY
// CHECK:      labels {
// CHECK-NEXT: }
// An op without attributes carries no message.
// CHECK:      op: GLOBAL_NORM
// CHECK-NEXT: inputs:
// CHECK-NEXT: outputs:
// CHECK-NEXT: location:
// CHECK-NEXT: }
// CHECK:      op: CLIP_SCALE
// CHECK:      clip {
// CHECK-NEXT: max_norm: 1
// CHECK-NEXT: }
// CHECK:      op: LEARNING_RATE
// CHECK:      schedule {
// CHECK-NEXT: peak: 0.0006
// CHECK-NEXT: min: 6e-05
// CHECK-NEXT: warmup: 10
// CHECK-NEXT: total: 100
// CHECK-NEXT: decay: LINEAR
// CHECK-NEXT: }
// CHECK:      op: ADAMW
// CHECK:      adamw {
// CHECK-NEXT: beta1: 0.9
// CHECK-NEXT: beta2: 0.95
// CHECK-NEXT: eps: 1e-08
// CHECK-NEXT: weight_decay: 0.1
// CHECK-NEXT: }

// An op without a CPU kernel is an error at the op.
// RUN: not gptc-run %S/Inputs/no-kernel.mlir 2>&1 | FileCheck %s --check-prefix=NOKERNEL
// NOKERNEL: no-kernel.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'shard.all_to_all' op has no CPU kernel
// RUN: not gptc-run %S/Inputs/min-reduce.mlir 2>&1 | FileCheck %s --check-prefix=MIN
// MIN: min-reduce.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'shard.all_reduce' op has no CPU kernel for this reduction (only sum and max)

// A sum all-reduce lowers to ALL_REDUCE over its grid axes, and the
// function records the grid.
// RUN: gptc-run %S/../Runtime/Inputs/all-reduce-2d.mlir --print-program | FileCheck %s --check-prefix=ALLREDUCE
// ALLREDUCE: op: ALL_REDUCE
// ALLREDUCE-NEXT: inputs: 0
// ALLREDUCE-NEXT: outputs: 1
// ALLREDUCE-NEXT: location:
// ALLREDUCE-NEXT: collective {
// ALLREDUCE-NEXT: grid_axes: 0
// ALLREDUCE-NEXT: }
// ALLREDUCE: op: ALL_REDUCE
// ALLREDUCE: collective {
// ALLREDUCE-NEXT: grid_axes: 1
// ALLREDUCE-NEXT: }
// ALLREDUCE: op: ALL_REDUCE
// ALLREDUCE: collective {
// ALLREDUCE-NEXT: grid_axes: 0
// ALLREDUCE-NEXT: grid_axes: 1
// ALLREDUCE-NEXT: }
// ALLREDUCE: grid_shape: 2
// ALLREDUCE-NEXT: grid_shape: 2

module @m {
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte"},
                     %tokens: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
                     %labels: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> (tensor<f32> {gptc.output = #gptc.output<loss>}) {
    %e = gptc.embedding %tokens, %wte : tensor<2x3xi32>, tensor<10x4xf32> -> tensor<2x3x4xf32> loc("wte"("model.pbtxt":3:5))
    %half = gptc.constant dense<0.5> : tensor<4xf32>
    %n = gptc.layer_norm %e, %half, %half eps 1.0e-05 : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
    %l = gptc.linear %n, %wte : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
    %loss = gptc.cross_entropy %l, %labels ignore -1 : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }

  func.func @params(%a: tensor<2x4x6xf32> {gptc.input = #gptc.input<graph "a">},
                    %q: tensor<2x4x6xf32> {gptc.input = #gptc.input<graph "q">},
                    %labels: tensor<2x4xi32> {gptc.input = #gptc.input<labels>},
                    %p: tensor<4x6xf32> {gptc.param = "p"},
                    %step: tensor<i32> {gptc.input = #gptc.input<step>})
      -> (tensor<2x4x4xf32> {gptc.output = #gptc.output<graph "mm">}, tensor<2x4x6xf32> {gptc.output = #gptc.output<graph "att">},
          tensor<2x6x4xf32> {gptc.output = #gptc.output<graph "t">}, tensor<6xf32> {gptc.output = #gptc.output<graph "sum">},
          tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<4x6xf32> {gptc.output = #gptc.output<graph "p1">}) {
    %mm = gptc.matmul %a, %a transpose_rhs : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x4xf32>
    %att = gptc.causal_attention %q, %q, %q heads 2 : tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
    %t = gptc.transpose %a [0, 2, 1] : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
    %sum = gptc.reduce_sum %a [0, 1] : tensor<2x4x6xf32> -> tensor<6xf32>
    %loss = gptc.cross_entropy %a, %labels : tensor<2x4x6xf32>, tensor<2x4xi32> -> tensor<f32>
    %n = gptc.global_norm %p : tensor<4x6xf32>
    %s = gptc.clip_scale %n max 1.0
    %lr = gptc.learning_rate %step peak 6.0e-4 min 6.0e-5 warmup 10 total 100 "linear"
    %p1, %m1, %v1 = gptc.adamw %p, %p, %p, %p lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4x6xf32>
    return %mm, %att, %t, %sum, %loss, %p1 : tensor<2x4x4xf32>, tensor<2x4x6xf32>, tensor<2x6x4xf32>, tensor<6xf32>, tensor<f32>, tensor<4x6xf32>
  }
}
