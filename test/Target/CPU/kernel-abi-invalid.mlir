// RUN: gptc-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(func.func(gptc-kernel-abi))'

// The runtime splits a kernel's rows over its threads: every result needs
// dimension 0 of one extent.
// expected-error@+1 {{a kernel's results need dimension 0 of one static extent, got 'tensor<4x8xf32>'}}
func.func @extents_differ(%a: tensor<8x4xf32>, %b: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  return %a, %b : tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// expected-error@+1 {{a kernel's results need dimension 0 of one static extent, got 'tensor<f32>'}}
func.func @scalar_result(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}
