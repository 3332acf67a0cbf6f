// RUN: gptc-opt %s --allow-unregistered-dialect -p 'builtin.module(gpu.module(gptc-gpu-kernel-arg-attrs))' | FileCheck %s

// Every buffer of a kernel is noalias (the kernel ABI: results and
// temporaries are buffers of their own, operands only read); those the
// kernel never writes, directly or through a view, are readonly too.
// Scalars are left alone, and so is a function that is not a kernel.
// CHECK-LABEL: gpu.func @k(
// CHECK-SAME: %arg0: memref<4x8xf32> {llvm.noalias, llvm.readonly},
// CHECK-SAME: %arg1: memref<32xf32> {llvm.noalias},
// CHECK-SAME: %arg2: memref<32xf32> {llvm.noalias},
// CHECK-SAME: %arg3: memref<32xi32> {llvm.noalias},
// CHECK-SAME: %arg4: memref<32xf32> {llvm.noalias, llvm.readonly},
// CHECK-SAME: %arg5: index)
// CHECK-SAME: kernel
// CHECK-LABEL: gpu.func @helper(
// CHECK-SAME: %arg0: memref<32xf32>)
// A barrier orders the block's accesses; it writes nothing. Shared memory
// (a workgroup attribution) is not an argument.
// CHECK-LABEL: gpu.func @block(
// CHECK-SAME: %arg0: memref<32xf32> {llvm.noalias, llvm.readonly},
// CHECK-SAME: %arg1: memref<32xf32> {llvm.noalias})
// CHECK-SAME: workgroup(
// An op of unknown effects: every buffer may be written.
// CHECK-LABEL: gpu.func @opaque(
// CHECK-SAME: %arg0: memref<32xf32> {llvm.noalias},
// CHECK-SAME: %arg1: memref<32xf32> {llvm.noalias})
gpu.module @kernels {
  gpu.func @k(%in: memref<4x8xf32>, %out: memref<32xf32>, %viewed: memref<32xf32>,
              %counts: memref<32xi32>, %reread: memref<32xf32>, %i: index) kernel {
    %c0 = arith.constant 0 : index
    %one = arith.constant 1 : i32
    // Read only, through a view.
    %flat = memref.collapse_shape %in [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    %x = memref.load %flat[%i] : memref<32xf32>
    memref.store %x, %out[%i] : memref<32xf32>
    // Written through a view.
    %sub = memref.subview %viewed[0] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1]>>
    memref.store %x, %sub[%c0] : memref<16xf32, strided<[1]>>
    // Written by an atomic update.
    %old = memref.atomic_rmw addi %one, %counts[%i] : (i32, memref<32xi32>) -> i32
    // Read inside a loop (the loop's effects are its body's).
    scf.for %j = %c0 to %i step %i {
      %y = memref.load %reread[%j] : memref<32xf32>
      memref.store %y, %out[%j] : memref<32xf32>
    }
    gpu.return
  }
  gpu.func @helper(%a: memref<32xf32>) {
    gpu.return
  }
  gpu.func @block(%a: memref<32xf32>, %b: memref<32xf32>) workgroup(%shared: memref<32xf32, 3>) kernel {
    %t = gpu.thread_id x
    %x = memref.load %a[%t] : memref<32xf32>
    memref.store %x, %shared[%t] : memref<32xf32, 3>
    gpu.barrier
    %y = memref.load %shared[%t] : memref<32xf32, 3>
    memref.store %y, %b[%t] : memref<32xf32>
    gpu.return
  }
  gpu.func @opaque(%a: memref<32xf32>, %b: memref<32xf32>) kernel {
    %c0 = arith.constant 0 : index
    %x = memref.load %a[%c0] : memref<32xf32>
    "test.writes_somewhere"() : () -> ()
    gpu.return
  }
}
