// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-autodiff --gptc-optimizer -o /dev/null

// expected-error@+1 {{gptc-optimizer needs the module attribute 'gptc.optimizer' (written by the importer)}}
module {
  func.func @forward(%w: tensor<3xf32> {gptc.param = "w"}) -> tensor<f32> {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A setting missing from the attribute is a parse error at the attribute.
// expected-error@+1 {{struct is missing required parameter: beta2}}
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
  func.func @forward(%w: tensor<3xf32> {gptc.param = "w"}) -> tensor<f32> {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error@+1 {{'gptc.nan_policy' must be a #gptc.nan_policy<stop|skip> attribute on the module}}
module attributes {gptc.nan_policy = "sometimes", gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 1.0e-3, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
  func.func @forward(%w: tensor<3xf32> {gptc.param = "w"}) -> tensor<f32> {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
