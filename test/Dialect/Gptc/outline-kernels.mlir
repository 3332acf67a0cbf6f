// RUN: gptc-opt %s -p 'builtin.module(gptc-outline-kernels)' | FileCheck %s
// RUN: gptc-opt %s -p 'builtin.module(gptc-outline-kernels,gptc-outline-kernels)' | FileCheck %s

// Each kernel becomes a function of @gptc_kernels (outlining twice gives
// one copy); the program keeps its kernels.
// CHECK-LABEL: func.func @f
//       CHECK:   gptc.kernel "f_k0"
//       CHECK:   gptc.kernel "f_k1"
//       CHECK: module @gptc_kernels {
//       CHECK:   func.func @f_k0(%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
//       CHECK:     %[[G:.*]] = gptc.gelu %[[X]]
//       CHECK:     return %[[G]]
//       CHECK:   func.func @f_k1(
//       CHECK:     gptc.add
//   CHECK-NOT: module @gptc_kernels
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = gptc.kernel "f_k0" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %g = gptc.gelu %x : tensor<4xf32>
    gptc.yield %g : tensor<4xf32>
  }
  %1 = gptc.kernel "f_k1" (%0, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %s = gptc.add %x, %y : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  return %1 : tensor<4xf32>
}
