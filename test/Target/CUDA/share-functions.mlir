// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-share-functions)' -allow-unregistered-dialect | FileCheck %s

// Three launches of two bodies: @scale_1 is @scale_0's body under another
// name and goes; its launch launches @scale_0. @scale_2 multiplies by
// another constant, @wide has another type and @bounded another known
// block size: each is code of its own. @called is named by an op other
// than a launch and stays even though it equals @scale_0.
// CHECK-LABEL: func.func @step
//       CHECK:   gpu.launch_func @gptc_kernels::@scale_0 blocks
//  CHECK-SAME:     args(%arg0
//       CHECK:   gpu.launch_func @gptc_kernels::@scale_0 blocks
//  CHECK-SAME:     args(%arg1
//       CHECK:   gpu.launch_func @gptc_kernels::@scale_2 blocks
//       CHECK:   gpu.launch_func @gptc_kernels::@wide blocks
//       CHECK:   gpu.launch_func @gptc_kernels::@bounded blocks
//       CHECK: gpu.module @gptc_kernels
//       CHECK:   gpu.func @scale_0(
//   CHECK-NOT:   gpu.func @scale_1(
//       CHECK:   gpu.func @scale_2(
//       CHECK:   gpu.func @wide(
//       CHECK:   gpu.func @bounded(
//       CHECK:   gpu.func @called(

module attributes {gpu.container_module} {
  func.func @step(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<8xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    gpu.launch_func @gptc_kernels::@scale_0 blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @gptc_kernels::@scale_1 blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%b : memref<4xf32>)
    gpu.launch_func @gptc_kernels::@scale_2 blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @gptc_kernels::@wide blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%c : memref<8xf32>)
    gpu.launch_func @gptc_kernels::@bounded blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%a : memref<4xf32>)
    "test.names"() {kernel = @gptc_kernels::@called} : () -> ()
    return
  }
  gpu.module @gptc_kernels {
    gpu.func @scale_0(%x: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<4xf32>
      %two = arith.constant 2.0 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %x[%t] : memref<4xf32>
      gpu.return
    }
    gpu.func @scale_1(%y: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %y[%t] : memref<4xf32>
      %two = arith.constant 2.0 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %y[%t] : memref<4xf32>
      gpu.return
    }
    gpu.func @scale_2(%x: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<4xf32>
      %three = arith.constant 3.0 : f32
      %r = arith.mulf %v, %three : f32
      memref.store %r, %x[%t] : memref<4xf32>
      gpu.return
    }
    gpu.func @wide(%x: memref<8xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<8xf32>
      %two = arith.constant 2.0 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %x[%t] : memref<8xf32>
      gpu.return
    }
    gpu.func @bounded(%x: memref<4xf32>) kernel attributes {known_block_size = array<i32: 4, 1, 1>} {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<4xf32>
      %two = arith.constant 2.0 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %x[%t] : memref<4xf32>
      gpu.return
    }
    gpu.func @called(%x: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<4xf32>
      %two = arith.constant 2.0 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %x[%t] : memref<4xf32>
      gpu.return
    }
  }
}
