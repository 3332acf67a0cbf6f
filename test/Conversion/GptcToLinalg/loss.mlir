// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' --mlir-print-local-scope | FileCheck %s --check-prefix=LOCAL

// embedding: a parallel generic over the result reading the id's row of
// the table; with an offset, ids outside the block give 0.
// CHECK-LABEL: func.func @embedding
// CHECK: %[[E:.*]] = tensor.extract %arg2[]
// CHECK: %[[OFF:.*]] = arith.extsi %[[E]] : i32 to i64
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<2x3xi32>) outs(%{{.*}} : tensor<2x3x5xf32>)
// CHECK:   arith.subi %{{.*}}, %[[OFF]]
// CHECK:   tensor.extract %arg1[%{{.*}}, %{{.*}}] : tensor<6x5xf32>
// CHECK:   arith.select
func.func @embedding(%ids: tensor<2x3xi32>, %table: tensor<6x5xf32>, %off: tensor<i32>) -> tensor<2x3x5xf32> {
  %e = gptc.embedding %ids, %table offset %off : tensor<2x3xi32>, tensor<6x5xf32> -> tensor<2x3x5xf32>
  return %e : tensor<2x3x5xf32>
}

// -----

// The positions (ids counting along dimension 1, gptc.iota) read the
// table's first 3 of 6 rows as a broadcast over dimension 0: an affine
// read, no gather. With as many rows as positions, the whole table.
// CHECK-LABEL: func.func @embedding_positions
//  CHECK-SAME: (%[[T:.*]]: tensor<6x5xf32>, %[[W:.*]]: tensor<3x5xf32>)
//       CHECK: %[[S:.*]] = tensor.extract_slice %[[T]][0, 0] [3, 5] [1, 1]
//       CHECK: linalg.generic {{.*}} ins(%[[S]] : tensor<3x5xf32>)
//  CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
//  CHECK-NEXT:   linalg.yield %[[IN]]
//       CHECK: linalg.generic {{.*}} ins(%[[W]] : tensor<3x5xf32>)
//   CHECK-NOT: tensor.extract %
//   CHECK-NOT: linalg.index
// LOCAL-LABEL: func.func @embedding_positions
// LOCAL-COUNT-2: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
func.func @embedding_positions(%table: tensor<6x5xf32>, %whole: tensor<3x5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %p = gptc.iota dim 1 : tensor<2x3xi32>
  %e = gptc.embedding %p, %table : tensor<2x3xi32>, tensor<6x5xf32> -> tensor<2x3x5xf32>
  %w = gptc.embedding %p, %whole : tensor<2x3xi32>, tensor<3x5xf32> -> tensor<2x3x5xf32>
  return %e, %w : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// embedding_grad: a reduction over the positions into every row.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%arg0, %arg1 : tensor<2x3xi32>, tensor<2x3x5xf32>) outs(%{{.*}} : tensor<6x5xf32>)
// CHECK:   linalg.index 0
// CHECK:   arith.cmpi eq
// CHECK:   arith.select
func.func @embedding_grad(%ids: tensor<2x3xi32>, %g: tensor<2x3x5xf32>) -> tensor<6x5xf32> {
  %d = gptc.embedding_grad %ids, %g : tensor<2x3xi32>, tensor<2x3x5xf32> -> tensor<6x5xf32>
  return %d : tensor<6x5xf32>
}

// -----

// cross_entropy: per row the maximum, then the sum of shifted exponentials
// and the label's logit in one pass (a masked sum, no gather), the kept
// rows' losses summed and divided by the number of kept labels.
// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 : tensor<2x4x7xf32>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[ROWS:.*]]:2 = linalg.generic {{.*}} ins(%arg0, %arg1, %[[MAX]] : {{.*}}) outs(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:   math.exp
// CHECK:   linalg.index 2
// CHECK:   arith.select
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%arg1, %[[MAX]], %[[ROWS]]#0, %[[ROWS]]#1 : {{.*}}) outs(%{{.*}} : tensor<f32>)
// CHECK:   math.log
// CHECK:   arith.cmpi ne
// CHECK: %[[N:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<2x4xi32>) outs(%{{.*}} : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%[[SUM]], %[[N]] : tensor<f32>, tensor<f32>) outs(%{{.*}} : tensor<f32>)
// CHECK:   arith.divf
func.func @cross_entropy(%logits: tensor<2x4x7xf32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %l = gptc.cross_entropy %logits, %labels ignore -1 : tensor<2x4x7xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cross_entropy_grad over a normalizer: softmax minus the one-hot label,
// times the incoming gradient over the normalizer.
// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK: tensor.extract %arg3[]
// CHECK: tensor.from_elements
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %arg1, %{{.*}}, %{{.*}}, %arg2, %{{.*}} : {{.*}}) outs(%{{.*}} : tensor<2x4x7xf32>)
// CHECK:   math.exp
// CHECK:   arith.select
// CHECK:   arith.mulf
func.func @cross_entropy_grad(%logits: tensor<2x4x7xf32>, %labels: tensor<2x4xi32>, %g: tensor<f32>, %n: tensor<f32>) -> tensor<2x4x7xf32> {
  %d = gptc.cross_entropy_grad %logits, %labels, %g over %n : tensor<2x4x7xf32>, tensor<2x4xi32>, tensor<f32>, tensor<f32> -> tensor<2x4x7xf32>
  return %d : tensor<2x4x7xf32>
}

// -----

// Vocabulary parallelism: the block's partials in one pass over its
// columns (global id = offset + column; ids from vocab_size on count in
// neither sum); the forward's grad_all_reduce is the identity.
// CHECK-LABEL: func.func @vocab_parallel
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<2x4x4xf32>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[P:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %[[M]], %arg1 : {{.*}}) outs(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:   linalg.index 2
// CHECK:   arith.cmpi slt, %{{.*}}, %c7_i64
// CHECK: return %arg0, %[[P]]#0, %[[P]]#1
shard.grid @mesh(shape = 2)
func.func @vocab_parallel(%logits: tensor<2x4x4xf32>, %labels: tensor<2x4xi32>, %off: tensor<i32>) -> (tensor<2x4x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %x = gptc.grad_all_reduce %logits on @mesh grid_axes = [0] : tensor<2x4x4xf32>
  %m = gptc.row_max %x : tensor<2x4x4xf32> -> tensor<2x4xf32>
  %s, %t = gptc.vocab_parallel_partials %x, %m, %labels offset %off vocab 7 : tensor<2x4x4xf32>, tensor<2x4xf32>, tensor<2x4xi32> -> tensor<2x4xf32>, tensor<2x4xf32>
  return %x, %s, %t : tensor<2x4x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
