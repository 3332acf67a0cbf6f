// RUN: gptc-opt %s -split-input-file -verify-diagnostics -p 'builtin.module(gptc-gpu-emulate-on-host)' | FileCheck %s

// A kernel reading its thread index, shuffling a float with its
// validity, synchronizing through shared memory and calling libdevice,
// and its launch. The device code moves into the host module under
// __emu_<module>_ names (libdevice's keeps its own), shared memory loses
// its address space, and the launch passes CUDA's parameter array to the
// kernel's thunk.

// CHECK-NOT: gpu.container_module
// CHECK-LABEL: func.func private @gptc_emu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i32)
// CHECK-LABEL: llvm.func @gptc_emu_barrier0()
// CHECK-LABEL: llvm.func @gptc_emu_shfl(i32, i32, i32, i32, i32) -> i64
// CHECK-LABEL: llvm.func @gptc_emu_sreg(i32) -> i32
// CHECK-LABEL: func.func @host(
// CHECK-SAME:      %[[BUF:.*]]: memref<64xf32>
// CHECK:         %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK:         %[[I64:.*]] = arith.index_cast %[[ADDR]] : index to i64
// CHECK:         %[[PTR:.*]] = llvm.inttoptr %[[I64]] : i64 to !llvm.ptr
// CHECK:         %[[CELL:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK:         llvm.store %[[PTR]], %[[CELL]]
// CHECK:         %[[N:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK:         %[[CELL2:.*]] = llvm.alloca %{{.*}} x i64
// CHECK:         llvm.store %[[N]], %[[CELL2]]
// CHECK:         %[[PARAMS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK:         %[[THUNK:.*]] = llvm.mlir.addressof @__emu_kernels_k_thunk
// The kernel shuffles and synchronizes: its threads run as fibers.
// CHECK:         %[[SYNC:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         call @gptc_emu_launch(%[[THUNK]], {{.*}}, %[[PARAMS]], %[[SYNC]])
// CHECK-NOT:     gpu.launch_func
// CHECK:       llvm.mlir.global internal @__emu_kernels_shared() {addr_space = 0 : i32}
// CHECK:       llvm.func @__nv_expf(f32) -> f32
// CHECK-LABEL: llvm.func @__emu_kernels_k(
// CHECK-SAME:      %[[A:.*]]: !llvm.ptr {llvm.noalias}, %{{.*}}: i64)
// CHECK-NOT:       nvvm.kernel
// CHECK:         %[[TID:.*]] = llvm.call @gptc_emu_sreg(%{{.*}}) : (i32) -> i32
// CHECK:         %[[BITS:.*]] = llvm.bitcast %{{.*}} : f32 to i32
// CHECK:         %[[PACKED:.*]] = llvm.call @gptc_emu_shfl(%{{.*}}, %{{.*}}, %[[BITS]], %{{.*}}, %{{.*}})
// CHECK:         %[[LOW:.*]] = llvm.trunc %[[PACKED]] : i64 to i32
// CHECK:         %[[VALUE:.*]] = llvm.bitcast %[[LOW]] : i32 to f32
// CHECK:         %[[HIGH:.*]] = llvm.lshr %[[PACKED]]
// CHECK:         %[[VALID:.*]] = llvm.trunc %[[HIGH]] : i64 to i1
// CHECK:         llvm.insertvalue %[[VALUE]]
// CHECK:         llvm.insertvalue %[[VALID]]
// CHECK:         %[[SHARED:.*]] = llvm.mlir.addressof @__emu_kernels_shared : !llvm.ptr
// CHECK-NOT:     addrspacecast
// CHECK:         llvm.store %{{.*}}, %[[SHARED]]
// CHECK:         llvm.call @gptc_emu_barrier0()
// CHECK:         llvm.call @__nv_expf
// CHECK-LABEL: llvm.func @__emu_kernels_k_thunk(
// CHECK-SAME:      %[[P:.*]]: !llvm.ptr)
// CHECK:         %[[S0:.*]] = llvm.getelementptr %[[P]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[A0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[V0:.*]] = llvm.load %[[A0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[A1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[V1:.*]] = llvm.load %[[A1]] : !llvm.ptr -> i64
// CHECK:         llvm.call @__emu_kernels_k(%[[V0]], %[[V1]])
// CHECK-NOT:   gpu.module
module attributes {gpu.container_module} {
  func.func @host(%buf: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    gpu.launch_func @kernels::@k blocks in (%c2, %c1, %c1) threads in (%c32, %c1, %c1) args(%buf : memref<64xf32>, %c2 : index)
    return
  }
  gpu.module @kernels {
    llvm.mlir.global internal @shared() {addr_space = 3 : i32} : !llvm.array<32 x f32>
    llvm.func @__nv_expf(f32) -> f32
    llvm.func @k(%a: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %mask = llvm.mlir.constant(-1 : i32) : i32
      %one = llvm.mlir.constant(1 : i32) : i32
      %clamp = llvm.mlir.constant(31 : i32) : i32
      %p = llvm.getelementptr %a[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %x = llvm.load %p : !llvm.ptr -> f32
      %s = nvvm.shfl.sync bfly %mask, %x, %one, %clamp {return_value_and_is_valid} : f32 -> !llvm.struct<(f32, i1)>
      %y = llvm.extractvalue %s[0] : !llvm.struct<(f32, i1)>
      %shared = llvm.mlir.addressof @shared : !llvm.ptr<3>
      %generic = llvm.addrspacecast %shared : !llvm.ptr<3> to !llvm.ptr
      llvm.store %y, %generic : f32, !llvm.ptr
      nvvm.barrier0
      %z = llvm.load %generic : !llvm.ptr -> f32
      %e = llvm.call @__nv_expf(%z) : (f32) -> f32
      llvm.store %e, %p : f32, !llvm.ptr
      llvm.return
    }
  }
}

// -----

// An NVVM operation the emulation does not know is an error, not a
// silent omission.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.func @k(%a: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      // expected-error @below {{has no host emulation (gptc-gpu-emulate-on-host knows NVVM's special registers, barrier0 and shfl.sync)}}
      %c = nvvm.read.ptx.sreg.clock : i32
      llvm.store %c, %a : i32, !llvm.ptr
      llvm.return
    }
  }
}

// -----

// A launch whose arguments are not the kernel's bare pointers.
module attributes {gpu.container_module} {
  func.func @host(%buf: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    // expected-error @below {{passes 'memref<64xf32>' where the kernel takes 'i64'}}
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%buf : memref<64xf32>)
    return
  }
  gpu.module @kernels {
    llvm.func @k(%a: i64) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}
