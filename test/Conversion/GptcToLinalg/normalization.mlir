// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// layer_norm: the row sums, the sums of squared deviations from the row
// mean (a second pass, as the runtime's kernel), then one elementwise pass
// normalizing, scaling by gamma and shifting by beta.
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ELEM:.*]], #[[ROW:.*]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 : tensor<2x3x8xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK:   arith.addf
// CHECK: %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[ELEM]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %[[SUM]] : tensor<2x3x8xf32>, tensor<2x3xf32>)
// CHECK:   arith.divf
// CHECK:   arith.subf
// CHECK:   arith.mulf
// CHECK:   arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[ELEM]], #[[ROW]], #[[ROW]], #[[COL:.*]], #[[COL]], #[[ELEM]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %[[SUM]], %[[SQ]], %arg1, %arg2 : {{.*}}) outs(%{{.*}} : tensor<2x3x8xf32>)
// CHECK:   math.sqrt
func.func @layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// softmax in bf16: the row maximum and the sum of shifted exponentials in
// f32, then the normalized values rounded to bf16.
// CHECK-LABEL: func.func @softmax_bf16
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAX0:.*]] = linalg.fill ins(%[[NEG]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x8xbf16>) outs(%[[MAX0]] : tensor<4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0, %[[MAX]] : tensor<4x8xbf16>, tensor<4xf32>)
// CHECK:   math.exp
// CHECK: linalg.generic {{.*}} ins(%arg0, %[[MAX]], %[[SUM]] : {{.*}}) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK:   math.exp
// CHECK:   arith.divf
// CHECK:   arith.truncf %{{.*}} : f32 to bf16
func.func @softmax_bf16(%s: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %z = gptc.softmax %s : tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
}

// -----

// softmax_grad: the row dot product of y and dy, then y (dy - dot).
// CHECK-LABEL: func.func @softmax_grad
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1, %[[DOT]] : {{.*}}) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:   arith.subf
// CHECK:   arith.mulf
func.func @softmax_grad(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %d = gptc.softmax_grad %y, %dy : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// layer_norm_grad: the row statistics, the rows' sums of dn and dn n (one
// generic, two results), dx elementwise, and dgamma, dbeta as sums over
// the rows (one generic, two results).
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK: %[[DN:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} {{.*}} outs(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} {{.*}} outs(%{{.*}} : tensor<2x3x8xf32>)
// CHECK: %[[P:.*]]:2 = linalg.generic {{.*}} iterator_types = ["reduction", "reduction", "parallel"]} {{.*}} outs(%{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>)
// CHECK: return %[[DX]], %[[P]]#0, %[[P]]#1
func.func @layer_norm_grad(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = gptc.layer_norm_grad %x, %g, %dy eps 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %dx, %dg, %db : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
}
