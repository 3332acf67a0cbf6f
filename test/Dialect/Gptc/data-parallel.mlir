// gptc-data-parallel on a two-parameter model over 2 data-parallel ranks,
// for each ZeRO stage (the module below, with STAGE replaced). `w` (3 x 4)
// does not split over 2 ranks on dimension 0 and stays replicated.
// RUN: sed 's/STAGE/0/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s --check-prefixes=COMMON,S0
// RUN: sed 's/STAGE/1/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel 2>&1 | FileCheck %s --check-prefixes=COMMON,S1
// RUN: sed 's/STAGE/2/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel 2>&1 | FileCheck %s --check-prefixes=COMMON,S2
// RUN: sed 's/STAGE/3/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel 2>&1 | FileCheck %s --check-prefixes=COMMON,S3
// RUN: sed 's/STAGE/0/' %s | gptc-opt --gptc-autodiff --gptc-optimizer '--gptc-data-parallel=token-weighting=false' | FileCheck %s --check-prefix=PLAIN
// ZeRO 2 with 2 microbatches, reduce-each-microbatch: wte's gradient is
// reduce-scattered inside the loop, which sums the slices.
// RUN: sed 's/STAGE/2/; s/grad_clip = 1.0, batch_size = 4/grad_clip = 1.0, accumulation_steps = 2, batch_size = 4/' %s | gptc-opt --gptc-autodiff --gptc-optimizer '--gptc-data-parallel=reduce-each-microbatch=true' | FileCheck %s --check-prefix=MICRO
// And without it, once per step after the loop.
// RUN: sed 's/STAGE/2/; s/grad_clip = 1.0, batch_size = 4/grad_clip = 1.0, accumulation_steps = 2, batch_size = 4/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s --check-prefix=STEP
// Without a data axis of size > 1 the pass changes nothing.
// RUN: sed 's/STAGE/0/; s/shape = 2/shape = 1/' %s | gptc-opt --gptc-autodiff --gptc-optimizer --gptc-data-parallel | FileCheck %s --check-prefix=ONE

// S1: remark: parameter of shape 'tensor<3x4xf32>' stays replicated: dimension 0 does not divide by the data-parallel size 2

// Every stage: the batch inputs are this rank's rows; the step's real
// tokens are summed over the data axis and normalize the cross-entropy
// (forward and backward), and the loss is summed over the axis.
// COMMON-LABEL: func.func @train_step
// Stages 1 and 2 hold the moments of wte as slices; stage 3 wte as well.
// S1-SAME: %arg2: tensor<5x4xf32> {gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 10, 4>}, gptc.state = #gptc.state<m "wte">}
// S2-SAME: %arg2: tensor<5x4xf32> {gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 10, 4>}, gptc.state = #gptc.state<m "wte">}
// S3-SAME: %arg0: tensor<5x4xf32> {gptc.embedding_table, gptc.param = "wte", gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 10, 4>}}
// COMMON-SAME: %[[T:[a-z0-9]+]]: tensor<2x5xi32> {gptc.batch = {axes = array<i64: 0>, microbatches = 1 : i64, rows = 4 : i64}, gptc.input = #gptc.input<tokens>}
// S3-SAME: -> (tensor<5x4xf32> {gptc.param = "wte", gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 10, 4>}}
// COMMON: %[[COUNT:.*]] = gptc.count_tokens %[[L:.*]] ignore -1 : tensor<2x5xi32>
// COMMON-NEXT: %[[N:.*]] = shard.all_reduce %[[COUNT]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// Stage 3 gathers wte just before its first reader.
// S3-NEXT: %[[WTE:.*]] = shard.all_gather %arg0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<5x4xf32> -> tensor<10x4xf32>
// S3-NEXT: gptc.embedding %{{.*}}, %[[WTE]]
// COMMON: %[[LOSS:.*]] = gptc.cross_entropy %{{.*}}, %[[L]] over %[[N]] ignore -1
// COMMON: gptc.cross_entropy_grad %{{.*}}, %[[L]], %{{.*}} over %[[N]] ignore -1

// Stage 0: one all-reduce per gradient, right after it is final; the norm
// and the updates read the sums.
// S0: %[[GW:.*]] = gptc.matmul {{.*}} transpose_lhs
// S0-NEXT: %[[SW:.*]] = shard.all_reduce %[[GW]] on @mesh grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
// S0: %[[GE:.*]] = gptc.embedding_grad
// S0-NEXT: %[[SE:.*]] = shard.all_reduce %[[GE]] on @mesh grid_axes = [0] : tensor<10x4xf32> -> tensor<10x4xf32>
// S0-NEXT: gptc.global_norm %[[SE]], %[[SW]]
// S0: gptc.adamw %{{.*}}, %[[SE]], {{.*}} : tensor<10x4xf32>
// S0: gptc.adamw %{{.*}}, %[[SW]], {{.*}} : tensor<3x4xf32>
// S0-NOT: shard.all_slice
// S0-NOT: shard.all_gather
// S0-NOT: shard.reduce_scatter

// Stage 1: the update slices the summed
// gradient and the parameter, and an all-gather rebuilds the parameter.
// S1: %[[SE:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<10x4xf32> -> tensor<10x4xf32>
// S1: %[[GS:.*]] = shard.all_slice %[[SE]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<10x4xf32> -> tensor<5x4xf32>
// S1-NEXT: %[[PS:.*]] = shard.all_slice %arg0 on @mesh grid_axes = [0] slice_axis = 0 : tensor<10x4xf32> -> tensor<5x4xf32>
// S1-NEXT: %[[NP:.*]], %{{.*}}, %{{.*}} = gptc.adamw %[[PS]], %[[GS]], {{.*}} : tensor<5x4xf32>
// S1-NEXT: shard.all_gather %[[NP]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<5x4xf32> -> tensor<10x4xf32>

// Stage 2: a reduce-scatter replaces the all-reduce of wte's gradient; the
// norm adds the ranks' sums of squares of the slices to the replicated
// gradient's.
// S2: %[[RS:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 : tensor<10x4xf32> -> tensor<5x4xf32>
// S2-NEXT: %[[SQ:.*]] = gptc.sum_squares %[[RS]] : tensor<5x4xf32>
// S2-NEXT: %[[SQS:.*]] = shard.all_reduce %[[SQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S2-NEXT: %[[SQW:.*]] = gptc.sum_squares %{{.*}} : tensor<3x4xf32>
// S2-NEXT: %[[SUM:.*]] = gptc.add %[[SQS]], %[[SQW]] : tensor<f32>
// S2-NEXT: %[[NORM:.*]] = gptc.sqrt %[[SUM]]
// S2: %[[PS:.*]] = shard.all_slice %arg0
// S2-NEXT: %[[NP:.*]], %{{.*}}, %{{.*}} = gptc.adamw %[[PS]], %[[RS]], {{.*}} : tensor<5x4xf32>
// S2-NEXT: shard.all_gather %[[NP]]
// S2-NOT: shard.all_slice %{{.*}} : tensor<10x4xf32> -> tensor<5x4xf32>

// Stage 3: wte itself is held as a slice, gathered before the forward
// computation; the updated slice is returned as is.
// S3: %[[RS:.*]] = shard.reduce_scatter
// S3: %[[NP:.*]], %{{.*}}, %{{.*}} = gptc.adamw %arg0, %[[RS]], {{.*}} : tensor<5x4xf32>
// S3-NOT: shard.all_gather %[[NP]]
// S3: %[[TOTAL:.*]] = shard.all_reduce %[[LOSS]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S3-NEXT: return %[[NP]], {{.*}}, %[[TOTAL]],

// S0: %[[TOTAL:.*]] = shard.all_reduce %[[LOSS]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S0-NEXT: return {{.*}}, %[[TOTAL]],

// token-weighting=false: each rank divides by its own tokens times the
// number of ranks (PyTorch DDP's mean of means); no count is all-reduced.
// PLAIN: %[[COUNT:.*]] = gptc.count_tokens
// PLAIN-NEXT: %[[TWICE:.*]] = gptc.add %[[COUNT]], %[[COUNT]] : tensor<f32>
// PLAIN: gptc.cross_entropy %{{.*}}, %{{.*}} over %[[TWICE]]
// PLAIN-NOT: shard.all_reduce %[[COUNT]]

// MICRO-LABEL: func.func @train_step
// MICRO: %[[ACC:.*]]:3 = gptc.accumulate {{.*}} -> (tensor<f32>, tensor<5x4xf32>, tensor<3x4xf32>)
// MICRO: %[[GE:.*]] = gptc.embedding_grad
// MICRO-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[GE]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<10x4xf32> -> tensor<5x4xf32>
// MICRO-NEXT: gptc.yield %{{.*}}, %[[RS]], %{{.*}} : tensor<f32>, tensor<5x4xf32>, tensor<3x4xf32>
// MICRO-NOT: shard.reduce_scatter
// MICRO: gptc.sum_squares %[[ACC]]#1 : tensor<5x4xf32>
// MICRO: gptc.adamw %{{.*}}, %[[ACC]]#1, {{.*}} : tensor<5x4xf32>
// STEP-LABEL: func.func @train_step
// STEP: %[[ACC:.*]]:3 = gptc.accumulate {{.*}} -> (tensor<f32>, tensor<10x4xf32>, tensor<3x4xf32>)
// STEP-NOT: shard.reduce_scatter
// STEP: gptc.yield
// STEP: shard.reduce_scatter %[[ACC]]#1 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<10x4xf32> -> tensor<5x4xf32>

// ONE-LABEL: func.func @train_step
// ONE-NOT: shard.
// ONE-NOT: gptc.count_tokens
// ONE: return
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, batch_size = 4>,
                   gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = STAGE, sequence_parallel = false>} {
  shard.grid @mesh(shape = 2)
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
