// gptc-pipeline-verify reads the stage functions as programs and
// simulates them (sends buffered, receives waiting): a program that cannot
// finish is reported at the receive that waits, with the chain of waits.
// RUN: gptc-opt --gptc-pipeline-verify --split-input-file --verify-diagnostics %s

// Stage 0 waits for a gradient before sending the activation it needs.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func @chunk0(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk0_backward(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> { return %g : tensor<4xf32> }
  func.func @chunk1(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk1_backward(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func private @stage0(%x: tensor<4xf32>) attributes {gptc.pipeline_stage = 0 : i64} {
    %e = tensor.empty() : tensor<4xf32>
    // expected-error @+1 {{the pipeline schedule deadlocks: stage 0 waits for the gradient of microbatch 0 from stage 1, which waits for the activation of microbatch 0 from stage 0 (a cycle)}}
    %g = shard.recv %e on @mesh grid_axes = [0] source = [1] {gptc.chunk = 0 : i64, gptc.gradient, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %a = call @chunk0(%x) {gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %s = shard.send %a on @mesh grid_axes = [0] destination = [1] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b = call @chunk0_backward(%x, %g) {gptc.microbatch = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1() attributes {gptc.pipeline_stage = 1 : i64} {
    %e = tensor.empty() : tensor<4xf32>
    %a = shard.recv %e on @mesh grid_axes = [0] source = [0] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b = call @chunk1_backward(%a) {gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %s = shard.send %b on @mesh grid_axes = [0] destination = [0] {gptc.chunk = 0 : i64, gptc.gradient, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}

// -----

// Stage 1 waits for microbatch 1, which stage 0 never sends.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func @chunk0(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk0_backward(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> { return %g : tensor<4xf32> }
  func.func @chunk1(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk1_backward(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func private @stage0(%x: tensor<4xf32>) {
    %a = call @chunk0(%x) {gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %s = shard.send %a on @mesh grid_axes = [0] destination = [1] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1() {
    %e = tensor.empty() : tensor<4xf32>
    // expected-error @+1 {{the pipeline schedule deadlocks: stage 1 waits for the activation of microbatch 1 from stage 0, which never sends it}}
    %a = shard.recv %e on @mesh grid_axes = [0] source = [0] {gptc.chunk = 1 : i64, gptc.microbatch = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}

// -----

// A chunk on the wrong stage, and a stage without its program.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func @chunk0(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk0_backward(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> { return %g : tensor<4xf32> }
  func.func @chunk1(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk1_backward(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func private @stage0(%x: tensor<4xf32>) {
    // expected-error @+1 {{runs chunk 1 on stage 0, but chunk c belongs to stage c mod 2}}
    %a = call @chunk1(%x) {gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1() {
    return
  }
}

// -----

// expected-error @+1 {{the pipeline has 2 stages but no @stage1 program}}
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp"], kinds = ["pipeline"]>} {
  shard.grid @mesh(shape = 2)
  func.func private @stage0() {
    return
  }
}

// -----

// A send over the data axis, not the pipeline's.
module attributes {gptc.parallel = #gptc.parallel<axes = ["pp", "dp"], kinds = ["pipeline", "data"]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @chunk0(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  func.func @chunk0_backward(%x: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> { return %g : tensor<4xf32> }
  func.func private @stage0(%x: tensor<4xf32>) {
    // expected-error @+1 {{in a pipeline stage must name one stage on the pipeline axis (0)}}
    %s = shard.send %x on @mesh grid_axes = [1] destination = [1] {gptc.chunk = 1 : i64, gptc.microbatch = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
  func.func private @stage1() {
    return
  }
}
