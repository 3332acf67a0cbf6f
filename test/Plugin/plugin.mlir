// gptc's dialect and passes in Debian's own mlir-opt, loaded from one
// plugin (lib/Plugin): the dialect parses and prints, gptc's passes and
// named pipelines run; without the plugin mlir-opt knows neither.
// The sanitizer build does not build the plugin: an ASan-instrumented
// shared object cannot load into Debian's uninstrumented mlir-opt (the ASan
// runtime must come first in the process). It holds on any machine.
// UNSUPPORTED: asan
// RUN: mlir-opt %s --load-dialect-plugin=%gptc_plugin | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: mlir-opt %s --load-dialect-plugin=%gptc_plugin --load-pass-plugin=%gptc_plugin --pass-pipeline='builtin.module(gptc-autodiff)' | FileCheck %s --check-prefix=AUTODIFF
// RUN: mlir-opt %s --load-dialect-plugin=%gptc_plugin --load-pass-plugin=%gptc_plugin --pass-pipeline='builtin.module(func.func(gptc-form-kernels))' | FileCheck %s --check-prefix=KERNELS
// RUN: mlir-opt %s --load-dialect-plugin=%gptc_plugin --load-pass-plugin=%gptc_plugin --pass-pipeline='builtin.module(func.func(convert-gptc-to-linalg))' | FileCheck %s --check-prefix=LINALG
// RUN: not mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NOPLUGIN

// ROUNDTRIP-LABEL: func.func @forward
// ROUNDTRIP: gptc.unary erf %{{.*}} : tensor<4x8xf32>
// ROUNDTRIP: gptc.gelu %{{.*}} : tensor<4x8xf32>

// AUTODIFF-LABEL: func.func @forward_backward
// AUTODIFF: gptc.gelu_grad
// AUTODIFF: gptc.unary exp

// KERNELS: gptc.kernel "forward_k0_unary_gelu"
// KERNELS: gptc.unary erf
// KERNELS: gptc.gelu

// LINALG: linalg.generic
// LINALG-NOT: gptc.gelu

// NOPLUGIN: error: Dialect `gptc' not found for custom op 'gptc.unary'

func.func @forward(%x: tensor<4x8xf32> {gptc.param = "x"}) -> tensor<f32> {
  %e = gptc.unary erf %x : tensor<4x8xf32>
  %g = gptc.gelu %e : tensor<4x8xf32>
  %s = gptc.reduce_sum %g [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
