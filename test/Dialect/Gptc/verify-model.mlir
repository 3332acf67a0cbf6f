// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-verify-model

// A module that keeps the convention passes unchanged.
func.func @forward(%w: tensor<4x8xf32> {gptc.param = "wte"},
                   %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
                   %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %e = gptc.embedding %t, %w : tensor<2x3xi32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %o = gptc.linear %e, %w : tensor<2x3x8xf32>, tensor<4x8xf32> -> tensor<2x3x4xf32>
  %loss = gptc.cross_entropy %o, %l : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{a gptc model module needs a 'func.func @forward'}}
module {
  func.func @other() {
    return
  }
}

// -----

func.func @forward(%w: tensor<4x8xf32> {gptc.param = "w"},
                   // expected-error@+1 {{parameter name 'w' is used by arguments #0 and #1}}
                   %v: tensor<4x8xf32> {gptc.param = "w"},
                   %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
                   %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @forward(
    // expected-error@+1 {{argument #0 is neither a parameter (gptc.param) nor a 'tokens' or 'labels' input (gptc.input)}}
    %w: tensor<4x8xf32>,
    %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
    %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @forward(
    %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
    // expected-error@+1 {{parameter 'w' follows the data inputs}}
    %w: tensor<4x8xf32> {gptc.param = "w"},
    %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @forward(
    // expected-error@+1 {{parameter 'ids' must be a floating-point tensor}}
    %w: tensor<4x8xi32> {gptc.param = "ids"},
    // expected-error@+1 {{input 'tokens' must be an integer tensor}}
    %t: tensor<2x3xf32> {gptc.input = #gptc.input<tokens>},
    %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{expects a 'tokens' and a 'labels' input}}
func.func @forward(%w: tensor<4x8xf32> {gptc.param = "w"},
                   %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{must return exactly one scalar floating-point loss}}
func.func @forward(%w: tensor<4x8xf32> {gptc.param = "w"},
                   %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
                   %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<2xf32> {
  %c = gptc.constant dense<0.0> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

func.func @forward(
    // expected-error@+1 {{argument #0 is marked both as a parameter and as an input}}
    %w: tensor<4x8xf32> {gptc.param = "w", gptc.input = #gptc.input<tokens>},
    %t: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
    // expected-error@+1 {{more than one 'tokens' input}}
    %u: tensor<2x3xi32> {gptc.input = #gptc.input<tokens>},
    %l: tensor<2x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %c = gptc.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
