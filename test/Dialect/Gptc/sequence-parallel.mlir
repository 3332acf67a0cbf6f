// Sequence parallelism with tensor parallelism over 2 ranks: outside the
// tensor-parallel regions the residual stream holds this rank's half of the
// sequence (8 of 16 positions); each all-reduce of plain tensor parallelism
// becomes a reduce-scatter into sequence shards (forward) and an all-gather
// before the column-parallel layers, whose gradients are the reverse; norm
// weights and row-parallel biases see one shard each, so their gradients
// are summed over the ranks.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --sequence-parallel --emit=mlir -o %t.mlir
// RUN: gptc-opt %t.mlir --gptc-sharding-propagation --gptc-tensor-parallel | FileCheck %s
// RUN: gptc-opt %t.mlir --gptc-sharding-propagation --gptc-tensor-parallel --gptc-autodiff --canonicalize | FileCheck %s --check-prefix=GRAD
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --sequence-parallel --emit=comm | FileCheck %s --check-prefix=COMM

// CHECK-LABEL: func.func @forward
// CHECK: %[[G1:.*]] = gptc.grad_all_reduce %arg2 on @mesh grid_axes = [0] : tensor<32xf32>
// CHECK-NEXT: %[[B1:.*]] = gptc.grad_all_reduce %arg3 on @mesh grid_axes = [0] : tensor<32xf32>
// The embedding's partial rows are summed and scattered by sequence; the
// position embedding is cut into the same shard.
// CHECK: %[[E:.*]] = gptc.embedding %{{.*}}, %arg0 offset
// CHECK-NEXT: %[[ES:.*]] = shard.reduce_scatter %[[E]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<8x16x32xf32> -> tensor<8x8x32xf32>
// CHECK: %[[PS:.*]] = shard.all_slice %{{.*}} on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x16x32xf32> -> tensor<8x8x32xf32>
// CHECK-NEXT: %[[X:.*]] = gptc.add %[[ES]], %[[PS]] : tensor<8x8x32xf32>
// CHECK-NEXT: %[[N:.*]] = gptc.layer_norm %[[X]], %[[G1]], %[[B1]] {{.*}} -> tensor<8x8x32xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_gather %[[N]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<8x8x32xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: gptc.linear %[[A]], {{.*}} {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK: %[[P:.*]] = gptc.linear {{.*}} {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// CHECK-NEXT: %[[S:.*]] = shard.reduce_scatter %[[P]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<8x16x32xf32> -> tensor<8x8x32xf32>
// CHECK-NEXT: %[[BB:.*]] = gptc.broadcast %{{.*}} [0, 1] : tensor<32xf32> -> tensor<8x8x32xf32>
// CHECK-NEXT: gptc.add %[[S]], %[[BB]] : tensor<8x8x32xf32>
// No all-reduce of activations remains; the loss's three stay.
// CHECK-NOT: shard.all_reduce %{{.*}} : tensor<8x16x32xf32>
// The head reads the gathered sequence.
// CHECK: gptc.linear %{{all_gather[_0-9]*}}, %arg0 {gptc.tensor_parallel = #gptc.tensor_parallel<vocab>}

// Backward: each all-gather becomes a reduce-scatter and each
// reduce-scatter an all-gather (5 each, as many as forward), the slice of
// the position embedding an all-gather; 14 parameters' gradients (norms,
// row-parallel biases) are all-reduced.
// GRAD-LABEL: func.func @forward_backward
// GRAD-COUNT-10: shard.reduce_scatter
// GRAD-NOT: shard.reduce_scatter

// COMM: reduce_scatter    10 collectives         163840 G bytes          81920 sent bytes
// COMM-NEXT: all_slice          1 collectives          16384 G bytes              0 sent bytes
// COMM-NEXT: all_gather        10 collectives         163840 G bytes          81920 sent bytes
// COMM-NEXT: all_reduce_max     1 collectives            512 G bytes            512 sent bytes
// The 17 small all-reduces (the loss's sums, the replicated parameters'
// gradients, the norm's squares) travel in 2 buckets.
// COMM-NEXT: all_reduce         2 collectives           2820 G bytes           2820 sent bytes
