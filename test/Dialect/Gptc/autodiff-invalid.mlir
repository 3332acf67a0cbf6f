// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-autodiff

func.func @forward(%x: tensor<4xf32> {gptc.param = "x"}) -> tensor<f32> {
  // A backward op has no rule of its own (gptc differentiates once).
  // expected-error@+1 {{'gptc.gelu_grad' op has no vector-Jacobian rule: gptc-autodiff cannot differentiate through it}}
  %g = gptc.gelu_grad %x, %x : tensor<4xf32>
  %l = gptc.reduce_sum %g [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{'func.func' op must return exactly one scalar floating-point loss to be differentiated}}
func.func @forward(%x: tensor<4xf32> {gptc.param = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{gptc-autodiff: no function 'forward'}}
module {
  func.func @model(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error@+1 {{gptc-autodiff: the module already has a symbol 'forward_backward'}}
func.func @forward(%x: tensor<4xf32> {gptc.param = "x"}) -> tensor<f32> {
  %l = gptc.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @forward_backward() {
  return
}
