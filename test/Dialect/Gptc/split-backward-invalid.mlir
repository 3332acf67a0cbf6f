// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-split-backward

// expected-error@+1 {{gptc-split-backward needs @chunk<c>_backward functions (gptc-pipeline-split, then gptc-autodiff)}}
module {
  func.func @forward(%x: tensor<4xf32> {gptc.param = "x"}) -> tensor<f32> {
    %l = gptc.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A result that is neither the loss nor a gradient has no half to go to.
// expected-error@+1 {{'func.func' op result 1 is neither the loss nor a gradient: cannot split it}}
func.func @chunk0_backward(%x: tensor<4xf32> {gptc.param = "x"}) -> (tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<4xf32>) {
  %l = gptc.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{'func.func' op returns an argument as the gradient of result 1: cannot split it}}
func.func @chunk0_backward(%x: tensor<4xf32> {gptc.param = "x"}) -> (tensor<f32> {gptc.output = #gptc.output<loss>}, tensor<4xf32> {gptc.grad = "x"}) {
  %l = gptc.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{'func.func' op is already split: @chunk0_backward_input or _weight exists}}
func.func @chunk0_backward(%x: tensor<4xf32> {gptc.param = "x"}) -> (tensor<f32> {gptc.output = #gptc.output<loss>}) {
  %l = gptc.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @chunk0_backward_input() {
  return
}
