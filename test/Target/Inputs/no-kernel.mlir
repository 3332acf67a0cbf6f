// Not a test: input of export-program.mlir (an op the CPU runtime has no
// kernel for).
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<4x2xf32>) -> tensor<8x1xf32> {
  %r = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x2xf32> -> tensor<8x1xf32>
  return %r : tensor<8x1xf32>
}
