// gptc-sharding-propagation on transformer blocks that carry no
// gptc.tensor_parallel annotation (as another frontend would give them),
// over 2 tensor-parallel ranks: the layout of every layer follows from a
// few seeds, or from none (Megatron's seeds chosen from the graph).
// RUN: gptc-opt %s --split-input-file --gptc-sharding-propagation | FileCheck %s
// RUN: gptc-opt %s --split-input-file --gptc-sharding-propagation --gptc-tensor-parallel | FileCheck %s --check-prefix=TP
// RUN: gptc-opt %s --split-input-file --gptc-sharding-propagation=default-seeds=false | FileCheck %s --check-prefix=NOSEED

// Two seeds, upstream's annotations: the query weight and the MLP's first
// weight split on dimension 0. Attention makes key and value split like
// the query (so their weights column-parallel), its output makes the
// projection row-parallel; GELU carries the MLP's split to its second
// layer (row). Norms and residual adds stay whole.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: shard.shard
// CHECK-NOT: shard.sharding
// CHECK: %[[LN:.*]] = gptc.layer_norm
// CHECK-NEXT: %[[Q:.*]] = gptc.linear %[[LN]], %arg3, %arg4 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: %[[K:.*]] = gptc.linear %[[LN]], %arg5, %arg6 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: %[[V:.*]] = gptc.linear %[[LN]], %arg7, %arg8 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: %[[A:.*]] = gptc.causal_attention %[[Q]], %[[K]], %[[V]] heads 4
// CHECK-NEXT: gptc.linear %[[A]], %arg9, %arg10 {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// CHECK: gptc.linear {{.*}}, %arg13, %arg14 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: gptc.gelu
// CHECK-NEXT: gptc.linear {{.*}}, %arg15, %arg16 {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// CHECK-NOT: gptc.tensor_parallel
// CHECK: return

// Partitioned, the derived layout is Megatron's: this rank's 2 of 4
// heads and 64 of 128 units, one "f" before each column group (the
// gradient's all-reduce) and one all-reduce after each row layer.
// TP-LABEL: func.func @forward
// TP-SAME: %arg3: tensor<16x32xf32> {{{.*}}gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 32, 32>}}
// TP-SAME: %arg9: tensor<32x16xf32> {{{.*}}gptc.sharding = {axes = [array<i64>, array<i64: 0>], shape = array<i64: 32, 32>}}
// TP-SAME: %arg10: tensor<32xf32> {gptc.param = "attn.c_proj.bias"}
// TP-SAME: %arg15: tensor<32x64xf32> {{{.*}}gptc.sharding = {axes = [array<i64>, array<i64: 0>], shape = array<i64: 32, 128>}}
// TP: gptc.layer_norm
// TP-NEXT: gptc.grad_all_reduce
// TP-NEXT: gptc.linear {{.*}} -> tensor<8x16x16xf32>
// TP-NEXT: gptc.linear {{.*}} -> tensor<8x16x16xf32>
// TP-NEXT: gptc.linear {{.*}} -> tensor<8x16x16xf32>
// TP-NEXT: gptc.causal_attention {{.*}} heads 2
// TP-NEXT: gptc.linear
// TP-NEXT: shard.all_reduce
// TP: gptc.layer_norm
// TP-NEXT: gptc.grad_all_reduce
// TP-NEXT: gptc.linear {{.*}} -> tensor<8x16x64xf32>
// TP-NEXT: gptc.gelu {{.*}} : tensor<8x16x64xf32>
// TP-NEXT: gptc.linear
// TP-NEXT: shard.all_reduce
// TP-NOT: shard.all_reduce
// TP: return

// default-seeds=false changes nothing where there are seeds.
// NOSEED-LABEL: func.func @forward
// NOSEED: gptc.tensor_parallel = #gptc.tensor_parallel<column>

module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(
      %x: tensor<8x16x32xf32>,
      %g1: tensor<32xf32> {gptc.param = "ln_1.weight"}, %b1: tensor<32xf32> {gptc.param = "ln_1.bias"},
      %wq: tensor<32x32xf32> {gptc.param = "attn.q_proj.weight"}, %bq: tensor<32xf32> {gptc.param = "attn.q_proj.bias"},
      %wk: tensor<32x32xf32> {gptc.param = "attn.k_proj.weight"}, %bk: tensor<32xf32> {gptc.param = "attn.k_proj.bias"},
      %wv: tensor<32x32xf32> {gptc.param = "attn.v_proj.weight"}, %bv: tensor<32xf32> {gptc.param = "attn.v_proj.bias"},
      %wo: tensor<32x32xf32> {gptc.param = "attn.c_proj.weight"}, %bo: tensor<32xf32> {gptc.param = "attn.c_proj.bias"},
      %g2: tensor<32xf32> {gptc.param = "ln_2.weight"}, %b2: tensor<32xf32> {gptc.param = "ln_2.bias"},
      %w1: tensor<128x32xf32> {gptc.param = "mlp.c_fc.weight"}, %c1: tensor<128xf32> {gptc.param = "mlp.c_fc.bias"},
      %w2: tensor<32x128xf32> {gptc.param = "mlp.c_proj.weight"}, %c2: tensor<32xf32> {gptc.param = "mlp.c_proj.bias"})
      -> tensor<8x16x32xf32> {
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %wq_s = shard.shard %wq to %s : tensor<32x32xf32>
    %w1_s = shard.shard %w1 to %s : tensor<128x32xf32>
    %a = gptc.layer_norm %x, %g1, %b1 eps 1.0e-05 : tensor<8x16x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %q = gptc.linear %a, %wq_s, %bq : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %k = gptc.linear %a, %wk, %bk : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %v = gptc.linear %a, %wv, %bv : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %y = gptc.causal_attention %q, %k, %v heads 4 : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32> -> tensor<8x16x32xf32>
    %o = gptc.linear %y, %wo, %bo : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %r1 = gptc.add %x, %o : tensor<8x16x32xf32>
    %n = gptc.layer_norm %r1, %g2, %b2 eps 1.0e-05 : tensor<8x16x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %h = gptc.linear %n, %w1_s, %c1 : tensor<8x16x32xf32>, tensor<128x32xf32>, tensor<128xf32> -> tensor<8x16x128xf32>
    %z = gptc.gelu %h : tensor<8x16x128xf32>
    %m = gptc.linear %z, %w2, %c2 : tensor<8x16x128xf32>, tensor<32x128xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %r2 = gptc.add %r1, %m : tensor<8x16x32xf32>
    return %r2 : tensor<8x16x32xf32>
  }
}

// -----

// One seed on the output projection, split on dimension 1 (row): the
// rules run backward, through attention to its query, key and value and
// their weights (column).
// CHECK-LABEL: func.func @forward
// CHECK: gptc.linear %{{.*}}, %arg1, %arg2 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: gptc.linear %{{.*}}, %arg3, %arg4 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: gptc.linear %{{.*}}, %arg5, %arg6 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: gptc.causal_attention
// CHECK-NEXT: gptc.linear %{{.*}}, %arg7, %arg8 {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// TP-LABEL: func.func @forward
// TP-SAME: %arg5: tensor<16x32xf32> {{{.*}}gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 32, 32>}}
// TP: gptc.causal_attention {{.*}} heads 2
// TP-NEXT: gptc.linear
// TP-NEXT: shard.all_reduce
// NOSEED-LABEL: func.func @forward
// NOSEED: gptc.tensor_parallel = #gptc.tensor_parallel<row>
module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(
      %x: tensor<8x16x32xf32>,
      %wq: tensor<32x32xf32> {gptc.param = "q.weight"}, %bq: tensor<32xf32> {gptc.param = "q.bias"},
      %wk: tensor<32x32xf32> {gptc.param = "k.weight"}, %bk: tensor<32xf32> {gptc.param = "k.bias"},
      %wv: tensor<32x32xf32> {gptc.param = "v.weight"}, %bv: tensor<32xf32> {gptc.param = "v.bias"},
      %wo: tensor<32x32xf32> {gptc.param = "o.weight"}, %bo: tensor<32xf32> {gptc.param = "o.bias"})
      -> tensor<8x16x32xf32> {
    %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
    %wo_s = shard.shard %wo to %s : tensor<32x32xf32>
    %q = gptc.linear %x, %wq, %bq : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %k = gptc.linear %x, %wk, %bk : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %v = gptc.linear %x, %wv, %bv : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    %y = gptc.causal_attention %q, %k, %v heads 4 : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32> -> tensor<8x16x32xf32>
    %o = gptc.linear %y, %wo_s, %bo : tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<8x16x32xf32>
    return %o : tensor<8x16x32xf32>
  }
}

// -----

// No seeds at all: a token embedding, an MLP and a tied head into the
// loss, with no annotation. Megatron's seeds come from the structure (the
// weight before GELU, the table of the given ids), and the layout follows:
// vocabulary-parallel embedding, head and loss, a column/row MLP. The
// position-like lookup of computed ids keeps its table whole.
// CHECK-LABEL: func.func @forward
// CHECK: gptc.embedding %arg0, %arg2 {gptc.tensor_parallel = #gptc.tensor_parallel<vocab>}
// CHECK: gptc.embedding %{{.*}}, %arg3 :
// CHECK: gptc.linear %{{.*}}, %arg4, %arg5 {gptc.tensor_parallel = #gptc.tensor_parallel<column>}
// CHECK-NEXT: gptc.gelu
// CHECK-NEXT: gptc.linear %{{.*}}, %arg6, %arg7 {gptc.tensor_parallel = #gptc.tensor_parallel<row>}
// CHECK: gptc.linear %{{.*}}, %arg2 {gptc.tensor_parallel = #gptc.tensor_parallel<vocab>}
// CHECK-NEXT: gptc.cross_entropy
// TP-LABEL: func.func @forward
// TP-SAME: %arg2: tensor<32x16xf32> {{{.*}}gptc.sharding = {axes = [array<i64: 0>, array<i64>], shape = array<i64: 64, 16>}}
// TP: gptc.shard_offset on @mesh grid_axes = [0] block 32
// TP: gptc.embedding %arg0, %arg2 offset
// TP-NEXT: shard.all_reduce
// TP: gptc.gelu {{.*}} : tensor<4x8x32xf32>
// TP: gptc.vocab_parallel_loss
// Without seeds and without the default ones, nothing is split.
// NOSEED-LABEL: func.func @forward
// NOSEED-NOT: gptc.tensor_parallel
// NOSEED: return
module attributes {gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"]>} {
  shard.grid @mesh(shape = 2)
  func.func @forward(%ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
      %wte: tensor<64x16xf32> {gptc.param = "wte"}, %wpe: tensor<8x16xf32> {gptc.param = "wpe"},
      %w1: tensor<64x16xf32> {gptc.param = "fc1.weight"}, %b1: tensor<64xf32> {gptc.param = "fc1.bias"},
      %w2: tensor<16x64xf32> {gptc.param = "fc2.weight"}, %b2: tensor<16xf32> {gptc.param = "fc2.bias"})
      -> tensor<f32> {
    %tok = gptc.embedding %ids, %wte : tensor<4x8xi32>, tensor<64x16xf32> -> tensor<4x8x16xf32>
    %pos = gptc.iota dim 1 : tensor<4x8xi32>
    %pe = gptc.embedding %pos, %wpe : tensor<4x8xi32>, tensor<8x16xf32> -> tensor<4x8x16xf32>
    %x = gptc.add %tok, %pe : tensor<4x8x16xf32>
    %h = gptc.linear %x, %w1, %b1 : tensor<4x8x16xf32>, tensor<64x16xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
    %g = gptc.gelu %h : tensor<4x8x64xf32>
    %m = gptc.linear %g, %w2, %b2 : tensor<4x8x64xf32>, tensor<16x64xf32>, tensor<16xf32> -> tensor<4x8x16xf32>
    %r = gptc.add %x, %m : tensor<4x8x16xf32>
    %logits = gptc.linear %r, %wte : tensor<4x8x16xf32>, tensor<64x16xf32> -> tensor<4x8x64xf32>
    %loss = gptc.cross_entropy %logits, %labels ignore -1 : tensor<4x8x64xf32>, tensor<4x8xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
