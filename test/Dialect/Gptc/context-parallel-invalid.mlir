// What gptc-context-parallel cannot cut along the sequence: an error at
// the op or the function, never a crash.
// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-context-parallel

// An op that is not token-wise (a transpose that moves the sequence).
module attributes {gptc.parallel = #gptc.parallel<axes = ["cp"], kinds = ["context"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%t: tensor<2x8xi32>, %w: tensor<16x4xf32> {gptc.param = "w"}) -> tensor<2x4x8xf32> {
    %e = gptc.embedding %t, %w : tensor<2x8xi32>, tensor<16x4xf32> -> tensor<2x8x4xf32>
    // expected-error @+1 {{context parallelism does not know how to run this op on a part of the sequence}}
    %x = gptc.transpose %e [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
    return %x : tensor<2x4x8xf32>
  }
}

// -----

// A sequence of 6 does not cut into 2 x 2 chunks.
module attributes {gptc.parallel = #gptc.parallel<axes = ["cp"], kinds = ["context"]>} {
  shard.grid @mesh(shape = 2)
  // expected-error @+1 {{cannot cut a sequence of 6 into 2 x 2 context-parallel chunks}}
  func.func @forward(%t: tensor<2x6xi32>, %w: tensor<16x4xf32> {gptc.param = "w"}) -> tensor<2x6x4xf32> {
    %e = gptc.embedding %t, %w : tensor<2x6xi32>, tensor<16x4xf32> -> tensor<2x6x4xf32>
    return %e : tensor<2x6x4xf32>
  }
}

// -----

// An input that is not batch x sequence tokens.
module attributes {gptc.parallel = #gptc.parallel<axes = ["cp"], kinds = ["context"]>} {
  shard.grid @mesh(shape = 2)
  // expected-error @+1 {{context parallelism needs token inputs of shape batch x sequence, got 'tensor<2x8x4xf32>'}}
  func.func @forward(%x: tensor<2x8x4xf32>, %w: tensor<4x4xf32> {gptc.param = "w"}) -> tensor<2x8x4xf32> {
    %y = gptc.linear %x, %w : tensor<2x8x4xf32>, tensor<4x4xf32> -> tensor<2x8x4xf32>
    return %y : tensor<2x8x4xf32>
  }
}

// -----

// A token-wise op that mixes the rank's tokens with a whole-sequence
// activation.
module attributes {gptc.parallel = #gptc.parallel<axes = ["cp"], kinds = ["context"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%t: tensor<2x8xi32>, %w: tensor<16x4xf32> {gptc.param = "w"}) -> tensor<2x8x4xf32> {
    %e = gptc.embedding %t, %w : tensor<2x8xi32>, tensor<16x4xf32> -> tensor<2x8x4xf32>
    %c = arith.constant dense<1.0> : tensor<2x8x4xf32>
    // expected-error @+1 {{mixes this rank's part of the sequence with a value over the whole sequence}}
    %y = gptc.add %e, %c : tensor<2x8x4xf32>
    return %y : tensor<2x8x4xf32>
  }
}

// -----

// Sequence parallelism cuts the sequence over the tensor axis already.
// expected-error @+1 {{context parallelism and sequence parallelism both cut the sequence: use one of them}}
module attributes {gptc.parallel = #gptc.parallel<axes = ["tp", "cp"], kinds = ["tensor", "context"], sequence_parallel = true>} {
  shard.grid @mesh(shape = 2x2)
  func.func @forward(%t: tensor<2x8xi32>, %w: tensor<16x4xf32> {gptc.param = "w"}) -> tensor<2x8x4xf32> {
    %e = gptc.embedding %t, %w : tensor<2x8xi32>, tensor<16x4xf32> -> tensor<2x8x4xf32>
    return %e : tensor<2x8x4xf32>
  }
}
