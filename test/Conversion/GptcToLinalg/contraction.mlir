// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// A batched product with a transposed right operand: the transpose, the
// batch dimensions collapsed into one for linalg.batch_matmul into a
// zero-filled destination, expanded back.
// CHECK-LABEL: func.func @batched
// CHECK: %[[T:.*]] = linalg.transpose ins(%arg1 : tensor<2x3x6x5xf32>) outs(%{{.*}} : tensor<2x3x5x6xf32>) permutation = [0, 1, 3, 2]
// CHECK: %[[A:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2], [3]] : tensor<2x3x4x5xf32> into tensor<6x4x5xf32>
// CHECK: %[[B:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1], [2], [3]] : tensor<2x3x5x6xf32> into tensor<6x5x6xf32>
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<6x4x5xf32>, tensor<6x5x6xf32>) outs(%[[Z]] : tensor<6x4x6xf32>)
// CHECK: tensor.expand_shape %[[P]] {{\[}}[0, 1], [2], [3]] output_shape [2, 3, 4, 6]
func.func @batched(%a: tensor<2x3x4x5xf32>, %b: tensor<2x3x6x5xf32>) -> tensor<2x3x4x6xf32> {
  %c = gptc.matmul %a, %b transpose_rhs : tensor<2x3x4x5xf32>, tensor<2x3x6x5xf32> -> tensor<2x3x4x6xf32>
  return %c : tensor<2x3x4x6xf32>
}

// -----

// A 2-D product with a transposed left operand: one linalg.matmul.
// CHECK-LABEL: func.func @plain
// CHECK: %[[T:.*]] = linalg.transpose ins(%arg0 : tensor<4x5xf32>) outs(%{{.*}} : tensor<5x4xf32>) permutation = [1, 0]
// CHECK: linalg.matmul ins(%[[T]], %arg1 : tensor<5x4xf32>, tensor<4x6xf32>) outs(%{{.*}} : tensor<5x6xf32>)
// CHECK-NOT: linalg.generic
func.func @plain(%p: tensor<4x5xf32>, %q: tensor<4x6xf32>) -> tensor<5x6xf32> {
  %d = gptc.matmul %p, %q transpose_lhs : tensor<4x5xf32>, tensor<4x6xf32> -> tensor<5x6xf32>
  return %d : tensor<5x6xf32>
}

// -----

// linear in bf16: rows collapsed, the weight transposed, the product
// accumulated in f32 (linalg.matmul widens its bf16 operands), the bias
// added in f32 and the result rounded to bf16 once.
// CHECK-LABEL: func.func @linear_bf16
// CHECK: %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<2x3x8xbf16> into tensor<6x8xbf16>
// CHECK: %[[W:.*]] = linalg.transpose ins(%arg1 : tensor<16x8xbf16>) outs(%{{.*}} : tensor<8x16xbf16>)
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<6x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<6x16xf32>)
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[Y]], %arg2 : tensor<6x16xf32>, tensor<16xbf16>)
// CHECK:   arith.extf
// CHECK:   arith.addf
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<6x16xf32>) outs(%{{.*}} : tensor<6x16xbf16>)
// CHECK:   arith.truncf
// CHECK: tensor.expand_shape %[[R]] {{\[}}[0, 1], [2]] output_shape [2, 3, 16]
func.func @linear_bf16(%x: tensor<2x3x8xbf16>, %w: tensor<16x8xbf16>, %bias: tensor<16xbf16>) -> tensor<2x3x16xbf16> {
  %y = gptc.linear %x, %w, %bias : tensor<2x3x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16> -> tensor<2x3x16xbf16>
  return %y : tensor<2x3x16xbf16>
}
