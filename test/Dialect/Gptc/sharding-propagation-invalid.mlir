// Bad seeds and layouts the rules cannot join: an error at the op, with a
// note where the other layout came from; never a crash.
// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-sharding-propagation

module attributes {gptc.parallel = #gptc.parallel<axes = ["dp", "tp"], kinds = ["data", "tensor"]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @forward(%x: tensor<8x32xf32>, %w: tensor<32x32xf32> {gptc.param = "w"}) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    // expected-error @+1 {{seeds a split over grid axes other than the tensor axis (1); the data and pipeline axes come from the mesh}}
    %ws = shard.shard %w to %s : tensor<32x32xf32>
    %y = gptc.linear %x, %ws : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    return %y : tensor<8x32xf32>
  }
}

// -----

module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>, %w: tensor<32x32xf32> {gptc.param = "w"}) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %t = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
    %ws = shard.shard %w to %s : tensor<32x32xf32>
    // expected-error @+1 {{seeds parameter 'w' split on dimension 1, but another seed made it split on dimension 0}}
    %wt = shard.shard %w to %t : tensor<32x32xf32>
    %y = gptc.linear %x, %ws : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    return %y : tensor<8x32xf32>
  }
}

// -----

// Two column-parallel layers in a row: the second needs a whole input.
module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>, %w1: tensor<32x32xf32> {gptc.param = "w1"}, %w2: tensor<32x32xf32> {gptc.param = "w2"}) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %w1s = shard.shard %w1 to %s : tensor<32x32xf32>
    %w2s = shard.shard %w2 to %s : tensor<32x32xf32>
    // expected-note @+1 {{made split on dimension 1 by this gptc.linear}}
    %h = gptc.linear %x, %w1s : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    // expected-error @+2 {{sharding conflict: needs the result of gptc.linear whole on the tensor axis, but it is split on dimension 1}}
    // expected-note @+1 {{gptc-sharding-propagation does not insert resharding collectives; change the seeds}}
    %y = gptc.linear %h, %w2s : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    return %y : tensor<8x32xf32>
  }
}

// -----

// A split that reaches an op computing on whole values (layer norm).
module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>, %w: tensor<32x32xf32> {gptc.param = "w"}, %g: tensor<32xf32> {gptc.param = "g"}, %b: tensor<32xf32> {gptc.param = "b"}) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %ws = shard.shard %w to %s : tensor<32x32xf32>
    // expected-note @+1 {{made split on dimension 1 by this gptc.linear}}
    %h = gptc.linear %x, %ws : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    // expected-error @+2 {{'gptc.layer_norm' op sharding conflict: needs the result of gptc.linear whole on the tensor axis}}
    // expected-note @+1 {{does not insert resharding collectives}}
    %y = gptc.layer_norm %h, %g, %b eps 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<8x32xf32>
    return %y : tensor<8x32xf32>
  }
}

// -----

module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[], [], [0]] : !shard.sharding
    // expected-error @+1 {{seeds a split of dimension 2 of 'tensor<8x32xf32>'}}
    %xs = shard.shard %x to %s : tensor<8x32xf32>
    return %xs : tensor<8x32xf32>
  }
}

// -----

module attributes {gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    // expected-error @+1 {{seeds a sharding, but the mesh has no tensor axis larger than 1}}
    %xs = shard.shard %x to %s : tensor<8x32xf32>
    return %xs : tensor<8x32xf32>
  }
}

// -----

module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
    return %x : tensor<8x32xf32>
  }
  func.func @other(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    // expected-error @+1 {{seeds a sharding outside @forward (the function gptc shards)}}
    %xs = shard.shard %x to %s : tensor<8x32xf32>
    return %xs : tensor<8x32xf32>
  }
}
