// RUN: gptc-opt %s | gptc-opt | FileCheck %s
// RUN: gptc-opt %s --mlir-print-op-generic | gptc-opt | FileCheck %s
// RUN: gptc-opt %s --verify-roundtrip

// Every gptc op in its custom form; the second RUN line checks that the
// generic form parses back to the same ops.

// CHECK-LABEL: func.func @constant_and_iota
func.func @constant_and_iota() -> (tensor<2x3xf32>, tensor<4x8xi32>) {
  // CHECK: %[[C:.*]] = gptc.constant dense<1.500000e+00> : tensor<2x3xf32>
  %c = gptc.constant dense<1.5> : tensor<2x3xf32>
  // CHECK: %[[P:.*]] = gptc.iota dim 1 : tensor<4x8xi32>
  %p = gptc.iota dim 1 : tensor<4x8xi32>
  // CHECK: return %[[C]], %[[P]]
  return %c, %p : tensor<2x3xf32>, tensor<4x8xi32>
}

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[IDS:.*]]: tensor<4x8xi32>, %[[T:.*]]: tensor<100x16xf32>)
func.func @embedding(%ids: tensor<4x8xi32>, %t: tensor<100x16xf32>) -> tensor<4x8x16xf32> {
  // CHECK: gptc.embedding %[[IDS]], %[[T]] : tensor<4x8xi32>, tensor<100x16xf32> -> tensor<4x8x16xf32>
  %0 = gptc.embedding %ids, %t : tensor<4x8xi32>, tensor<100x16xf32> -> tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<4x8x16xbf16>, %[[W:.*]]: tensor<32x16xbf16>, %[[B:.*]]: tensor<32xbf16>)
func.func @linear(%x: tensor<4x8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xbf16>)
    -> (tensor<4x8x32xbf16>, tensor<4x8x32xbf16>) {
  // CHECK: gptc.linear %[[X]], %[[W]], %[[B]] : tensor<4x8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16> -> tensor<4x8x32xbf16>
  %0 = gptc.linear %x, %w, %b : tensor<4x8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16> -> tensor<4x8x32xbf16>
  // CHECK: gptc.linear %[[X]], %[[W]] : tensor<4x8x16xbf16>, tensor<32x16xbf16> -> tensor<4x8x32xbf16>
  %1 = gptc.linear %x, %w : tensor<4x8x16xbf16>, tensor<32x16xbf16> -> tensor<4x8x32xbf16>
  return %0, %1 : tensor<4x8x32xbf16>, tensor<4x8x32xbf16>
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<2x16x8xf32>, %b: tensor<2x5x8xf32>, %c: tensor<2x8x16xf32>)
    -> (tensor<2x16x5xf32>, tensor<2x8x8xf32>, tensor<2x16x16xf32>) {
  // CHECK: gptc.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x16x8xf32>, tensor<2x5x8xf32> -> tensor<2x16x5xf32>
  %0 = gptc.matmul %a, %b transpose_rhs : tensor<2x16x8xf32>, tensor<2x5x8xf32> -> tensor<2x16x5xf32>
  // CHECK: gptc.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
  %1 = gptc.matmul %a, %a transpose_lhs : tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
  // CHECK: gptc.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x16x16xf32>
  %2 = gptc.matmul %c, %a transpose_lhs transpose_rhs : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x16x16xf32>
  return %0, %1, %2 : tensor<2x16x5xf32>, tensor<2x8x8xf32>, tensor<2x16x16xf32>
}

// CHECK-LABEL: func.func @norm_and_activations
func.func @norm_and_activations(%x: tensor<4x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>)
    -> tensor<4x8x16xf32> {
  // CHECK: %[[N:.*]] = gptc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<4x8x16xf32>
  %0 = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<4x8x16xf32>
  // CHECK: %[[G:.*]] = gptc.gelu %[[N]] : tensor<4x8x16xf32>
  %1 = gptc.gelu %0 : tensor<4x8x16xf32>
  // CHECK: gptc.gelu %[[G]] exact : tensor<4x8x16xf32>
  %e = gptc.gelu %1 exact : tensor<4x8x16xf32>
  // CHECK: %[[S:.*]] = gptc.softmax %[[G]] : tensor<4x8x16xf32>
  %2 = gptc.softmax %1 : tensor<4x8x16xf32>
  // CHECK: gptc.add %[[S]], %[[N]] : tensor<4x8x16xf32>
  %3 = gptc.add %2, %0 : tensor<4x8x16xf32>
  return %3 : tensor<4x8x16xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x12xf32>, %k: tensor<2x8x12xf32>, %v: tensor<2x8x12xf32>)
    -> tensor<2x8x12xf32> {
  // CHECK: gptc.causal_attention %{{.*}}, %{{.*}}, %{{.*}} heads 3 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>
  %0 = gptc.causal_attention %q, %k, %v heads 3 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>
  return %0 : tensor<2x8x12xf32>
}

// Context parallelism: 4 query rows at sequence positions 0, 1, 6, 7
// against the 8 keys of the whole sequence, and the gradient (the keys'
// and values' gradients cover the whole sequence).
// CHECK-LABEL: func.func @attention_positions
func.func @attention_positions(%q: tensor<2x4x12xf32>, %kv: tensor<2x8x12xf32>, %pos: tensor<4xi32>)
    -> (tensor<2x4x12xf32>, tensor<2x8x12xf32>) {
  // CHECK: gptc.causal_attention %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} heads 3 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>
  %0 = gptc.causal_attention %q, %kv, %kv positions %pos heads 3 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>
  // CHECK: gptc.causal_attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} heads 3 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x4x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  %1:3 = gptc.causal_attention_grad %q, %kv, %kv, %0 positions %pos heads 3 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x4x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  return %0, %1#1 : tensor<2x4x12xf32>, tensor<2x8x12xf32>
}

// Ring attention: one step (4 queries against a block of 6 keys, each
// with its positions), the merge of two steps, and their gradients.
// CHECK-LABEL: func.func @ring_attention
func.func @ring_attention(%q: tensor<2x4x12xf32>, %kv: tensor<2x6x12xf32>, %qp: tensor<4xi32>, %kp: tensor<6xi32>)
    -> (tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x6x12xf32>, tensor<2x4x3xf32>) {
  // CHECK: %[[O:.*]], %[[L:.*]] = gptc.attention_block %{{.*}}, %{{.*}}, %{{.*}} at %{{.*}}, %{{.*}} heads 3 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<6xi32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>
  %o, %l = gptc.attention_block %q, %kv, %kv at %qp, %kp heads 3 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<6xi32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>
  // CHECK: gptc.attention_merge %[[O]], %[[L]], %[[O]], %[[L]] : tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>
  %m, %ml = gptc.attention_merge %o, %l, %o, %l : tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>
  // CHECK: gptc.attention_merge_grad {{.*}} -> tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32>
  %g:4 = gptc.attention_merge_grad %o, %l, %o, %l, %m, %ml : tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x4x12xf32>, tensor<2x4x3xf32>
  // CHECK: gptc.attention_block_grad %{{.*}}, %{{.*}}, %{{.*}} at %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads 3 : {{.*}} -> tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>
  %d:3 = gptc.attention_block_grad %q, %kv, %kv at %qp, %kp, %g#0, %g#1 heads 3 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<6xi32>, tensor<2x4x12xf32>, tensor<2x4x3xf32> -> tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>
  return %m, %ml, %d#1, %g#3 : tensor<2x4x12xf32>, tensor<2x4x3xf32>, tensor<2x6x12xf32>, tensor<2x4x3xf32>
}

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%l: tensor<2x8x100xf32>, %y: tensor<2x8xi32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: gptc.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x100xf32>, tensor<2x8xi32> -> tensor<f32>
  %0 = gptc.cross_entropy %l, %y : tensor<2x8x100xf32>, tensor<2x8xi32> -> tensor<f32>
  // CHECK: gptc.cross_entropy %{{.*}}, %{{.*}} ignore -1 : tensor<2x8x100xf32>, tensor<2x8xi32> -> tensor<f32>
  %1 = gptc.cross_entropy %l, %y ignore -1 : tensor<2x8x100xf32>, tensor<2x8xi32> -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<4x8x12xf32>)
    -> (tensor<32x12xf32>, tensor<4x12x8xf32>, tensor<4x8x4xf32>, tensor<4x8x8xf32>, tensor<4x8x12xbf16>) {
  // CHECK: gptc.reshape %{{.*}} : tensor<4x8x12xf32> -> tensor<32x12xf32>
  %0 = gptc.reshape %x : tensor<4x8x12xf32> -> tensor<32x12xf32>
  // CHECK: gptc.transpose %{{.*}} [0, 2, 1] : tensor<4x8x12xf32> -> tensor<4x12x8xf32>
  %1 = gptc.transpose %x [0, 2, 1] : tensor<4x8x12xf32> -> tensor<4x12x8xf32>
  // CHECK: %{{.*}}:2 = gptc.split %{{.*}} axis 2 : tensor<4x8x12xf32> -> tensor<4x8x4xf32>, tensor<4x8x8xf32>
  %2:2 = gptc.split %x axis 2 : tensor<4x8x12xf32> -> tensor<4x8x4xf32>, tensor<4x8x8xf32>
  // CHECK: gptc.cast %{{.*}} : tensor<4x8x12xf32> -> tensor<4x8x12xbf16>
  %3 = gptc.cast %x : tensor<4x8x12xf32> -> tensor<4x8x12xbf16>
  return %0, %1, %2#0, %2#1, %3 : tensor<32x12xf32>, tensor<4x12x8xf32>, tensor<4x8x4xf32>, tensor<4x8x8xf32>, tensor<4x8x12xbf16>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x8x12xf32>, %b: tensor<12xf32>, %y: tensor<4x4xf32>)
    -> (tensor<12xf32>, tensor<4x8x12xf32>, tensor<4x12xf32>) {
  // CHECK: gptc.reduce_sum %{{.*}} [0, 1] : tensor<4x8x12xf32> -> tensor<12xf32>
  %0 = gptc.reduce_sum %x [0, 1] : tensor<4x8x12xf32> -> tensor<12xf32>
  // CHECK: gptc.broadcast %{{.*}} [0, 1] : tensor<12xf32> -> tensor<4x8x12xf32>
  %1 = gptc.broadcast %b [0, 1] : tensor<12xf32> -> tensor<4x8x12xf32>
  // CHECK: gptc.concat %{{.*}}, %{{.*}}, %{{.*}} axis 1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x12xf32>
  %2 = gptc.concat %y, %y, %y axis 1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x12xf32>
  return %0, %1, %2 : tensor<12xf32>, tensor<4x8x12xf32>, tensor<4x12xf32>
}

// CHECK-LABEL: func.func @elementwise_ops
func.func @elementwise_ops(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: gptc.unary erf %{{.*}} : tensor<4x8xf32>
  %0 = gptc.unary erf %x : tensor<4x8xf32>
  // CHECK: gptc.unary reciprocal %{{.*}} : tensor<4x8xf32>
  %1 = gptc.unary reciprocal %0 : tensor<4x8xf32>
  // CHECK: gptc.binary pow %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %2 = gptc.binary pow %x, %y : tensor<4x8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%ids: tensor<2x8xi32>, %x: tensor<2x8x12xf32>, %g: tensor<12xf32>,
                        %l: tensor<2x8x100xf32>, %d: tensor<f32>)
    -> (tensor<100x12xf32>, tensor<2x8x12xf32>, tensor<12xf32>, tensor<2x8x12xf32>,
        tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x100xf32>) {
  // CHECK: gptc.embedding_grad %{{.*}}, %{{.*}} : tensor<2x8xi32>, tensor<2x8x12xf32> -> tensor<100x12xf32>
  %0 = gptc.embedding_grad %ids, %x : tensor<2x8xi32>, tensor<2x8x12xf32> -> tensor<100x12xf32>
  // CHECK: = gptc.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8x12xf32>, tensor<12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>, tensor<12xf32>, tensor<12xf32>
  %1:3 = gptc.layer_norm_grad %x, %g, %x eps 1.0e-05 : tensor<2x8x12xf32>, tensor<12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>, tensor<12xf32>, tensor<12xf32>
  // CHECK: gptc.gelu_grad %{{.*}}, %{{.*}} : tensor<2x8x12xf32>
  %2 = gptc.gelu_grad %x, %x : tensor<2x8x12xf32>
  // CHECK: gptc.gelu_grad %{{.*}}, %{{.*}} exact : tensor<2x8x12xf32>
  %e = gptc.gelu_grad %x, %x exact : tensor<2x8x12xf32>
  // CHECK: gptc.softmax_grad %{{.*}}, %{{.*}} : tensor<2x8x12xf32>
  %3 = gptc.softmax_grad %x, %x : tensor<2x8x12xf32>
  // CHECK: = gptc.causal_attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads 3 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  %4:3 = gptc.causal_attention_grad %x, %x, %x, %x heads 3 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  // CHECK: gptc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore -1 : tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32> -> tensor<2x8x100xf32>
  %5 = gptc.cross_entropy_grad %l, %ids, %d ignore -1 : tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32> -> tensor<2x8x100xf32>
  return %0, %1#0, %1#1, %2, %3, %4#2, %5 : tensor<100x12xf32>, tensor<2x8x12xf32>, tensor<12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x100xf32>
}

// CHECK-LABEL: func.func @optimizer_ops
func.func @optimizer_ops(%p: tensor<4x3xf32>, %g: tensor<4x3xf32>, %b: tensor<3xf32>, %step: tensor<i32>)
    -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  // CHECK: %[[N:.*]] = gptc.global_norm %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3xf32>
  %n = gptc.global_norm %g, %b : tensor<4x3xf32>, tensor<3xf32>
  // CHECK: %[[S:.*]] = gptc.clip_scale %[[N]] max 1.000000e+00
  %s = gptc.clip_scale %n max 1.0
  // CHECK: %[[LR:.*]] = gptc.learning_rate %{{.*}} peak 6.000000e-04 min 6.000000e-05 warmup 10 total 100 cosine
  %lr = gptc.learning_rate %step peak 6.0e-4 min 6.0e-5 warmup 10 total 100 cosine
  // CHECK: gptc.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %[[LR]] step %{{.*}} scale %[[S]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 decay 1.000000e-01 : tensor<4x3xf32>
  %p1, %m1, %v1 = gptc.adamw %p, %g, %p, %g lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4x3xf32>
  return %p1, %m1, %v1 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @multi_adamw
func.func @multi_adamw(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>, %skip: tensor<f32>)
    -> (tensor<4x3xf32>, tensor<3xf32>) {
  // CHECK: %{{.*}}:6 = gptc.multi_adamw (%{{.*}}, %{{.*}}) grads (%{{.*}}, %{{.*}}) m (%{{.*}}, %{{.*}}) v (%{{.*}}, %{{.*}}) lr %{{.*}} step %{{.*}} scale %{{.*}} skip %{{.*}} beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 decays [1.000000e-01, 0.000000e+00] : tensor<4x3xf32>, tensor<3xf32>
  %r:6 = gptc.multi_adamw (%w, %b) grads (%w, %b) m (%w, %b) v (%w, %b) lr %lr step %step scale %s skip %skip beta1 0.9 beta2 0.95 eps 1.0e-8 decays [0.1, 0.0] : tensor<4x3xf32>, tensor<3xf32>
  return %r#0, %r#1 : tensor<4x3xf32>, tensor<3xf32>
}

// The ops of fp16's dynamic loss scaling.
// CHECK-LABEL: func.func @loss_scaling_ops
func.func @loss_scaling_ops(%p: tensor<4x3xf32>, %g: tensor<4x3xf32>, %norm: tensor<f32>, %scale: tensor<f32>, %good: tensor<i32>, %updates: tensor<i32>, %lr: tensor<f32>)
    -> (tensor<4x3xf32>, tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  // CHECK: %[[F:.*]] = gptc.found_inf %{{.*}} : tensor<f32>
  %found = gptc.found_inf %norm : tensor<f32>
  // CHECK: %[[T:.*]] = gptc.div %{{.*}}, %{{.*}}
  %true = gptc.div %norm, %scale
  // CHECK: %[[C:.*]] = gptc.clip_scale %{{.*}} max 1.000000e+00 loss_scale %{{.*}}
  %c = gptc.clip_scale %norm max 1.0 loss_scale %scale
  // CHECK: gptc.adamw %{{.*}} lr %{{.*}} step %{{.*}} scale %[[C]] skip %[[F]] beta1 9.000000e-01 {{.*}} : tensor<4x3xf32>
  %p1, %m1, %v1 = gptc.adamw %p, %g, %p, %g lr %lr step %updates scale %c skip %found beta1 0.9 beta2 0.95 eps 1.0e-8 decay 0.1 : tensor<4x3xf32>
  // CHECK: gptc.loss_scale_update %{{.*}}, %{{.*}}, %{{.*}}, %[[F]] growth 2.000000e+00 backoff 5.000000e-01 interval 2000
  %s1, %g1, %u1 = gptc.loss_scale_update %scale, %good, %updates, %found growth 2.0 backoff 0.5 interval 2000
  return %p1, %true, %s1, %g1, %u1 : tensor<4x3xf32>, tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}

// The ops of split training steps: token counts that normalize the
// cross-entropy, partial sums of squares for sharded gradients, and
// gradient accumulation over microbatches.
// CHECK-LABEL: func.func @step_ops
func.func @step_ops(%l: tensor<4x8x100xf32>, %ids: tensor<4x8xi32>, %g: tensor<4x3xf32>, %b: tensor<3xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<4x3xf32>) {
  // CHECK: %[[N:.*]] = gptc.count_tokens %{{.*}} ignore -1 : tensor<4x8xi32>
  %n = gptc.count_tokens %ids ignore -1 : tensor<4x8xi32>
  // CHECK: gptc.cross_entropy %{{.*}}, %{{.*}} over %[[N]] ignore -1 : tensor<4x8x100xf32>, tensor<4x8xi32>, tensor<f32> -> tensor<f32>
  %loss = gptc.cross_entropy %l, %ids over %n ignore -1 : tensor<4x8x100xf32>, tensor<4x8xi32>, tensor<f32> -> tensor<f32>
  // CHECK: gptc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} over %[[N]] : tensor<4x8x100xf32>, tensor<4x8xi32>, tensor<f32>, tensor<f32> -> tensor<4x8x100xf32>
  %dl = gptc.cross_entropy_grad %l, %ids, %loss over %n : tensor<4x8x100xf32>, tensor<4x8xi32>, tensor<f32>, tensor<f32> -> tensor<4x8x100xf32>
  // CHECK: %[[SS:.*]] = gptc.sum_squares %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3xf32>
  %ss = gptc.sum_squares %g, %b : tensor<4x3xf32>, tensor<3xf32>
  // CHECK: gptc.sqrt %[[SS]]
  %norm = gptc.sqrt %ss
  // CHECK: %{{.*}}:2 = gptc.accumulate %{{.*}}, %{{.*}} microbatches 2 : (tensor<4x8x100xf32>, tensor<4x8xi32>) -> (tensor<f32>, tensor<4x3xf32>) {
  // CHECK-NEXT: ^bb0(%[[ML:.*]]: tensor<2x8x100xf32>, %[[MI:.*]]: tensor<2x8xi32>):
  // CHECK-NEXT: %[[PART:.*]] = gptc.cross_entropy %[[ML]], %[[MI]] over %[[N]]
  // CHECK-NEXT: gptc.yield %[[PART]], %{{.*}} : tensor<f32>, tensor<4x3xf32>
  %sum:2 = gptc.accumulate %l, %ids microbatches 2 : (tensor<4x8x100xf32>, tensor<4x8xi32>) -> (tensor<f32>, tensor<4x3xf32>) {
  ^bb0(%ml: tensor<2x8x100xf32>, %mi: tensor<2x8xi32>):
    %part = gptc.cross_entropy %ml, %mi over %n : tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32> -> tensor<f32>
    gptc.yield %part, %g : tensor<f32>, tensor<4x3xf32>
  }
  return %loss, %norm, %sum#0, %sum#1 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<4x3xf32>
}

// A generated kernel: operands as block arguments, results yielded.
// CHECK-LABEL: func.func @kernel
//       CHECK: %[[K:.*]]:2 = gptc.kernel "kernel_k0"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
//       CHECK: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>):
//       CHECK:   %[[S:.*]] = gptc.add %[[X]], %[[Y]]
//       CHECK:   gptc.yield %[[S]], %[[S]] : tensor<4x8xf32>, tensor<4x8xf32>
func.func @kernel(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %r:2 = gptc.kernel "kernel_k0" (%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>):
    %s = gptc.add %x, %y : tensor<4x8xf32>
    gptc.yield %s, %s : tensor<4x8xf32>, tensor<4x8xf32>
  }
  return %r#0, %r#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// A gradient bucket: the results have the operands' types.
shard.grid @bucket_mesh(shape = 2x2)
// CHECK-LABEL: func.func @bucket_all_reduce
func.func @bucket_all_reduce(%w: tensor<64x256xf32>, %b: tensor<64xf32>)
    -> (tensor<64x256xf32>, tensor<64xf32>) {
  // CHECK: %[[R:.*]]:2 = gptc.bucket_all_reduce %{{.*}}, %{{.*}} on @bucket_mesh grid_axes = [0, 1] : tensor<64x256xf32>, tensor<64xf32>
  %r:2 = gptc.bucket_all_reduce %w, %b on @bucket_mesh grid_axes = [0, 1] : tensor<64x256xf32>, tensor<64xf32>
  // CHECK: return %[[R]]#0, %[[R]]#1
  return %r#0, %r#1 : tensor<64x256xf32>, tensor<64xf32>
}
