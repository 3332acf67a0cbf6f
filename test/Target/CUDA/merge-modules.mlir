// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-merge-modules)' | FileCheck %s

// Two launches of one host function: the outliner's two modules hold two
// kernels of one name. Merged, the second is renamed and its launch
// follows it; no other module remains.
// CHECK-LABEL: func.func @k
//       CHECK:   gpu.launch_func @gptc_kernels::@k_kernel blocks
//       CHECK:   gpu.launch_func @gptc_kernels::@[[SECOND:k_kernel_[0-9]+]] blocks
//       CHECK: gpu.module @gptc_kernels
//       CHECK:   gpu.func @k_kernel(
//       CHECK:   gpu.func @[[SECOND]](
//   CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @k(%a: memref<4xf32>, %b: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    gpu.launch_func @k_kernel::@k_kernel blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @k_kernel_0::@k_kernel blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%b : memref<4xf32>)
    return
  }
  gpu.module @k_kernel {
    gpu.func @k_kernel(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @k_kernel_0 {
    gpu.func @k_kernel(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
}
