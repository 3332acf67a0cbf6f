// gptc-sharding-propagation then gptc-tensor-parallel on the importer's
// graph of a 2-layer model over 2 tensor-parallel ranks (grid axis 0 of
// kind tensor). The importer writes no layout: propagation from Megatron's
// default seeds (the query weights, the weights before GELU, the
// vocabulary table) reproduces the layout and collectives the importer's
// per-layer annotations gave before (these checks are unchanged), then the
// differentiated graph: per column/row pair one all-reduce forward
// (shard.all_reduce after the row-parallel layer) and one backward (the
// gradient of gptc.grad_all_reduce before the column-parallel layers).
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --emit=mlir -o %t.mlir
// RUN: gptc-opt %t.mlir --gptc-sharding-propagation --gptc-tensor-parallel | FileCheck %s
// RUN: gptc-opt %t.mlir --gptc-sharding-propagation --gptc-tensor-parallel --gptc-autodiff --canonicalize | FileCheck %s --check-prefix=GRAD
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --emit=comm | FileCheck %s --check-prefix=COMM

// Column-parallel weights and biases are split on dimension 0, row-parallel
// weights on dimension 1; the token embedding (tied to the head) is split
// by vocabulary; the row-parallel bias, norms and position embedding stay
// whole.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<128x32xf32> {{{.*}}gptc.param = "wte", gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 256, 32>}}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<32x32xf32> {{{.*}}gptc.param = "wpe"}
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<16x32xf32> {{{.*}}gptc.param = "h.0.attn.q_proj.weight", gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 32, 32>}}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16xf32> {{{.*}}gptc.param = "h.0.attn.q_proj.bias", gptc.sharding = {axes = [array<i64: 0>], shape = array<i64: 32>}}
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<32x16xf32> {{{.*}}gptc.param = "h.0.attn.c_proj.weight", gptc.sharding = {axes = [array<i64>, array<i64: 0>], shape = array<i64: 32, 32>}}
// CHECK-SAME: %[[BO:[a-z0-9]+]]: tensor<32xf32> {{{.*}}gptc.param = "h.0.attn.c_proj.bias"}
// Vocabulary-parallel embedding: this rank's ids [offset, offset + 128)
// gather their rows, the others zeros; an all-reduce completes them.
// CHECK-NEXT: %[[OFF:.*]] = gptc.shard_offset on @mesh grid_axes = [0] block 128 : tensor<i32>
// CHECK-NEXT: %[[PART:.*]] = gptc.embedding %[[TOK:[a-z0-9]+]], %[[WTE]] offset %[[OFF]]
// CHECK-NEXT: %{{.*}} = shard.all_reduce %[[PART]] on @mesh grid_axes = [0] : tensor<8x16x32xf32> -> tensor<8x16x32xf32>
// CHECK: %[[LN:.*]] = gptc.layer_norm
// CHECK-NEXT: %[[F:.*]] = gptc.grad_all_reduce %[[LN]] on @mesh grid_axes = [0] : tensor<8x16x32xf32>
// CHECK-NEXT: %[[Q:.*]] = gptc.linear %[[F]], %[[WQ]], %{{.*}} {gptc.tensor_parallel = #gptc.tensor_parallel<column>} : {{.*}} -> tensor<8x16x16xf32>
// CHECK-NEXT: %[[K:.*]] = gptc.linear %[[F]], {{.*}} -> tensor<8x16x16xf32>
// CHECK-NEXT: %[[V:.*]] = gptc.linear %[[F]], {{.*}} -> tensor<8x16x16xf32>
// This rank's 2 of the 4 heads.
// CHECK-NEXT: %[[Y:.*]] = gptc.causal_attention %[[Q]], %[[K]], %[[V]] heads 2
// CHECK-NEXT: %[[P:.*]] = gptc.linear %[[Y]], %[[WO]] {gptc.tensor_parallel = #gptc.tensor_parallel<row>} : tensor<8x16x16xf32>, tensor<32x16xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x16x32xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: %[[B:.*]] = gptc.broadcast %[[BO]] [0, 1]
// CHECK-NEXT: gptc.add %[[S]], %[[B]]
// The MLP: column (64 of 128 units), GELU, row.
// CHECK: gptc.grad_all_reduce
// CHECK-NEXT: %[[H:.*]] = gptc.linear {{.*}} {gptc.tensor_parallel = #gptc.tensor_parallel<column>} : {{.*}} -> tensor<8x16x64xf32>
// CHECK-NEXT: %[[G:.*]] = gptc.gelu %[[H]] : tensor<8x16x64xf32>
// CHECK-NEXT: gptc.linear %[[G]], {{.*}} {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// CHECK-NEXT: shard.all_reduce
// CHECK-COUNT-2: shard.all_reduce
// Vocabulary-parallel head and loss: this rank's 128 logits, the maxima
// (max all-reduce), sums of exponentials and target logits (sum
// all-reduces), then the loss.
// CHECK: %[[F2:.*]] = gptc.grad_all_reduce
// CHECK-NEXT: %[[LOGITS:.*]] = gptc.linear %[[F2]], %[[WTE]] {gptc.tensor_parallel = #gptc.tensor_parallel<vocab>} : tensor<8x16x32xf32>, tensor<128x32xf32> -> tensor<8x16x128xf32>
// CHECK-NEXT: %[[M:.*]] = gptc.row_max %[[LOGITS]]
// CHECK-NEXT: %[[MAX:.*]] = shard.all_reduce %[[M]] on @mesh grid_axes = [0] reduction = max
// CHECK-NEXT: %[[SE:.*]], %[[T:.*]] = gptc.vocab_parallel_partials %[[LOGITS]], %[[MAX]], %[[LAB:[a-z0-9]+]] offset %[[OFF]]
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[SE]] on @mesh grid_axes = [0] :
// CHECK-NEXT: %[[TGT:.*]] = shard.all_reduce %[[T]] on @mesh grid_axes = [0] :
// CHECK-NEXT: %[[LOSS:.*]] = gptc.vocab_parallel_loss %[[MAX]], %[[SUM]], %[[TGT]], %[[LAB]] ignore -1
// CHECK-NEXT: return %[[LOSS]]

// After differentiation: the forward keeps its 8 all-reduces (embedding,
// 4 row-parallel layers, 3 in the loss), the backward adds 5 (the
// gradients of the inputs of the 4 column-parallel groups and of the
// head), and "f" folds away. The maxima get no gradient.
// GRAD-LABEL: func.func @forward_backward
// GRAD-COUNT-13: shard.all_reduce
// GRAD-NOT: shard.all_reduce
// GRAD-NOT: gptc.grad_all_reduce
// GRAD: return

// The training step adds the gradient norm's all-reduce (split gradients'
// squares summed over the ranks; the replicated ones counted once): 14
// all-reduces; the activations' are 8 x 16 x 32 x 4 = 16384 bytes, the
// loss's 8 x 16 x 4 = 512 (each rank sends 2 x 1/2 x G).
// COMM: all_reduce      [0]      2  8x16x32xf32             16384        16384  wte
// COMM: all_reduce      [0]      2  8x16x32xf32             16384        16384  h.0.attn.c_proj
// COMM: all_reduce_max  [0]      2  8x16xf32                  512          512  loss
// The loss's two sums over the vocabulary ranks share one collective.
// COMM: all_reduce      [0]      2  bucket of 2              1024         1024  loss
// COMM: all_reduce      [0]      2  f32                         4            4  gradient norm
// COMM: all_reduce        12 collectives         164868 G bytes         164868 sent bytes
// COMM-NEXT: all_reduce_max     1 collectives            512 G bytes            512 sent bytes
