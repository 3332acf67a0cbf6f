// RUN: gptc-opt %s -p 'builtin.module(gptc-outline-kernels{share=true})' | FileCheck %s
// RUN: gptc-opt %s -p 'builtin.module(gptc-outline-kernels)' | FileCheck %s --check-prefix=EACH

// With `share`, kernels whose bodies are the same (operand, result and value
// types, ops and attributes; locations aside) get one function, the
// first's: @f_k2 and @g_k0 are @f_k0 again, in another function too. A
// different type (@f_k1), op (@f_k3) or wiring (@f_k4: gelu of the other
// operand) is another kernel. The program keeps every kernel.
// CHECK-LABEL: func.func @f
//   CHECK-COUNT-5: gptc.kernel
// CHECK-LABEL: func.func @g
//       CHECK: gptc.kernel "g_k0"
//       CHECK: module @gptc_kernels {
//  CHECK-NEXT:   func.func @f_k0(
//       CHECK:   func.func @f_k1(
//       CHECK:   func.func @f_k3(
//       CHECK:   func.func @f_k4(
//   CHECK-NOT:   func.func
// EACH-COUNT-6: func.func @{{[fg]}}_k
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>, %h: tensor<4xf16>) -> tensor<4xf32> {
  %0 = gptc.kernel "f_k0" (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %g = gptc.gelu %x : tensor<4xf32> loc("h.0.mlp")
    %s = gptc.add %g, %y : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  %1 = gptc.kernel "f_k1" (%h, %h) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16> {
  ^bb0(%x: tensor<4xf16>, %y: tensor<4xf16>):
    %g = gptc.gelu %x : tensor<4xf16>
    %s = gptc.add %g, %y : tensor<4xf16>
    gptc.yield %s : tensor<4xf16>
  }
  %2 = gptc.kernel "f_k2" (%0, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %g = gptc.gelu %x : tensor<4xf32> loc("h.1.mlp")
    %s = gptc.add %g, %y : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  %3 = gptc.kernel "f_k3" (%2, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %g = gptc.gelu %x : tensor<4xf32>
    %s = gptc.gelu %g : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  %4 = gptc.kernel "f_k4" (%3, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %g = gptc.gelu %y : tensor<4xf32>
    %s = gptc.add %g, %y : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  return %4 : tensor<4xf32>
}
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = gptc.kernel "g_k0" (%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %g = gptc.gelu %x : tensor<4xf32>
    %s = gptc.add %g, %y : tensor<4xf32>
    gptc.yield %s : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
