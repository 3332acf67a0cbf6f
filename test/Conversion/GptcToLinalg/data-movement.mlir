// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// Layout ops become tensor and linalg ops on the same values; reduce_sum a
// linalg.generic whose reduced loops are the op's dimensions, summing into
// a zero-filled destination.
// CHECK-LABEL: func.func @data
// CHECK-DAG: %[[SHAPE:.*]] = arith.constant dense<[6, 4]> : tensor<2xindex>
// CHECK-DAG: %[[K:.*]] = arith.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK: tensor.reshape %arg0(%[[SHAPE]]) : (tensor<2x3x4xf32>, tensor<2xindex>) -> tensor<6x4xf32>
// CHECK: linalg.transpose ins(%arg0 : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<2x4x3xf32>) permutation = [0, 2, 1]
// CHECK: tensor.extract_slice %arg0[0, 0, 0] [2, 1, 4] [1, 1, 1]
// CHECK: tensor.extract_slice %arg0[0, 1, 0] [2, 2, 4] [1, 1, 1]
// CHECK: tensor.concat dim(1) %arg0, %arg0
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["reduction", "reduction", "parallel"]} ins(%arg0 : tensor<2x3x4xf32>) outs(%[[Z]] : tensor<4xf32>)
// CHECK:   arith.addf
// CHECK: linalg.broadcast ins(%arg1 : tensor<4xbf16>) outs(%{{.*}} : tensor<3x4xbf16>) dimensions = [0]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3xi32>)
// CHECK:   linalg.index 1
// CHECK:   arith.index_cast
// CHECK: return {{.*}}%[[K]]
func.func @data(%x: tensor<2x3x4xf32>, %b: tensor<4xbf16>) -> (tensor<6x4xf32>, tensor<2x4x3xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x6x4xf32>, tensor<4xf32>, tensor<3x4xbf16>, tensor<2x3xi32>, tensor<4xf32>) {
  %r = gptc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %t = gptc.transpose %x [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %s:2 = gptc.split %x axis 1 : tensor<2x3x4xf32> -> tensor<2x1x4xf32>, tensor<2x2x4xf32>
  %c = gptc.concat %x, %x axis 1 : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  %sum = gptc.reduce_sum %x [0, 1] : tensor<2x3x4xf32> -> tensor<4xf32>
  %bc = gptc.broadcast %b [0] : tensor<4xbf16> -> tensor<3x4xbf16>
  %i = gptc.iota dim 1 : tensor<2x3xi32>
  %k = gptc.constant dense<0.5> : tensor<4xf32>
  return %r, %t, %s#0, %s#1, %c, %sum, %bc, %i, %k : tensor<6x4xf32>, tensor<2x4x3xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x6x4xf32>, tensor<4xf32>, tensor<3x4xbf16>, tensor<2x3xi32>, tensor<4xf32>
}

// -----

// A bf16 sum accumulates in f32 and is rounded once.
// CHECK-LABEL: func.func @sum_bf16
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<8x4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:   arith.extf %{{.*}} : bf16 to f32
// CHECK:   arith.addf
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xbf16>)
// CHECK:   arith.truncf %{{.*}} : f32 to bf16
func.func @sum_bf16(%x: tensor<8x4xbf16>) -> tensor<4xbf16> {
  %s = gptc.reduce_sum %x [0] : tensor<8x4xbf16> -> tensor<4xbf16>
  return %s : tensor<4xbf16>
}
