// RUN: gptc-opt %s -p 'builtin.module(func.func(gptc-plan-buffers{alignment=48}))' --verify-diagnostics

// expected-error@+1 {{gptc-plan-buffers: alignment must be a power of two}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = gptc.gelu %x : tensor<4xf32>
  return %a : tensor<4xf32>
}
