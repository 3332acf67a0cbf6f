// Not a test: input of export-program.mlir.
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<4xf32>) -> tensor<8xf32> {
  %r = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}
