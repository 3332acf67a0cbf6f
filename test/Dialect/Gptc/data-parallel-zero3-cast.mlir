// ZeRO-3 with a 16-bit copy of a parameter (what gptc-mixed-precision
// makes): the forward casts the gathered slice, and the backward, which
// reads the copy again for the input gradient, gets a gather and a cast of
// its own just before that reader, so that neither whole copy lives from
// the forward to the backward.
// RUN: gptc-opt %s --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = gptc.cast %[[G]] : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT: gptc.linear %{{.*}}, %[[C]]
// CHECK: gptc.cross_entropy
// CHECK-NOT: %[[C]]
// CHECK: %[[G2:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [0] gather_axis = 0 {gptc.rematerialize} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C2:.*]] = gptc.cast %[[G2]] {gptc.rematerialize} : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT: gptc.matmul %{{.*}}, %[[C2]]
// CHECK-NOT: %[[C]]
// CHECK: return
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = "cosine", beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, batch_size = 4>,
                   gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = 3, sequence_parallel = false>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte", gptc.embedding_table},
                     %w: tensor<4x4xf32> {gptc.param = "w"},
                     %tokens: tensor<2x5xi32> {gptc.input = "tokens"},
                     %labels: tensor<2x5xi32> {gptc.input = "labels"}) -> tensor<f32> {
    %e = gptc.embedding %tokens, %wte : tensor<2x5xi32>, tensor<10x4xf32> -> tensor<2x5x4xf32>
    %ec = gptc.cast %e : tensor<2x5x4xf32> -> tensor<2x5x4xbf16>
    %wc = gptc.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %h = gptc.linear %ec, %wc : tensor<2x5x4xbf16>, tensor<4x4xbf16> -> tensor<2x5x4xbf16>
    %hf = gptc.cast %h : tensor<2x5x4xbf16> -> tensor<2x5x4xf32>
    %loss = gptc.cross_entropy %hf, %labels ignore -1 : tensor<2x5x4xf32>, tensor<2x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
