// RUN: gptc-run %s --print-program | FileCheck %s

// One kernel per op, one value per SSA value; inputs and outputs named
// after their roles; attributes in `ints`/`floats`; constants as bytes.

// CHECK: format_version: 1
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
// Four little-endian 0.5f (0x3f000000):
// CHECK-NEXT: data: "\000\000\000?\000\000\000?\000\000\000?\000\000\000?"
// CHECK-NEXT: location: "{{.*}}export-program.mlir:{{[0-9]+}}:{{[0-9]+}}"
// CHECK:      kernels {
// CHECK-NEXT: op: LAYER_NORM
// CHECK-NEXT: inputs: 3
// CHECK-NEXT: inputs: 4
// CHECK-NEXT: inputs: 4
// CHECK-NEXT: outputs: 5
// CHECK-NEXT: floats: 1e-05
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
// CHECK-NEXT: ints: 1
// CHECK-NEXT: ints: -1

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
// ALLREDUCE-NEXT: ints: 0
// ALLREDUCE: op: ALL_REDUCE
// ALLREDUCE: ints: 1
// ALLREDUCE: op: ALL_REDUCE
// ALLREDUCE: ints: 0
// ALLREDUCE-NEXT: ints: 1
// ALLREDUCE: grid_shape: 2
// ALLREDUCE-NEXT: grid_shape: 2

module @m {
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte"},
                     %tokens: tensor<2x3xi32> {gptc.input = "tokens"},
                     %labels: tensor<2x3xi32> {gptc.input = "labels"}) -> (tensor<f32> {gptc.output = "loss"}) {
    %e = gptc.embedding %tokens, %wte : tensor<2x3xi32>, tensor<10x4xf32> -> tensor<2x3x4xf32> loc("wte"("model.pbtxt":3:5))
    %half = gptc.constant dense<0.5> : tensor<4xf32>
    %n = gptc.layer_norm %e, %half, %half eps 1.0e-05 : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
    %l = gptc.linear %n, %wte : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
    %loss = gptc.cross_entropy %l, %labels ignore -1 : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
