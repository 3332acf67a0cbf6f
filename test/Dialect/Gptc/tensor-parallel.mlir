// gptc-tensor-parallel on the importer's graph of a 2-layer model over 2
// tensor-parallel ranks (grid axis 0 of kind tensor), then the
// differentiated graph: per column/row pair one all-reduce forward
// (shard.all_reduce after the row-parallel layer) and one backward (the
// gradient of gptc.grad_all_reduce before the column-parallel layers).
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --emit=mlir -o %t.mlir
// RUN: gptc-opt %t.mlir --gptc-tensor-parallel | FileCheck %s
// RUN: gptc-opt %t.mlir --gptc-tensor-parallel --gptc-autodiff --canonicalize | FileCheck %s --check-prefix=GRAD
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2 --emit=comm | FileCheck %s --check-prefix=COMM

// Column-parallel weights and biases are split on dimension 0, row-parallel
// weights on dimension 1; the row-parallel bias, norms and embeddings stay
// whole.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<16x32xf32> {{{.*}}gptc.param = "h.0.attn.q_proj.weight", gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 32, 32>}}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16xf32> {{{.*}}gptc.param = "h.0.attn.q_proj.bias", gptc.sharding = {axes = [array<i64: 0>], shape = array<i64: 32>}}
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<32x16xf32> {{{.*}}gptc.param = "h.0.attn.c_proj.weight", gptc.sharding = {axes = [array<i64>, array<i64: 0>], shape = array<i64: 32, 32>}}
// CHECK-SAME: %[[BO:[a-z0-9]+]]: tensor<32xf32> {{{.*}}gptc.param = "h.0.attn.c_proj.bias"}
// CHECK: %[[LN:.*]] = gptc.layer_norm
// CHECK-NEXT: %[[F:.*]] = gptc.grad_all_reduce %[[LN]] on @mesh grid_axes = [0] : tensor<8x16x32xf32>
// CHECK-NEXT: %[[Q:.*]] = gptc.linear %[[F]], %[[WQ]], %{{.*}} {gptc.tensor_parallel = "column"} : {{.*}} -> tensor<8x16x16xf32>
// CHECK-NEXT: %[[K:.*]] = gptc.linear %[[F]], {{.*}} -> tensor<8x16x16xf32>
// CHECK-NEXT: %[[V:.*]] = gptc.linear %[[F]], {{.*}} -> tensor<8x16x16xf32>
// This rank's 2 of the 4 heads.
// CHECK-NEXT: %[[Y:.*]] = gptc.causal_attention %[[Q]], %[[K]], %[[V]] heads 2
// CHECK-NEXT: %[[P:.*]] = gptc.linear %[[Y]], %[[WO]] {gptc.tensor_parallel = "row"} : tensor<8x16x16xf32>, tensor<32x16xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x16x32xf32> -> tensor<8x16x32xf32>
// CHECK-NEXT: %[[B:.*]] = gptc.broadcast %[[BO]] [0, 1]
// CHECK-NEXT: gptc.add %[[S]], %[[B]]
// The MLP: column (64 of 128 units), GELU, row.
// CHECK: gptc.grad_all_reduce
// CHECK-NEXT: %[[H:.*]] = gptc.linear {{.*}} {gptc.tensor_parallel = "column"} : {{.*}} -> tensor<8x16x64xf32>
// CHECK-NEXT: %[[G:.*]] = gptc.gelu %[[H]] : tensor<8x16x64xf32>
// CHECK-NEXT: gptc.linear %[[G]], {{.*}} {gptc.tensor_parallel = "row"}
// CHECK-NEXT: shard.all_reduce
// CHECK-COUNT-2: shard.all_reduce
// CHECK-NOT: shard.all_reduce
// CHECK: return

// After differentiation: the forward keeps its 4 all-reduces, the backward
// adds 4 (the gradients of the inputs of the 4 column-parallel groups),
// and "f" folds away.
// GRAD-LABEL: func.func @forward_backward
// GRAD-COUNT-8: shard.all_reduce
// GRAD-NOT: shard.all_reduce
// GRAD-NOT: gptc.grad_all_reduce
// GRAD: return

// The training step adds the gradient norm's all-reduce (split gradients'
// squares summed over the ranks; the replicated ones counted once): 9
// all-reduces, the activations' 8 x 8 x 16 x 32 x 4 = 16384 bytes each.
// COMM: all_reduce      [0]      2  8x16x32xf32             16384        16384  h.0.attn.c_proj
// COMM: all_reduce      [0]      2  f32                         4            4  gradient norm
// COMM: all_reduce         9 collectives         131076 G bytes         131076 sent bytes
