// Not a test: input of export-program.mlir.
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = shard.all_reduce %x on @mesh grid_axes = [0] reduction = min : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}
