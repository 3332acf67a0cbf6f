// Not a test: input of mpi-all-reduce.test. Two gradient buckets over a
// grid of 2: one of computed values (planned in place over one span when
// gptc-plan-buffers has run; 20 and 24 bytes, so the span has a gap of
// alignment), one of the function's arguments (never in place: packed
// around the call).
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<5xf32> {gptc.input = #gptc.input<graph "x">},
                   %y: tensor<3x2xf32> {gptc.input = #gptc.input<graph "y">})
    -> (tensor<5xf32>, tensor<3x2xf32>, tensor<5xf32>, tensor<3x2xf32>) {
  %a = gptc.add %x, %x : tensor<5xf32>
  %b = gptc.add %y, %y : tensor<3x2xf32>
  %r:2 = gptc.bucket_all_reduce %a, %b on @mesh grid_axes = [0] : tensor<5xf32>, tensor<3x2xf32>
  %p = gptc.add %r#0, %x : tensor<5xf32>
  %q = gptc.add %r#1, %y : tensor<3x2xf32>
  %s:2 = gptc.bucket_all_reduce %x, %y on @mesh grid_axes = [0] : tensor<5xf32>, tensor<3x2xf32>
  return %p, %q, %s#0, %s#1 : tensor<5xf32>, tensor<3x2xf32>, tensor<5xf32>, tensor<3x2xf32>
}
