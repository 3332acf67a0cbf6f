// gptc-context-parallel on the importer's graph of a 2-layer model over 2
// context-parallel ranks (grid axis 0 of kind context), sequence 16: the
// sequence is cut into 4 chunks of 4 tokens and rank r keeps chunks r and
// 3 - r; every token-wise op runs on the rank's 8 tokens; attention gathers
// the keys and values of the whole sequence, puts the chunks back in
// sequence order and attends from the rank's queries at their positions
// (--context-attention=all-gather; context-parallel-ring.mlir has the
// default ring). The backward reduce-scatters the keys' and values'
// gradients.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --context-attention=all-gather --emit=mlir -o %t.mlir
// RUN: gptc-opt %t.mlir --gptc-sharding-propagation --gptc-tensor-parallel --gptc-context-parallel | FileCheck %s
// RUN: gptc-opt %t.mlir --gptc-context-parallel --gptc-autodiff --canonicalize | FileCheck %s --check-prefix=GRAD
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --context-attention=all-gather --emit=comm | FileCheck %s --check-prefix=COMM
// With a tensor axis: each rank gathers the keys and values of its heads.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2,cp=2 --context-attention=all-gather --emit=mlir -o %t.tp.mlir
// RUN: gptc-opt %t.tp.mlir --gptc-sharding-propagation --gptc-tensor-parallel --gptc-context-parallel | FileCheck %s --check-prefix=TP
// Without a context axis the pass changes nothing.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh dp=2 --emit=mlir -o %t.dp.mlir
// RUN: gptc-opt %t.dp.mlir --gptc-context-parallel | FileCheck %s --check-prefix=NONE

// The positions of the rank's queries: iota, the chunks in the ranks'
// order (0, 3, 1, 2), this rank's half.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: tensor<8x16xi32> {gptc.input = #gptc.input<tokens>}, %[[LAB:[a-z0-9]+]]: tensor<8x16xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32>
// CHECK-NEXT: %[[IOTA:.*]] = gptc.iota dim 0 : tensor<16xi32>
// CHECK-NEXT: %[[C:.*]]:4 = gptc.split %[[IOTA]] axis 0 : tensor<16xi32> -> tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
// CHECK-NEXT: %[[Z:.*]] = gptc.concat %[[C]]#0, %[[C]]#3, %[[C]]#1, %[[C]]#2 axis 0
// CHECK-NEXT: %[[POS:.*]] = shard.all_slice %[[Z]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<16xi32> -> tensor<8xi32>
// The tokens and labels: the same cut along the sequence.
// CHECK-NEXT: %[[T:.*]]:4 = gptc.split %[[TOK]] axis 1
// CHECK-NEXT: %[[TZ:.*]] = gptc.concat %[[T]]#0, %[[T]]#3, %[[T]]#1, %[[T]]#2 axis 1
// CHECK-NEXT: %[[TOKS:.*]] = shard.all_slice %[[TZ]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x16xi32> -> tensor<8x8xi32>
// CHECK-NEXT: %[[L:.*]]:4 = gptc.split %[[LAB]] axis 1
// CHECK-NEXT: %[[LZ:.*]] = gptc.concat %[[L]]#0, %[[L]]#3, %[[L]]#1, %[[L]]#2 axis 1
// CHECK-NEXT: %[[LABS:.*]] = shard.all_slice %[[LZ]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x16xi32> -> tensor<8x8xi32>
// CHECK-NEXT: gptc.embedding %[[TOKS]], %{{.*}} : tensor<8x8xi32>, tensor<256x32xf32> -> tensor<8x8x32xf32>
// The position ids: cut too, so the rank looks up its positions' rows.
// CHECK-NEXT: %[[PI:.*]] = gptc.iota dim 1 : tensor<8x16xi32>
// CHECK-NEXT: gptc.split %[[PI]] axis 1
// CHECK-NEXT: gptc.concat
// CHECK-NEXT: %[[PIDS:.*]] = shard.all_slice {{.*}} slice_axis = 1 : tensor<8x16xi32> -> tensor<8x8xi32>
// CHECK-NEXT: gptc.embedding %[[PIDS]], %{{.*}} : tensor<8x8xi32>, tensor<32x32xf32> -> tensor<8x8x32xf32>
// CHECK: %[[Q:.*]] = gptc.linear {{.*}} -> tensor<8x8x32xf32>
// CHECK-NEXT: %[[K:.*]] = gptc.linear {{.*}} -> tensor<8x8x32xf32>
// CHECK-NEXT: %[[V:.*]] = gptc.linear {{.*}} -> tensor<8x8x32xf32>
// The keys: gathered in the ranks' order (chunks 0, 3, 1, 2), back in
// sequence order (the gathered chunks 0, 2, 3, 1); the values the same.
// CHECK-NEXT: %[[KG:.*]] = shard.all_gather %[[K]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<8x8x32xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: %[[KC:.*]]:4 = gptc.split %[[KG]] axis 1
// CHECK-NEXT: %[[KS:.*]] = gptc.concat %[[KC]]#0, %[[KC]]#2, %[[KC]]#3, %[[KC]]#1 axis 1
// CHECK-NEXT: shard.all_gather %[[V]]
// CHECK-NEXT: gptc.split
// CHECK-NEXT: %[[VS:.*]] = gptc.concat
// CHECK-NEXT: gptc.causal_attention %[[Q]], %[[KS]], %[[VS]] positions %[[POS]] heads 4 : tensor<8x8x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8xi32> -> tensor<8x8x32xf32>
// The second layer reads the same positions; the loss this rank's labels.
// CHECK: gptc.causal_attention {{.*}} positions %[[POS]] heads 4
// CHECK: gptc.linear {{.*}} -> tensor<8x8x256xf32>
// CHECK-NEXT: gptc.cross_entropy %{{.*}}, %[[LABS]] ignore -1 : tensor<8x8x256xf32>, tensor<8x8xi32> -> tensor<f32>

// The backward: attention's gradient at the same positions, then each of
// the keys' and values' gradients put in the ranks' order and
// reduce-scattered back to the ranks that hold those tokens.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = gptc.causal_attention_grad {{.*}} positions %{{.*}} heads 4 : {{.*}} -> tensor<8x8x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>
// GRAD-NEXT: %[[VC:.*]]:4 = gptc.split %[[DV]] axis 1
// GRAD-NEXT: %[[VZ:.*]] = gptc.concat %[[VC]]#0, %[[VC]]#3, %[[VC]]#1, %[[VC]]#2 axis 1
// GRAD-NEXT: shard.reduce_scatter %[[VZ]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<8x16x32xf32> -> tensor<8x8x32xf32>
// GRAD-NEXT: %[[KC:.*]]:4 = gptc.split %[[DK]] axis 1
// GRAD-NEXT: %[[KZ:.*]] = gptc.concat %[[KC]]#0, %[[KC]]#3, %[[KC]]#1, %[[KC]]#2 axis 1
// GRAD-NEXT: shard.reduce_scatter %[[KZ]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<8x16x32xf32> -> tensor<8x8x32xf32>
// The first layer's the same; no other attention gradient.
// GRAD: gptc.causal_attention_grad {{.*}} positions
// GRAD-NOT: gptc.causal_attention_grad
// The position embedding's gradient: this rank's rows only (summed over
// the context axis with the other gradients by gptc-data-parallel).
// GRAD: gptc.embedding_grad %{{.*}}, %{{.*}} : tensor<8x8xi32>, tensor<8x8x32xf32> -> tensor<32x32xf32>

// Per step: the keys and values gathered (4 x (N-1)/N G) and their
// gradients reduce-scattered, the parameters' gradients and the loss
// all-reduced over the context axis; the cuts send nothing.
// COMM: all_gather      [0]      2  8x16x32xf32             16384         8192  h.0.attn
// COMM: reduce_scatter  [0]      2  8x16x32xf32             16384         8192  h.1.attn
// COMM: all_reduce      [0]      2  bucket of 36
// COMM: all_reduce      [0]      2  f32                         4            4  loss
// COMM: all_slice          4 collectives           1600 G bytes              0 sent bytes
// COMM-NEXT: all_gather         4 collectives          65536 G bytes          32768 sent bytes
// COMM-NEXT: reduce_scatter     4 collectives          65536 G bytes          32768 sent bytes

// TP-LABEL: func.func @forward
// TP: %[[Q:.*]] = gptc.linear {{.*}} -> tensor<8x8x16xf32>
// TP-NEXT: %[[K:.*]] = gptc.linear {{.*}} -> tensor<8x8x16xf32>
// TP-NEXT: %[[V:.*]] = gptc.linear {{.*}} -> tensor<8x8x16xf32>
// TP-NEXT: shard.all_gather %[[K]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<8x8x16xf32> -> tensor<8x16x16xf32>
// TP: gptc.causal_attention {{.*}} positions %{{.*}} heads 2 : tensor<8x8x16xf32>, tensor<8x16x16xf32>, tensor<8x16x16xf32>, tensor<8xi32> -> tensor<8x8x16xf32>
// The row-parallel layer's sum over the tensor axis, on the rank's tokens.
// TP-NEXT: gptc.linear {{.*}} -> tensor<8x8x32xf32>
// TP-NEXT: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<8x8x32xf32> -> tensor<8x8x32xf32>
// TP-NEXT: gptc.broadcast %{{.*}} [0, 1] : tensor<32xf32> -> tensor<8x8x32xf32>

// NONE-LABEL: func.func @forward
// NONE-NOT: shard.
// NONE: gptc.causal_attention %{{.*}}, %{{.*}}, %{{.*}} heads 4 : tensor<4x16x32xf32>
