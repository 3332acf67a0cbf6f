// RUN: gptc-opt %s --split-input-file | FileCheck %s
// RUN: gptc-opt %s --split-input-file | gptc-opt --split-input-file | FileCheck %s

// The module's configuration attributes round-trip; settings equal to their
// defaults are not printed, floats print so that they read back exactly.

// CHECK: module attributes {gptc.optimizer = #gptc.optimizer<lr = 6.000000e-04, min_lr = 6.000000e-05, warmup_steps = 10, total_steps = 100, decay = cosine, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, decay_embeddings = false, grad_clip = 1.000000e+00, batch_size = 8>, gptc.parallel = #gptc.parallel<axes = ["dp", "tp"], kinds = ["data", "tensor"], zero_stage = 1>, gptc.precision = #gptc.precision<bf16>}
module attributes {
  gptc.precision = #gptc.precision<bf16>,
  gptc.optimizer = #gptc.optimizer<lr = 6.0e-4, min_lr = 6.0e-5, warmup_steps = 10, total_steps = 100, decay = cosine, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, decay_embeddings = false, grad_clip = 1.0, accumulation_steps = 1, batch_size = 8>,
  gptc.parallel = #gptc.parallel<axes = ["dp", "tp"], kinds = ["data", "tensor"], zero_stage = 1, sequence_parallel = false>
} {
}

// -----

// Settings in any order; the fp16 scaler's, when not the defaults, print.
// CHECK: module attributes {gptc.optimizer = #gptc.optimizer<lr = 1.000000e-02, {{.*}} accumulation_steps = 4, initial_loss_scale = 1.024000e+03, loss_scale_growth_interval = 100>
// CHECK-SAME: #gptc.parallel<axes = ["tp"], kinds = ["tensor"], sequence_parallel = true>
module attributes {
  gptc.optimizer = #gptc.optimizer<decay = linear, lr = 1.0e-2, min_lr = 0.0, warmup_steps = 0, total_steps = 10, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, decay_embeddings = true, grad_clip = 0.0, accumulation_steps = 4, initial_loss_scale = 1024.0, loss_scale_growth_interval = 100>,
  gptc.parallel = #gptc.parallel<axes = ["tp"], kinds = ["tensor"], sequence_parallel = true>
} {
}
