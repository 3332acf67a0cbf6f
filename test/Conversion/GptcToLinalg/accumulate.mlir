// RUN: gptc-opt %s -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1}))' | FileCheck %s

// gptc.accumulate: an scf.for over the microbatches carrying zero-filled
// sums; each iteration slices its rows out of the stacked input, runs the
// (lowered) region on them and adds what it yields into the carried sum.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: %[[R:.*]] = scf.for %[[I:.*]] = %c0 to %c4 step %c1 iter_args(%[[S:.*]] = %[[Z]]) -> (tensor<3xf32>)
// CHECK:   %[[ROW:.*]] = arith.muli %[[I]], %c2
// CHECK:   %[[MB:.*]] = tensor.extract_slice %arg0[%[[ROW]], 0] [2, 3] [1, 1] : tensor<8x3xf32> to tensor<2x3xf32>
// CHECK:   %[[P:.*]] = linalg.generic {{.*}} ins(%[[MB]] : tensor<2x3xf32>)
// CHECK:   %[[N:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<3xf32>) outs(%[[S]] : tensor<3xf32>)
// CHECK:   scf.yield %[[N]]
// CHECK: return %[[R]]
func.func @accumulate(%x: tensor<8x3xf32>) -> tensor<3xf32> {
  %s = gptc.accumulate %x microbatches 4 : (tensor<8x3xf32>) -> (tensor<3xf32>) {
  ^bb0(%mb: tensor<2x3xf32>):
    %p = gptc.reduce_sum %mb [0] : tensor<2x3xf32> -> tensor<3xf32>
    gptc.yield %p : tensor<3xf32>
  }
  return %s : tensor<3xf32>
}
