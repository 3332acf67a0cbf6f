// A fused row kernel for the GPU: a bf16 residual sum widened to f32,
// layer-normalized, and rounded back to bf16. Each of layer norm's row
// sums is a warp per row (8 rows per block of 256 threads), lanes striding
// the row and five butterfly shuffles combining them; the normalization
// itself is elementwise, a thread per element.
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline{format=none})' | FileCheck %s --check-prefix=NVVM

func.func @k(%a: tensor<64x768xbf16>, %b: tensor<64x768xbf16>, %g: tensor<768xf32>, %be: tensor<768xf32>) -> tensor<64x768xbf16> {
  %s = gptc.add %a, %b : tensor<64x768xbf16>
  %x = gptc.cast %s : tensor<64x768xbf16> -> tensor<64x768xf32>
  %y = gptc.layer_norm %x, %g, %be eps 1.0e-05 : tensor<64x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<64x768xf32>
  %z = gptc.cast %y : tensor<64x768xf32> -> tensor<64x768xbf16>
  return %z : tensor<64x768xbf16>
}

// The launch sequence: the row means (initialized, then 8 blocks of 8
// warps over 64 rows, the residual sum and the widening fused into the
// reduction), the same for the squared deviations, then the normalization
// over 64 x 768 elements; two temporaries of 64 floats.
// NVVM-LABEL: func.func @k
//  NVVM-SAME: (%[[A:.*]]: memref<64x768xbf16>, %[[B:.*]]: memref<64x768xbf16>, %{{.*}}: memref<768xf32>, %{{.*}}: memref<768xf32>, %[[OUT:.*]]: memref<64x768xbf16>)
//       NVVM: memref.alloc() {{.*}} : memref<64xf32>
//       NVVM: memref.alloc() {{.*}} : memref<64xf32>
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%[[MEAN:.*]] : memref<64xf32>)
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c8, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[A]] : memref<64x768xbf16>, %[[B]] : memref<64x768xbf16>, %[[MEAN]] : memref<64xf32>)
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%[[VAR:.*]] : memref<64xf32>)
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c8, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[A]] : memref<64x768xbf16>, %[[B]] : memref<64x768xbf16>, %[[MEAN]] : memref<64xf32>, %[[VAR]] : memref<64xf32>)
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c192, %c1, %c1) threads in (%c256, %c1, %c1) {{.*}}%[[OUT]] : memref<64x768xbf16>)
//  NVVM-NEXT: return
// A row sum: lane = tid % 32 strides the row by 32; five xor shuffles.
//       NVVM: llvm.func @{{.*}}attributes {gpu.kernel, gpu.known_block_size = array<i32: 256, 1, 1>
//       NVVM: nvvm.read.ptx.sreg.tid.x
//       NVVM: llvm.urem %{{.*}}, %{{.*}} : i64
// NVVM-COUNT-5: nvvm.shfl.sync  bfly
//       NVVM: llvm.store
