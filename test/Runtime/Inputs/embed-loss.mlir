// Not a test: input of errors.test.
func.func @forward(%wte: tensor<10x4xf32> {gptc.param = "wte"},
                   %tokens: tensor<1x3xi32> {gptc.input = #gptc.input<tokens>},
                   %labels: tensor<1x3xi32> {gptc.input = #gptc.input<labels>}) -> tensor<f32> {
  %e = gptc.embedding %tokens, %wte : tensor<1x3xi32>, tensor<10x4xf32> -> tensor<1x3x4xf32> loc("wte"("model.pbtxt":3:5))
  %l = gptc.linear %e, %wte : tensor<1x3x4xf32>, tensor<10x4xf32> -> tensor<1x3x10xf32>
  %loss = gptc.cross_entropy %l, %labels : tensor<1x3x10xf32>, tensor<1x3xi32> -> tensor<f32> loc("loss"("model.pbtxt":9:1))
  return %loss : tensor<f32>
}
