// fp16's dynamic loss scaling, built by gptc-autodiff (the seed) and
// gptc-optimizer (the scaler's state, the overflow test, the skip).
// RUN: gptc-opt %s --split-input-file --gptc-mixed-precision --gptc-autodiff | FileCheck %s --check-prefix=SEED
// RUN: gptc-opt %s --split-input-file --gptc-mixed-precision --gptc-autodiff --gptc-optimizer | FileCheck %s --check-prefix=STEP
// RUN: gptc-opt %s --split-input-file --gptc-mixed-precision --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s --check-prefix=DP

// The backward is seeded with the loss scale, a new last argument; the
// loss returned is the unscaled one.
// SEED-LABEL: func.func @forward_backward
//  SEED-SAME: %[[L:[^:]*]]: tensor<2xi32> {gptc.input = #gptc.input<labels>}, %[[S:[^:]*]]: tensor<f32> {gptc.input = #gptc.input<loss_scale>})
//       SEED: %[[LOSS:.*]] = gptc.cross_entropy %[[Y:.*]], %[[L]]
//       SEED: gptc.cross_entropy_grad %[[Y]], %[[L]], %[[S]]
//       SEED: return %[[LOSS]],

// The step takes the scaler's state after `step` (the scale starts at the
// initial one) and returns its next value and the overflow flag. The
// overflow test reads the norm of the scaled gradients; the clip scale
// unscales them; AdamW counts the updates applied, not the steps, and
// skips on overflow, the flag's maximum over the grid's ranks.
// STEP-LABEL: func.func @train_step
//  STEP-SAME: %[[STEP:[^:]*]]: tensor<i32> {gptc.input = #gptc.input<step>},
//  STEP-SAME: %[[S:[^:]*]]: tensor<f32> {gptc.init = #gptc.init<kind = constant, value = 1.024000e+03>, gptc.state = #gptc.state<loss_scale>},
//  STEP-SAME: %[[G:[^:]*]]: tensor<i32> {gptc.state = #gptc.state<loss_scale_good_steps>},
//  STEP-SAME: %[[U:[^:]*]]: tensor<i32> {gptc.state = #gptc.state<optimizer_updates>},
//  STEP-SAME: tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<f32> {gptc.output = #gptc.output<grad_norm>}, tensor<f32> {gptc.output = #gptc.output<lr>},
//  STEP-SAME: tensor<f32> {gptc.state = #gptc.state<loss_scale>}, tensor<i32> {gptc.state = #gptc.state<loss_scale_good_steps>}, tensor<i32> {gptc.state = #gptc.state<optimizer_updates>}, tensor<f32> {gptc.output = #gptc.output<overflow>})
//       STEP: gptc.cross_entropy_grad %{{.*}}, %{{.*}}, %[[S]]
//       STEP: %[[NORM:.*]] = gptc.global_norm
//       STEP: %[[CLIP:.*]] = gptc.clip_scale %[[NORM]] max 1.000000e+00 loss_scale %[[S]]
//       STEP: %[[LOCAL:.*]] = gptc.found_inf %[[NORM]] : tensor<f32>
//       STEP: %[[FOUND:.*]] = shard.all_reduce %[[LOCAL]] on @mesh grid_axes = [0] reduction = max
//       STEP: %[[TRUE:.*]] = gptc.div %[[NORM]], %[[S]]
//       STEP: %[[LR:.*]] = gptc.learning_rate %[[STEP]]
//       STEP: gptc.adamw {{.*}} lr %[[LR]] step %[[U]] scale %[[CLIP]] skip %[[FOUND]]
//       STEP: %[[S1:.*]], %[[G1:.*]], %[[U1:.*]] = gptc.loss_scale_update %[[S]], %[[G]], %[[U]], %[[FOUND]] growth 2.000000e+00 backoff 5.000000e-01 interval 100
//       STEP: return {{.*}}, %[[TRUE]], %[[LR]], %[[S1]], %[[G1]], %[[U1]], %[[FOUND]] :

// Over ranks (ZeRO 2 here), each rank's flag is all-reduced with max over
// the whole grid before any use: every rank skips, or none does. The
// sharded update keeps the skip.
//         DP: %[[NORM:.*]] = gptc.sqrt
//         DP: %[[FOUND:.*]] = gptc.found_inf %[[NORM]] : tensor<f32>
//         DP: %[[ANY:.*]] = shard.all_reduce %[[FOUND]] on @mesh grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
//         DP: gptc.adamw {{.*}} skip %[[ANY]] {{.*}} : tensor<4x4xf32>
//         DP: gptc.loss_scale_update {{.*}}, %[[ANY]] growth
//         DP: return {{.*}}, %[[ANY]] :
module attributes {gptc.precision = #gptc.precision<fp16>,
                   gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 2, total_steps = 10, decay = linear, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, initial_loss_scale = 1024.0, loss_scale_growth_interval = 100>,
                   gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = 2, sequence_parallel = false>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %x: tensor<2x4xf32> {gptc.input = #gptc.input<tokens>}, %l: tensor<2xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %y = gptc.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Without fp16 the seed is the constant 1 and the step has no scaler.
// SEED-LABEL: func.func @forward_backward
//  SEED-SAME: tensor<2xi32> {gptc.input = #gptc.input<labels>}) ->
//       SEED: %[[ONE:.*]] = gptc.constant dense<1.000000e+00> : tensor<f32>
//       SEED: gptc.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]]
// STEP-LABEL: func.func @train_step
//   STEP-NOT: loss_scale
//   STEP-NOT: found_inf
//       STEP: return
module attributes {gptc.precision = #gptc.precision<bf16>,
                   gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 2, total_steps = 10, decay = linear, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0>} {
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %x: tensor<2x4xf32> {gptc.input = #gptc.input<tokens>}, %l: tensor<2xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %y = gptc.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// nan_policy SKIP without fp16: the same overflow test on the (unscaled)
// norm, all-reduced over the grid, skips every AdamW; no scaler state; the
// flag is the step's last result. The norm reported is the norm itself.
// STEP-LABEL: func.func @train_step
//  STEP-SAME: tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<f32> {gptc.output = #gptc.output<grad_norm>}, tensor<f32> {gptc.output = #gptc.output<lr>}, tensor<f32> {gptc.output = #gptc.output<overflow>})
//   STEP-NOT: loss_scale
//       STEP: %[[NORM:.*]] = gptc.global_norm
//       STEP: %[[LOCAL:.*]] = gptc.found_inf %[[NORM]] : tensor<f32>
//       STEP: %[[FOUND:.*]] = shard.all_reduce %[[LOCAL]] on @mesh grid_axes = [0] reduction = max
//       STEP: gptc.adamw {{.*}} skip %[[FOUND]]
//       STEP: return {{.*}}, %[[NORM]], %{{.*}}, %[[FOUND]] :
module attributes {gptc.precision = #gptc.precision<fp32>, gptc.nan_policy = #gptc.nan_policy<skip>,
                   gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 2, total_steps = 10, decay = linear, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0>,
                   gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = 0, sequence_parallel = false>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%w: tensor<8x4xf32> {gptc.param = "w"}, %x: tensor<2x4xf32> {gptc.input = #gptc.input<tokens>}, %l: tensor<2xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
    %y = gptc.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = gptc.cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
