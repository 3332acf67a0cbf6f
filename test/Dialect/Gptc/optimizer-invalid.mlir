// RUN: gptc-opt %s --split-input-file --verify-diagnostics --gptc-autodiff --gptc-optimizer -o /dev/null

// expected-error@+1 {{gptc-optimizer needs the module attribute 'gptc.optimizer' (written by the importer)}}
module {
  func.func @forward(%w: tensor<3xf32> {gptc.param = "w"}) -> tensor<f32> {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error@+1 {{gptc.optimizer needs a float 'beta2'}}
module attributes {gptc.optimizer = {lr = 1.0e-2 : f64, min_lr = 1.0e-3 : f64, warmup_steps = 0 : i64, total_steps = 10 : i64, decay = "cosine", beta1 = 0.9 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, decay_embeddings = true, grad_clip = 1.0 : f64}} {
  func.func @forward(%w: tensor<3xf32> {gptc.param = "w"}) -> tensor<f32> {
    %l = gptc.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
