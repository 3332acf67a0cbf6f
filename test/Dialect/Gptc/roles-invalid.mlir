// RUN: gptc-opt %s --split-input-file --verify-diagnostics
// A role, initializer or split that is not the typed attribute, or a kind
// without what it needs, is refused where it is written.

// expected-error@+1 {{'gptc.input' on argument 0 must be a #gptc.input<...> attribute, got "tokens"}}
func.func @string_role(%t: tensor<2xi32> {gptc.input = "tokens"}) {
  return
}

// -----

// expected-error@+1 {{unknown input kind 'token'}}
func.func @unknown_kind(%t: tensor<2xi32> {gptc.input = #gptc.input<token>}) {
  return
}

// -----

// expected-error@+1 {{'gptc.output' on result 0 must be a #gptc.output<...> attribute, got #gptc.input<tokens>}}
func.func @wrong_side(%t: tensor<2xi32>) -> (tensor<2xi32> {gptc.output = #gptc.input<tokens>}) {
  return %t : tensor<2xi32>
}

// -----

// expected-error@+1 {{expected integer value}}
func.func @cotangent_without_index(%c: tensor<2xf32> {gptc.input = #gptc.input<cotangent>}) {
  return
}

// -----

// expected-error@+1 {{expected string}}
func.func @moment_without_parameter(%m: tensor<2xf32> {gptc.state = #gptc.state<m>}) {
  return
}

// -----

// expected-error@+1 {{output 'saved' needs an index of at least 0}}
func.func @saved_negative() -> (tensor<2xf32> {gptc.output = #gptc.output<saved -2>}) {
  %c = gptc.constant dense<0.0> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

// expected-error@+1 {{input 'cotangent' needs an index of at least 0}}
func.func @negative_index(%c: tensor<2xf32> {gptc.input = #gptc.input<cotangent -1>}) {
  return
}

// -----

// expected-error@+1 {{state 'm' needs a non-empty name}}
func.func @empty_name(%m: tensor<2xf32> {gptc.state = #gptc.state<m "">}) {
  return
}

// -----

// expected-error@+1 {{a normal initializer needs std > 0}}
func.func @normal_without_std(%w: tensor<2xf32> {gptc.param = "w", gptc.init = #gptc.init<kind = normal>}) {
  return
}

// -----

// expected-error@+1 {{'gptc.init' on argument 0 must be a #gptc.init<...> attribute}}
func.func @dictionary_init(%w: tensor<2xf32> {gptc.param = "w", gptc.init = {kind = "zeros"}}) {
  return
}

// -----

func.func @string_split(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'gptc.tensor_parallel' must be a #gptc.tensor_parallel<column|row|vocab> attribute}}
  %y = gptc.linear %x, %w {gptc.tensor_parallel = "column"} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @unknown_split(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+2 {{expected ::mlir::gptc::TensorParallel to be one of: column, row, vocab}}
  // expected-error@+1 {{failed to parse Gptc_TensorParallelAttr parameter 'value'}}
  %y = gptc.linear %x, %w {gptc.tensor_parallel = #gptc.tensor_parallel<diagonal>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
