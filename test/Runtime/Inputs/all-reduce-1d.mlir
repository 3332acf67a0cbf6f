// Not a test: input of mpi-all-reduce.test.
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<2x3xf32> {gptc.input = #gptc.input<graph "x">}) -> tensor<2x3xf32> {
  %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
