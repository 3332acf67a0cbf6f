// RUN: gptc-opt %s --split-input-file --verify-diagnostics

// Each configuration attribute checks its values where it is written.

// expected-error@+2 {{expected ::mlir::gptc::LrDecay to be one of: cosine, linear, constant}}
// expected-error@+1 {{failed to parse Gptc_OptimizerAttr parameter 'decay'}}
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 0.0, warmup_steps = 0, total_steps = 10, decay = "step", beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
}

// -----

// expected-error@+1 {{beta1 and beta2 must lie in [0, 1), got 9.000000e-01 and 1.000000e+00}}
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 0.0, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 1.0, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0>} {
}

// -----

// expected-error@+1 {{accumulation_steps must be >= 1, got 0}}
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 0.0, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = true, grad_clip = 1.0, accumulation_steps = 0>} {
}

// -----

// expected-error@+2 {{expected 'true' or 'false'}}
// expected-error@+1 {{failed to parse Gptc_OptimizerAttr parameter 'decay_embeddings' which is to be a `bool`}}
module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.0e-2, min_lr = 0.0, warmup_steps = 0, total_steps = 10, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = yes, grad_clip = 1.0>} {
}

// -----

// expected-error@+1 {{zero_stage must be 0, 1, 2 or 3, got 4}}
module attributes {gptc.parallel = #gptc.parallel<axes = ["dp"], kinds = ["data"], zero_stage = 4>} {
}

// -----

// expected-error@+1 {{needs one kind per axis, got 2 axes and 1 kinds}}
module attributes {gptc.parallel = #gptc.parallel<axes = ["dp", "tp"], kinds = ["data"]>} {
}

// -----

// expected-error@+2 {{axis kinds must be "data", "tensor", "pipeline" or "context", got "expert"}}
// expected-error@+1 {{failed to parse Gptc_ParallelAttr parameter 'kinds'}}
module attributes {gptc.parallel = #gptc.parallel<axes = ["ep"], kinds = ["expert"]>} {
}

// -----

// The configuration in a form the passes do not read (a plain dictionary)
// is an error, not a silent single-device run.
// expected-error@+1 {{'gptc.parallel' must be a #gptc.parallel<...> attribute on the module}}
module attributes {gptc.parallel = {axes = ["dp"], kinds = ["data"], zero_stage = 1 : i64}} {
}

// -----

// expected-error@+1 {{'gptc.optimizer' must be a #gptc.optimizer<...> attribute on the module}}
module attributes {gptc.optimizer = {lr = 1.0e-2 : f64}} {
}

// -----

// expected-error@+1 {{'gptc.precision' must be a #gptc.precision<fp32|bf16|fp16> attribute on the module}}
module attributes {gptc.precision = "bf16"} {
}

// -----

// expected-error@+2 {{expected ::mlir::gptc::Precision to be one of: fp32, bf16, fp16}}
// expected-error@+1 {{failed to parse Gptc_PrecisionAttr parameter 'value'}}
module attributes {gptc.precision = #gptc.precision<fp8>} {
}

// -----

// expected-error@+1 {{'gptc.recompute' must be a #gptc.recompute<none|selective|full> attribute on the module}}
module attributes {gptc.recompute = "full"} {
}

// -----

// expected-error@+1 {{'gptc.nan_policy' must be a #gptc.nan_policy<stop|skip> attribute on the module}}
func.func @f() attributes {gptc.nan_policy = #gptc.nan_policy<skip>} {
  return
}
