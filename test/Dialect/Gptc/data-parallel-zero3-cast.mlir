// ZeRO-3 with 16-bit copies of the parameters (what gptc-mixed-precision
// makes). A phase (forward, backward) that reads a parameter only through
// its 16-bit cast casts the slice and gathers 16-bit slices, half the
// bytes (w both ways, wte in the backward, where only the tied head's
// input gradient reads it); a phase that also reads the fp32 values
// gathers fp32 and casts the whole (wte in the forward, whose embedding
// reads fp32). The backward gets a cast and a gather of its own just
// before its first reader, so that no whole copy lives from the forward
// to the backward.
// RUN: gptc-opt %s --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = shard.all_gather %arg0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<5x4xf32> -> tensor<10x4xf32>
// CHECK-NEXT: gptc.embedding %{{.*}}, %[[E]]
// CHECK: %[[WS:.*]] = gptc.cast %arg1 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W:.*]] = shard.all_gather %[[WS]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<2x4xbf16> -> tensor<4x4xbf16>
// CHECK-NEXT: gptc.linear %{{.*}}, %[[W]]
// CHECK-NEXT: %[[EC:.*]] = gptc.cast %[[E]] : tensor<10x4xf32> -> tensor<10x4xbf16>
// CHECK-NEXT: gptc.linear %{{.*}}, %[[EC]]
// CHECK: gptc.cross_entropy
// CHECK-NOT: %[[W]]
// CHECK-NOT: %[[EC]]
// CHECK: %[[ES2:.*]] = gptc.cast %arg0 {gptc.rematerialize} : tensor<5x4xf32> -> tensor<5x4xbf16>
// CHECK-NEXT: %[[E2:.*]] = shard.all_gather %[[ES2]] on @mesh grid_axes = [0] gather_axis = 0 {gptc.rematerialize} : tensor<5x4xbf16> -> tensor<10x4xbf16>
// CHECK-NEXT: gptc.matmul %{{.*}}, %[[E2]]
// CHECK-NOT: %[[W]]
// CHECK-NOT: %[[EC]]
// CHECK: %[[WS2:.*]] = gptc.cast %arg1 {gptc.rematerialize} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W2:.*]] = shard.all_gather %[[WS2]] on @mesh grid_axes = [0] gather_axis = 0 {gptc.rematerialize} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// CHECK-NEXT: gptc.matmul %{{.*}}, %[[W2]]
// CHECK-NOT: %[[W]]
// CHECK-NOT: %[[EC]]
// CHECK-NOT: shard.all_gather
// CHECK: return
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, batch_size = 4>,
                   gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = 3, sequence_parallel = false>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte", gptc.embedding_table},
                     %w: tensor<4x4xf32> {gptc.param = "w"},
                     %tokens: tensor<2x5xi32> {gptc.input = #gptc.input<tokens>},
                     %labels: tensor<2x5xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %e = gptc.embedding %tokens, %wte : tensor<2x5xi32>, tensor<10x4xf32> -> tensor<2x5x4xf32>
    %ec = gptc.cast %e : tensor<2x5x4xf32> -> tensor<2x5x4xbf16>
    %wc = gptc.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %h = gptc.linear %ec, %wc : tensor<2x5x4xbf16>, tensor<4x4xbf16> -> tensor<2x5x4xbf16>
    %wtec = gptc.cast %wte : tensor<10x4xf32> -> tensor<10x4xbf16>
    %logits = gptc.linear %h, %wtec : tensor<2x5x4xbf16>, tensor<10x4xbf16> -> tensor<2x5x10xbf16>
    %lf = gptc.cast %logits : tensor<2x5x10xbf16> -> tensor<2x5x10xf32>
    %loss = gptc.cross_entropy %lf, %labels ignore -1 : tensor<2x5x10xf32>, tensor<2x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
