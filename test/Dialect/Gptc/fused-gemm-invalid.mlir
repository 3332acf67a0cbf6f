// RUN: gptc-opt %s --split-input-file --verify-diagnostics
// The verifier of gptc.fused_gemm: the region must be the form its
// epilogue names, since the runtime runs the form, not the region.

func.func @unknown_epilogue(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  // expected-error@+1 {{custom op 'gptc.fused_gemm' invalid epilogue attribute specification: "relu"}}
  %0 = gptc.fused_gemm "relu"(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>):
    %h = gptc.linear %a, %b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    gptc.yield %h : tensor<4x16xf32>
  }
  return %0 : tensor<4x16xf32>
}

// -----

func.func @gelu_aux_without_gelu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error@+1 {{with epilogue 'gelu_aux' expects gelu of the product}}
  %0:2 = gptc.fused_gemm gelu_aux(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>):
    %h = gptc.linear %a, %b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %s = gptc.add %h, %h : tensor<4x16xf32>
    gptc.yield %s, %h : tensor<4x16xf32>, tensor<4x16xf32>
  }
  return %0#0, %0#1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

func.func @gelu_aux_yields_swapped(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error@+1 {{expects the region to yield 2 value(s) of that form and nothing else}}
  %0:2 = gptc.fused_gemm gelu_aux(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>):
    %h = gptc.linear %a, %b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %g = gptc.gelu %h : tensor<4x16xf32>
    gptc.yield %h, %g : tensor<4x16xf32>, tensor<4x16xf32>
  }
  return %0#0, %0#1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

func.func @gelu_aux_inexact_widening(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>) {
  // expected-error@+1 {{between exact casts to f32 and back for 16-bit types}}
  %0:2 = gptc.fused_gemm gelu_aux(%x, %w) : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>) {
  ^bb0(%a: tensor<4x8xbf16>, %b: tensor<16x8xbf16>):
    %h = gptc.linear %a, %b : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
    %g = gptc.gelu %h : tensor<4x16xbf16>
    gptc.yield %g, %h : tensor<4x16xbf16>, tensor<4x16xbf16>
  }
  return %0#0, %0#1 : tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

func.func @dgelu_wrong_gelu_input(%dy: tensor<4x16xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{with epilogue 'dgelu' expects gelu_grad of the third operand and the product}}
  %0 = gptc.fused_gemm dgelu(%dy, %w, %pre) : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %p: tensor<4x8xf32>):
    %g = gptc.matmul %a, %b : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %d = gptc.gelu_grad %g, %p : tensor<4x8xf32>
    gptc.yield %d : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dgelu_bgrad_wrong_dimension(%dy: tensor<4x16xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  // expected-error@+1 {{with epilogue 'dgelu_bgrad' expects the gradient summed over every dimension but the last}}
  %0:2 = gptc.fused_gemm dgelu_bgrad(%dy, %w, %pre) : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %p: tensor<4x8xf32>):
    %g = gptc.matmul %a, %b : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %d = gptc.gelu_grad %p, %g : tensor<4x8xf32>
    %s = gptc.reduce_sum %d [1] : tensor<4x8xf32> -> tensor<4xf32>
    gptc.yield %d, %s : tensor<4x8xf32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4xf32>
}

// -----

func.func @bgrad_not_transposed(%dy: tensor<16x4xf32>, %x: tensor<4x8xf32>) -> (tensor<16x8xf32>, tensor<4xf32>) {
  // expected-error@+1 {{with epilogue 'bgrad' expects a 2-D gptc.matmul transpose_lhs of the block arguments first}}
  %0:2 = gptc.fused_gemm bgrad(%dy, %x) : (tensor<16x4xf32>, tensor<4x8xf32>) -> (tensor<16x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<16x4xf32>, %b: tensor<4x8xf32>):
    %m = gptc.matmul %a, %b : tensor<16x4xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
    %s = gptc.reduce_sum %a [0] : tensor<16x4xf32> -> tensor<4xf32>
    gptc.yield %m, %s : tensor<16x8xf32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<16x8xf32>, tensor<4xf32>
}

// -----

func.func @block_arguments(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error@+1 {{expects one block argument of each input's type}}
  %0:2 = gptc.fused_gemm gelu_aux(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %h = gptc.linear %a, %a : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
    gptc.yield %h, %h : tensor<4x4xf32>, tensor<4x4xf32>
  }
  return %0#0, %0#1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

func.func @gelu_aux_exact(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error@+1 {{with epilogue 'gelu_aux' expects the tanh GELU (the GEMM epilogues compute no exact one)}}
  %0:2 = gptc.fused_gemm gelu_aux(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>):
    %h = gptc.linear %a, %b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %g = gptc.gelu %h exact : tensor<4x16xf32>
    gptc.yield %g, %h : tensor<4x16xf32>, tensor<4x16xf32>
  }
  return %0#0, %0#1 : tensor<4x16xf32>, tensor<4x16xf32>
}
