// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-optimizer -o /dev/null

// fp16 needs a backward seeded with the loss scale (gptc-autodiff on the
// fp16 module builds one).
module attributes {gptc.precision = #gptc.precision<fp16>, gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
  // expected-error@+1 {{'func.func' op must take the loss scale (fp16: run gptc-autodiff on the fp16 module)}}
  func.func @forward_backward(%w: tensor<3xf32> {gptc.param = "w"}) -> (tensor<f32>, tensor<3xf32>) {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l, %w : tensor<f32>, tensor<3xf32>
  }
}

// -----

module attributes {gptc.precision = #gptc.precision<bf16>, gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
  // expected-error@+1 {{'func.func' op takes a loss scale but the module is not fp16}}
  func.func @forward_backward(%w: tensor<3xf32> {gptc.param = "w"}, %s: tensor<f32> {gptc.input = #gptc.input<loss_scale>}) -> (tensor<f32>, tensor<3xf32>) {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l, %w : tensor<f32>, tensor<3xf32>
  }
}

// -----

// The attribute's verifier checks the scaler's settings.
// expected-error@+1 {{the initial loss scale must be positive and the growth interval at least 1}}
module attributes {gptc.precision = #gptc.precision<fp16>, gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0, initial_loss_scale = 0.0>} {
  func.func @forward_backward(%w: tensor<3xf32> {gptc.param = "w"}, %s: tensor<f32> {gptc.input = #gptc.input<loss_scale>}) -> (tensor<f32>, tensor<3xf32>) {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l, %w : tensor<f32>, tensor<3xf32>
  }
}
