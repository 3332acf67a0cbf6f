// gptc-verify-collectives proves that every group of ranks issues the same
// collectives in the same order and that no stage waits forever; a
// mismatch or a wait that cannot end is an error at one rank's op naming
// the other's.
// RUN: gptc-opt %s --split-input-file --gptc-verify-collectives --verify-diagnostics | FileCheck %s

// Two stages agree: the same all_reduces over the pipeline axis in the
// same order, a data-axis collective within a stage (its group runs one
// program), and a send matched by a receive. Nothing changes.
// CHECK-LABEL: func.func private @stage0
// CHECK: shard.all_reduce
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp", "dp"], kinds = ["pipeline", "data"]>} {
  shard.grid @mesh(shape = 2x2)
  func.func private @stage0(%a: tensor<4xf32>, %b: tensor<8xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    %s = shard.send %a on @mesh grid_axes = [0] destination = [1] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %d = shard.all_gather %a on @mesh grid_axes = [1] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %y = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    return
  }
  func.func private @stage1(%a: tensor<4xf32>, %b: tensor<8xf32>) attributes {gptc.pipeline_stage = 1 : i64} {
    %r = shard.recv %a on @mesh grid_axes = [0] source = [0] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %x = shard.all_reduce %r on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %y = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    return
  }
}

// -----

// One stage's two collectives over the pipeline axis reordered.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func private @stage0(%a: tensor<4xf32>, %b: tensor<8xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    // expected-note@+1 {{stage 0's collective: shard.all_reduce of tensor<4xf32> over grid axes [0]}}
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %y = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    return
  }
  func.func private @stage1(%a: tensor<4xf32>, %b: tensor<8xf32>) attributes {gptc.pipeline_stage = 1 : i64} {
    // expected-error@+1 {{collectives disagree: stage 1 issues shard.all_reduce of tensor<8xf32> over grid axes [0] where stage 0 issues shard.all_reduce of tensor<4xf32> over grid axes [0] (the group's collective #1)}}
    %y = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return
  }
}

// -----

// The same shapes with another reduction.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func private @stage0(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    // expected-note@+1 {{stage 0's collective}}
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return
  }
  func.func private @stage1(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 1 : i64} {
    // expected-error@+1 {{collectives disagree: stage 1 issues shard.all_reduce of tensor<4xf32>}}
    %x = shard.all_reduce %a on @mesh grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
    return
  }
}

// -----

// A collective moved before the send the other stage waits for: stage 0
// waits in it, stage 1 in its receive.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func private @stage0(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    // expected-error@+1 {{the stages' communication cannot finish: stage 0 waits in shard.all_reduce of tensor<4xf32> over grid axes [0] (a collective of the stages); stage 1 waits to receive from stage 0 (microbatch 0, chunk 1, an activation)}}
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %s = shard.send %a on @mesh grid_axes = [0] destination = [1] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 1 : i64} {
    %r = shard.recv %a on @mesh grid_axes = [0] source = [0] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %x = shard.all_reduce %r on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return
  }
}

// -----

// Collectives inside a called chunk count where the call is; a stage that
// skips one the other issues never meets it.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func private @chunk(%a: tensor<4xf32>) -> tensor<4xf32> {
    %x = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %x : tensor<4xf32>
  }
  func.func private @stage0(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    // expected-error@+1 {{the stages' communication cannot finish: stage 0 waits in shard.all_reduce of tensor<4xf32> over grid axes [0] (a collective of the stages); stage 1 has finished}}
    %x = func.call @chunk(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1(%a: tensor<4xf32>) attributes {gptc.pipeline_stage = 1 : i64} {
    return
  }
}
