// The CUDA target's lowering of one kernel function (what
// gptc-outline-kernels builds from a gptc.kernel), stage by stage: a bf16
// residual chain fused into one loop nest, one launch of 512 blocks of 256
// threads, f32 arithmetic between bf16 loads and stores.
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline{format=none})' | FileCheck %s --check-prefix=NVVM
// The PTX of the same kernel: kernel-lowering-ptx.mlir (it needs the CUDA
// toolkit, which MLIR's NVPTX serialization looks for).

func.func @k(%a: tensor<8x64x256xbf16>, %b: tensor<8x64x256xbf16>, %c: tensor<8x64x256xbf16>) -> tensor<8x64x256xbf16> {
  %s = gptc.add %a, %b : tensor<8x64x256xbf16>
  %t = gptc.add %s, %c : tensor<8x64x256xbf16>
  return %t : tensor<8x64x256xbf16>
}

// The host side: the kernel's buffers (inputs, then its result) and one
// launch; nothing else.
// NVVM-LABEL: func.func @k
//  NVVM-SAME: (%[[A:.*]]: memref<8x64x256xbf16>, %[[B:.*]]: memref<8x64x256xbf16>, %[[C:.*]]: memref<8x64x256xbf16>, %[[OUT:.*]]: memref<8x64x256xbf16>)
//   NVVM-DAG: %[[C1:.*]] = arith.constant 1 : index
//   NVVM-DAG: %[[C512:.*]] = arith.constant 512 : index
//   NVVM-DAG: %[[C256:.*]] = arith.constant 256 : index
//       NVVM: gpu.launch_func @gptc_kernels::@k_kernel blocks in (%[[C512]], %[[C1]], %[[C1]]) threads in (%[[C256]], %[[C1]], %[[C1]]) args(%[[A]] : memref<8x64x256xbf16>, %[[B]] : memref<8x64x256xbf16>, %[[C]] : memref<8x64x256xbf16>, %[[OUT]] : memref<8x64x256xbf16>)
//  NVVM-NEXT: return
// The device side: bare pointers (the three inputs noalias and readonly,
// the result noalias: gptc-gpu-kernel-arg-attrs), constants inside, f32
// math.
//       NVVM: gpu.module @gptc_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
//       NVVM: llvm.func @k_kernel(%{{.*}}: !llvm.ptr {llvm.noalias, llvm.readonly}, %{{.*}}: !llvm.ptr {llvm.noalias, llvm.readonly}, %{{.*}}: !llvm.ptr {llvm.noalias, llvm.readonly}, %{{.*}}: !llvm.ptr {llvm.noalias}) attributes {gpu.kernel, gpu.known_block_size = array<i32: 256, 1, 1>, gpu.known_grid_size = array<i32: 512, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>}
//       NVVM: nvvm.read.ptx.sreg.ctaid.x
//       NVVM: nvvm.read.ptx.sreg.tid.x
//       NVVM: llvm.load %{{.*}} : !llvm.ptr -> bf16
//       NVVM: llvm.fpext %{{.*}} : bf16 to f32
//       NVVM: llvm.fadd %{{.*}} : f32
//       NVVM: llvm.fptrunc %{{.*}} : f32 to bf16
//       NVVM: llvm.store %{{.*}} : bf16, !llvm.ptr
//   NVVM-NOT: llvm.func @k_kernel_
