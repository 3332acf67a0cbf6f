// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-form-kernels{target=cuda}))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-form-kernels))' | FileCheck %s --check-prefix=CPU
// RUN: not gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-form-kernels{target=tpu}))' 2>&1 | FileCheck %s --check-prefix=BAD

// For the GPU, the residual add and the layer norm after it are one
// kernel; the GEMM stays a library call (cuBLASLt) and splits the block.
// On the CPU only the add is a kernel.
// CHECK-LABEL: func.func @block
//       CHECK: %[[K:.*]]:2 = gptc.kernel "block_k0_add_layer_norm"
//       CHECK:   gptc.add
//       CHECK:   gptc.layer_norm
//       CHECK:   gptc.yield
//       CHECK: %[[L:.*]] = gptc.linear %[[K]]#1
//       CHECK: gptc.kernel "block_k1_gelu"(%[[L]])
// CPU-LABEL: func.func @block
//       CPU: gptc.kernel "block_k0_add"
//       CPU: gptc.layer_norm
//       CPU: gptc.linear
//       CPU: gptc.kernel "block_k1_gelu"
// BAD: for the --target option: Cannot find option named 'tpu'!
func.func @block(%x: tensor<8x64xf32>, %r: tensor<8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = gptc.add %x, %r : tensor<8x64xf32>
  %n = gptc.layer_norm %s, %g, %b eps 1.0e-05 : tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<8x64xf32>
  %l = gptc.linear %n, %w : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32>
  %a = gptc.gelu %l : tensor<8x64xf32>
  return %s, %a : tensor<8x64xf32>, tensor<8x64xf32>
}
