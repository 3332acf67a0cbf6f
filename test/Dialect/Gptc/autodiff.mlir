// RUN: gptc-opt %s --split-input-file --gptc-autodiff | FileCheck %s

// The backward graph of each rule. Each model sums its output into a
// scalar loss (reduce_sum, whose own rule is the broadcast at the start of
// every backward pass).

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {gptc.param = "x"}, %[[W:.*]]: tensor<5x4xf32> {gptc.param = "w"}, %[[B:.*]]: tensor<5xf32> {gptc.param = "b"})
// CHECK-SAME: -> (tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<2x3x4xf32> {gptc.grad = "x"}, tensor<5x4xf32> {gptc.grad = "w"}, tensor<5xf32> {gptc.grad = "b"})
// CHECK: %[[Y:.*]] = gptc.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[LOSS:.*]] = gptc.reduce_sum %[[Y]] [0, 1, 2]
// CHECK: %[[ONE:.*]] = gptc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = gptc.broadcast %[[ONE]] [0, 1, 2] : tensor<f32> -> tensor<2x3x5xf32>
// CHECK: %[[X2:.*]] = gptc.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[DY2:.*]] = gptc.reshape %[[DY]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: %[[DX2:.*]] = gptc.matmul %[[DY2]], %[[W]] : tensor<6x5xf32>, tensor<5x4xf32> -> tensor<6x4xf32>
// CHECK: %[[DX:.*]] = gptc.reshape %[[DX2]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[DW:.*]] = gptc.matmul %[[DY2]], %[[X2]] transpose_lhs : tensor<6x5xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK: %[[DB:.*]] = gptc.reduce_sum %[[DY2]] [0] : tensor<6x5xf32> -> tensor<5xf32>
// CHECK: return %[[LOSS]], %[[DX]], %[[DW]], %[[DB]]
func.func @forward(%x: tensor<2x3x4xf32> {gptc.param = "x"}, %w: tensor<5x4xf32> {gptc.param = "w"},
                   %b: tensor<5xf32> {gptc.param = "b"}) -> tensor<f32> {
  %y = gptc.linear %x, %w, %b : tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
  %l = gptc.reduce_sum %y [0, 1, 2] : tensor<2x3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The forward function stays for evaluation.
// CHECK-LABEL: func.func @forward(
// CHECK: return
// The four transpose combinations of matmul: each gradient is one matmul.
// The adds pass the same gradient D to all four products.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[A:.*]]: tensor<3x4xf32> {gptc.param = "a"}, %[[B:.*]]: tensor<4x5xf32> {gptc.param = "b"}, %[[AT:.*]]: tensor<4x3xf32> {gptc.param = "at"}, %[[BT:.*]]: tensor<5x4xf32> {gptc.param = "bt"})
// CHECK: %[[D:.*]] = gptc.broadcast
// Backward of C3 = At^T Bt^T (last forward op, first backward):
// CHECK: gptc.matmul %[[BT]], %[[D]] transpose_lhs transpose_rhs : tensor<5x4xf32>, tensor<3x5xf32> -> tensor<4x3xf32>
// CHECK: gptc.matmul %[[D]], %[[AT]] transpose_lhs transpose_rhs : tensor<3x5xf32>, tensor<4x3xf32> -> tensor<5x4xf32>
// Backward of C2 = At^T B:
// CHECK: gptc.matmul %[[B]], %[[D]] transpose_rhs : tensor<4x5xf32>, tensor<3x5xf32> -> tensor<4x3xf32>
// CHECK: gptc.matmul %[[AT]], %[[D]] : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
// Backward of C1 = A Bt^T:
// CHECK: gptc.matmul %[[D]], %[[BT]] : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
// CHECK: gptc.matmul %[[D]], %[[A]] transpose_lhs : tensor<3x5xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
// Backward of C0 = A B:
// CHECK: gptc.matmul %[[D]], %[[B]] transpose_rhs : tensor<3x5xf32>, tensor<4x5xf32> -> tensor<3x4xf32>
// CHECK: gptc.matmul %[[A]], %[[D]] transpose_lhs : tensor<3x4xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
func.func @forward(%a: tensor<3x4xf32> {gptc.param = "a"}, %b: tensor<4x5xf32> {gptc.param = "b"},
                   %at: tensor<4x3xf32> {gptc.param = "at"}, %bt: tensor<5x4xf32> {gptc.param = "bt"}) -> tensor<f32> {
  %c0 = gptc.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %c1 = gptc.matmul %a, %bt transpose_rhs : tensor<3x4xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
  %c2 = gptc.matmul %at, %b transpose_lhs : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %c3 = gptc.matmul %at, %bt transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
  %s01 = gptc.add %c0, %c1 : tensor<3x5xf32>
  %s012 = gptc.add %s01, %c2 : tensor<3x5xf32>
  %s = gptc.add %s012, %c3 : tensor<3x5xf32>
  %l = gptc.reduce_sum %s [0, 1] : tensor<3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Embedding: a scatter-add into the table; the ids get no gradient. A value
// used twice (x in both the add and the gelu) sums its gradients.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[T:.*]]: tensor<10x4xf32> {gptc.param = "wte"}, %[[IDS:.*]]: tensor<2x3xi32>)
// CHECK: %[[E:.*]] = gptc.embedding %[[IDS]], %[[T]]
// CHECK: %[[G:.*]] = gptc.gelu %[[E]]
// CHECK: %[[DS:.*]] = gptc.broadcast
// CHECK: %[[DG:.*]] = gptc.gelu_grad %[[E]], %[[DS]] : tensor<2x3x4xf32>
// CHECK: %[[DE:.*]] = gptc.add %[[DS]], %[[DG]]
// CHECK: %[[DT:.*]] = gptc.embedding_grad %[[IDS]], %[[DE]] : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<10x4xf32>
// CHECK: return %{{.*}}, %[[DT]]
func.func @forward(%t: tensor<10x4xf32> {gptc.param = "wte"}, %ids: tensor<2x3xi32>) -> tensor<f32> {
  %e = gptc.embedding %ids, %t : tensor<2x3xi32>, tensor<10x4xf32> -> tensor<2x3x4xf32>
  %g = gptc.gelu %e : tensor<2x3x4xf32>
  %s = gptc.add %e, %g : tensor<2x3x4xf32>
  %l = gptc.reduce_sum %s [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The exact GELU's gradient is the exact one.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[G:.*]] = gptc.gelu %{{.*}} exact
// CHECK: gptc.gelu_grad %{{.*}}, %{{.*}} exact : tensor<2x3xf32>
func.func @forward(%x: tensor<2x3xf32> {gptc.param = "x"}) -> tensor<f32> {
  %g = gptc.gelu %x exact : tensor<2x3xf32>
  %l = gptc.reduce_sum %g [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Layer norm, softmax and attention recompute from their forward inputs.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {gptc.param = "x"}, %[[G:.*]]: tensor<4xf32> {gptc.param = "g"}, %[[B:.*]]: tensor<4xf32> {gptc.param = "b"})
// CHECK: %[[N:.*]] = gptc.layer_norm %[[X]], %[[G]], %[[B]] eps 1.000000e-05
// CHECK: %[[A:.*]] = gptc.causal_attention %[[N]], %[[N]], %[[N]] heads 2
// CHECK: %[[S:.*]] = gptc.softmax %[[A]]
// CHECK: %[[D:.*]] = gptc.broadcast
// CHECK: %[[DA:.*]] = gptc.softmax_grad %[[S]], %[[D]]
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = gptc.causal_attention_grad %[[N]], %[[N]], %[[N]], %[[DA]] heads 2
// CHECK: %[[S1:.*]] = gptc.add %[[DQ]], %[[DK]]
// CHECK: %[[DN:.*]] = gptc.add %[[S1]], %[[DV]]
// CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = gptc.layer_norm_grad %[[X]], %[[G]], %[[DN]] eps 1.000000e-05
// CHECK: return %{{.*}}, %[[DX]], %[[DG]], %[[DB]]
func.func @forward(%x: tensor<2x3x4xf32> {gptc.param = "x"}, %g: tensor<4xf32> {gptc.param = "g"},
                   %b: tensor<4xf32> {gptc.param = "b"}) -> tensor<f32> {
  %n = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %a = gptc.causal_attention %n, %n, %n heads 2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %s = gptc.softmax %a : tensor<2x3x4xf32>
  %l = gptc.reduce_sum %s [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Cross-entropy is seeded directly with d loss = 1; the labels get nothing.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[L:.*]]: tensor<2x3x7xf32> {gptc.param = "logits"}, %[[Y:.*]]: tensor<2x3xi32>)
// CHECK: %[[LOSS:.*]] = gptc.cross_entropy %[[L]], %[[Y]] ignore -1
// CHECK: %[[ONE:.*]] = gptc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DL:.*]] = gptc.cross_entropy_grad %[[L]], %[[Y]], %[[ONE]] ignore -1 : tensor<2x3x7xf32>, tensor<2x3xi32>, tensor<f32> -> tensor<2x3x7xf32>
// CHECK: return %[[LOSS]], %[[DL]]
func.func @forward(%logits: tensor<2x3x7xf32> {gptc.param = "logits"}, %y: tensor<2x3xi32>) -> tensor<f32> {
  %l = gptc.cross_entropy %logits, %y ignore -1 : tensor<2x3x7xf32>, tensor<2x3xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Data movement: reshape and transpose invert, split concatenates (zeros for
// a piece the loss does not use), cast casts back.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[X:.*]]: tensor<2x6xf32> {gptc.param = "x"})
// CHECK: %[[D:.*]] = gptc.broadcast %{{.*}} [0, 1] : tensor<f32> -> tensor<3x2xf32>
// CHECK: %[[DC:.*]] = gptc.cast %[[D]] : tensor<3x2xf32> -> tensor<3x2xbf16>
// CHECK: %[[DT:.*]] = gptc.transpose %[[DC]] [1, 0] : tensor<3x2xbf16> -> tensor<2x3xbf16>
// CHECK: %[[DP:.*]] = gptc.cast %[[DT]] : tensor<2x3xbf16> -> tensor<2x3xf32>
// CHECK: %[[Z:.*]] = gptc.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: %[[DS:.*]] = gptc.concat %[[DP]], %[[Z]] axis 1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
// CHECK: %[[DR1:.*]] = gptc.reshape %[[DS]] : tensor<2x6xf32> -> tensor<12xf32>
// CHECK: %[[DR:.*]] = gptc.reshape %[[DR1]] : tensor<12xf32> -> tensor<2x6xf32>
// CHECK: return %{{.*}}, %[[DR]]
func.func @forward(%x: tensor<2x6xf32> {gptc.param = "x"}) -> tensor<f32> {
  %r = gptc.reshape %x : tensor<2x6xf32> -> tensor<12xf32>
  %r2 = gptc.reshape %r : tensor<12xf32> -> tensor<2x6xf32>
  %p:2 = gptc.split %r2 axis 1 : tensor<2x6xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  %c = gptc.cast %p#0 : tensor<2x3xf32> -> tensor<2x3xbf16>
  %t = gptc.transpose %c [1, 0] : tensor<2x3xbf16> -> tensor<3x2xbf16>
  %f = gptc.cast %t : tensor<3x2xbf16> -> tensor<3x2xf32>
  %l = gptc.reduce_sum %f [0, 1] : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets a zero gradient; a
// non-parameter argument gets none.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<4xf32> {gptc.grad = "used"}, tensor<3xf32> {gptc.grad = "unused"})
// CHECK: %[[Z:.*]] = gptc.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[Z]]
func.func @forward(%u: tensor<4xf32> {gptc.param = "used"}, %n: tensor<3xf32> {gptc.param = "unused"},
                   %data: tensor<4xf32>) -> tensor<f32> {
  %s = gptc.add %u, %data : tensor<4xf32>
  %l = gptc.reduce_sum %s [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The elementwise functions of imported graphs: erf's derivative is
// 2/sqrt(pi) exp(-x^2), a quotient's -dy y / rhs, a power's r l^(r-1) and
// y log(l).
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32> {gptc.param = "x"}, %[[W:.*]]: tensor<4xf32> {gptc.param = "w"})
// CHECK: %[[E:.*]] = gptc.unary erf %[[X]]
// CHECK: %[[Q:.*]] = gptc.binary div %[[E]], %[[W]]
// CHECK: %[[P:.*]] = gptc.binary pow %[[Q]], %[[W]]
// CHECK: %[[DY:.*]] = gptc.broadcast
// CHECK: %[[ONE:.*]] = gptc.constant dense<1.000000e+00>
// CHECK: %[[WM1:.*]] = gptc.binary sub %[[W]], %[[ONE]]
// CHECK: %[[PW:.*]] = gptc.binary pow %[[Q]], %[[WM1]]
// CHECK: %[[RP:.*]] = gptc.binary mul %[[W]], %[[PW]]
// CHECK: %[[DQ:.*]] = gptc.binary mul %[[DY]], %[[RP]]
// CHECK: gptc.unary log %[[Q]]
// CHECK: %[[DE:.*]] = gptc.binary div %[[DQ]], %[[W]]
// CHECK: gptc.unary neg
// CHECK: %[[DW:.*]] = gptc.add
// CHECK: %[[C:.*]] = gptc.constant dense<1.12837923>
// CHECK: %[[S:.*]] = gptc.binary mul %[[DE]], %[[C]]
// CHECK: %[[SQ:.*]] = gptc.binary mul %[[X]], %[[X]]
// CHECK: %[[NSQ:.*]] = gptc.unary neg %[[SQ]]
// CHECK: %[[EX:.*]] = gptc.unary exp %[[NSQ]]
// CHECK: %[[DX:.*]] = gptc.binary mul %[[S]], %[[EX]]
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @forward(%x: tensor<4xf32> {gptc.param = "x"}, %w: tensor<4xf32> {gptc.param = "w"}) -> tensor<f32> {
  %e = gptc.unary erf %x : tensor<4xf32>
  %q = gptc.binary div %e, %w : tensor<4xf32>
  %p = gptc.binary pow %q, %w : tensor<4xf32>
  %l = gptc.reduce_sum %p [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
