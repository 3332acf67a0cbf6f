// Not a test: input of mpi-all-reduce.test. A 2 x 2 grid (axis 0: "dp",
// axis 1: "tp"): sums over each axis and over both.
shard.grid @mesh(shape = 2x2)
func.func @forward(%x: tensor<4xf64> {gptc.input = #gptc.input<graph "x">}) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf64> -> tensor<4xf64>
  %b = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<4xf64> -> tensor<4xf64>
  %c = shard.all_reduce %x on @mesh grid_axes = [0, 1] : tensor<4xf64> -> tensor<4xf64>
  return %a, %b, %c : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}
