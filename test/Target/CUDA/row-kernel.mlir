// A fused row kernel for the GPU: a bf16 residual sum widened to f32,
// layer-normalized, and rounded back to bf16, in one launch. A warp per
// row (8 rows per block of 256 threads): lanes stride the row for its sum,
// five butterfly shuffles give every lane the total, the same for the
// squared deviations, then the lanes write the normalized row. The row
// statistics stay in registers: no temporary, one launch.
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline{format=none})' | FileCheck %s --check-prefix=NVVM

func.func @k(%a: tensor<64x768xbf16>, %b: tensor<64x768xbf16>, %g: tensor<768xf32>, %be: tensor<768xf32>) -> tensor<64x768xbf16> {
  %s = gptc.add %a, %b : tensor<64x768xbf16>
  %x = gptc.cast %s : tensor<64x768xbf16> -> tensor<64x768xf32>
  %y = gptc.layer_norm %x, %g, %be eps 1.0e-05 : tensor<64x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<64x768xf32>
  %z = gptc.cast %y : tensor<64x768xf32> -> tensor<64x768xbf16>
  return %z : tensor<64x768xbf16>
}

// The launch sequence: one launch of 8 blocks of 8 warps over 64 rows,
// the inputs and the result its only arguments.
// NVVM-LABEL: func.func @k
//  NVVM-SAME: (%[[A:.*]]: memref<64x768xbf16>, %[[B:.*]]: memref<64x768xbf16>, %[[G:.*]]: memref<768xf32>, %[[BE:.*]]: memref<768xf32>, %[[OUT:.*]]: memref<64x768xbf16>)
//   NVVM-NOT: memref.alloc
//       NVVM: gpu.launch_func @gptc_kernels::@{{.*}} blocks in (%c8, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[A]] : memref<64x768xbf16>, %[[B]] : memref<64x768xbf16>, %[[G]] : memref<768xf32>, %[[BE]] : memref<768xf32>, %[[OUT]] : memref<64x768xbf16>)
//  NVVM-NEXT: return
// lane = tid % 32 strides the row by 32: the row sum, five xor shuffles,
// the squared deviations, five more, then the row's stores.
//       NVVM: llvm.func @{{.*}}attributes {gpu.kernel, gpu.known_block_size = array<i32: 256, 1, 1>
//       NVVM: nvvm.read.ptx.sreg.tid.x
//       NVVM: llvm.urem %{{.*}}, %{{.*}} : i64
// NVVM-COUNT-5: nvvm.shfl.sync  bfly
//   NVVM-NOT: llvm.store
// NVVM-COUNT-5: nvvm.shfl.sync  bfly
//   NVVM-NOT: nvvm.shfl.sync
//       NVVM: llvm.store %{{.*}} : bf16, !llvm.ptr
//   NVVM-NOT: nvvm.shfl.sync
