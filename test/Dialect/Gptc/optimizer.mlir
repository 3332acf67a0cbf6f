// RUN: gptc-opt %s --split-input-file --gptc-autodiff --gptc-optimizer | FileCheck %s

// A matrix decays, a bias and an embedding table do not; every update
// shares one norm, clip scale and learning rate.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[E:.*]]: tensor<10x4xf32> {gptc.embedding_table, gptc.param = "wte"}, %[[W:.*]]: tensor<3x4xf32> {gptc.param = "w"}, %[[B:.*]]: tensor<3xf32> {gptc.param = "b"},
// CHECK-SAME: %[[ME:.*]]: tensor<10x4xf32> {gptc.state = #gptc.state<m "wte">}, %[[MW:.*]]: tensor<3x4xf32> {gptc.state = #gptc.state<m "w">}, %[[MB:.*]]: tensor<3xf32> {gptc.state = #gptc.state<m "b">},
// CHECK-SAME: %[[VE:.*]]: tensor<10x4xf32> {gptc.state = #gptc.state<v "wte">}, %[[VW:.*]]: tensor<3x4xf32> {gptc.state = #gptc.state<v "w">}, %[[VB:.*]]: tensor<3xf32> {gptc.state = #gptc.state<v "b">},
// CHECK-SAME: %[[STEP:.*]]: tensor<i32> {gptc.input = #gptc.input<step>}, %[[T:.*]]: tensor<2x5xi32> {gptc.batch = {microbatches = 1 : i64, rows = 2 : i64}, gptc.input = #gptc.input<tokens>}, %[[L:.*]]: tensor<2x5xi32> {gptc.batch = {microbatches = 1 : i64, rows = 2 : i64}, gptc.input = #gptc.input<labels>})
// CHECK-SAME: -> (tensor<10x4xf32> {gptc.param = "wte"}, tensor<3x4xf32> {gptc.param = "w"}, tensor<3xf32> {gptc.param = "b"},
// CHECK-SAME: tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<f32> {gptc.output = #gptc.output<grad_norm>}, tensor<f32> {gptc.output = #gptc.output<lr>})
// The forward-backward computation is inlined:
// CHECK: %[[LOSS:.*]] = gptc.cross_entropy
// CHECK: %[[DE:.*]] = gptc.embedding_grad
// CHECK: %[[NORM:.*]] = gptc.global_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<10x4xf32>, tensor<3x4xf32>, tensor<3xf32>
// CHECK: %[[SCALE:.*]] = gptc.clip_scale %[[NORM]] max 5.000000e-01
// CHECK: %[[LR:.*]] = gptc.learning_rate %[[STEP]] peak 1.000000e-02 min 1.000000e-03 warmup 2 total 10 linear
// CHECK: %[[P0:.*]], %[[M0:.*]], %[[V0:.*]] = gptc.adamw %[[E]], %{{.*}}, %[[ME]], %[[VE]] lr %[[LR]] step %[[STEP]] scale %[[SCALE]] beta1 8.000000e-01 beta2 9.000000e-01 eps 9.9999999999999995E-7 decay 0.000000e+00 : tensor<10x4xf32>
// CHECK: %[[P1:.*]], %[[M1:.*]], %[[V1:.*]] = gptc.adamw %[[W]], {{.*}} decay 2.500000e-01 : tensor<3x4xf32>
// CHECK: %[[P2:.*]], %[[M2:.*]], %[[V2:.*]] = gptc.adamw %[[B]], {{.*}} decay 0.000000e+00 : tensor<3xf32>
// CHECK: return %[[P0]], %[[P1]], %[[P2]], %[[M0]], %[[M1]], %[[M2]], %[[V0]], %[[V1]], %[[V2]], %[[LOSS]], %[[NORM]], %[[LR]]
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 2, total_steps = 10, decay = linear, beta1 = 0.8, beta2 = 0.9, eps = 1.0e-6, weight_decay = 0.25, decay_embeddings = false, grad_clip = 0.5>} {
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte", gptc.embedding_table},
                     %w: tensor<3x4xf32> {gptc.param = "w"}, %b: tensor<3xf32> {gptc.param = "b"},
                     %tokens: tensor<2x5xi32> {gptc.input = #gptc.input<tokens>},
                     %labels: tensor<2x5xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %e = gptc.embedding %tokens, %wte : tensor<2x5xi32>, tensor<10x4xf32> -> tensor<2x5x4xf32>
    %h = gptc.linear %e, %w, %b : tensor<2x5x4xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<2x5x3xf32>
    %loss = gptc.cross_entropy %h, %labels : tensor<2x5x3xf32>, tensor<2x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// With decay_embeddings, the embedding table decays too.
// CHECK-LABEL: func.func @train_step
// CHECK: gptc.adamw {{.*}} decay 1.000000e-01 : tensor<10x4xf32>
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte", gptc.embedding_table},
                     %tokens: tensor<2x5xi32> {gptc.input = #gptc.input<tokens>},
                     %labels: tensor<2x5xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %e = gptc.embedding %tokens, %wte : tensor<2x5xi32>, tensor<10x4xf32> -> tensor<2x5x4xf32>
    %h = gptc.linear %e, %wte : tensor<2x5x4xf32>, tensor<10x4xf32> -> tensor<2x5x10xf32>
    %loss = gptc.cross_entropy %h, %labels : tensor<2x5x10xf32>, tensor<2x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}


// -----

// Gradient accumulation: the data inputs stack 3 microbatches of 2 rows (a
// step of 5 rows: one slot is padding); the step's real tokens are counted
// once and normalize every microbatch's cross-entropy; gptc.accumulate runs
// the forward-backward computation per microbatch (not unrolled) and sums
// the loss and gradients, which the norm and the update then use once.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<6x5xi32> {gptc.batch = {microbatches = 3 : i64, rows = 5 : i64}, gptc.input = #gptc.input<tokens>}
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<6x5xi32> {gptc.batch = {microbatches = 3 : i64, rows = 5 : i64}, gptc.input = #gptc.input<labels>}
// CHECK: %[[N:.*]] = gptc.count_tokens %[[L]] ignore -1 : tensor<6x5xi32>
// CHECK: %[[SUMS:.*]]:3 = gptc.accumulate %[[T]], %[[L]] microbatches 3 : (tensor<6x5xi32>, tensor<6x5xi32>) -> (tensor<f32>, tensor<10x4xf32>, tensor<3x4xf32>) {
// CHECK-NEXT: ^bb0(%[[MT:.*]]: tensor<2x5xi32>, %[[ML:.*]]: tensor<2x5xi32>):
// CHECK: gptc.embedding %[[MT]]
// CHECK: %[[PART:.*]] = gptc.cross_entropy %{{.*}}, %[[ML]] over %[[N]] ignore -1
// CHECK: gptc.cross_entropy_grad %{{.*}}, %[[ML]], %{{.*}} over %[[N]] ignore -1
// CHECK: gptc.yield %[[PART]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<10x4xf32>, tensor<3x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %{{.*}} = gptc.global_norm %[[SUMS]]#1, %[[SUMS]]#2
// CHECK-COUNT-2: gptc.adamw
// CHECK: return {{.*}}, %[[SUMS]]#0,
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, accumulation_steps = 3, batch_size = 5>} {
  func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte", gptc.embedding_table},
                     %w: tensor<3x4xf32> {gptc.param = "w"},
                     %tokens: tensor<2x5xi32> {gptc.input = #gptc.input<tokens>},
                     %labels: tensor<2x5xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %e = gptc.embedding %tokens, %wte : tensor<2x5xi32>, tensor<10x4xf32> -> tensor<2x5x4xf32>
    %h = gptc.linear %e, %w : tensor<2x5x4xf32>, tensor<3x4xf32> -> tensor<2x5x3xf32>
    %loss = gptc.cross_entropy %h, %labels ignore -1 : tensor<2x5x3xf32>, tensor<2x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
