// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-kernel))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-kernel{block-size=128}))' | FileCheck %s --check-prefix=B128

// A 2-D nest of 8 x 64 = 512 iterations: 2 blocks of 256 threads; thread
// t of block b runs iteration b * 256 + t, row-major (the column is the
// remainder, so adjacent threads read adjacent elements).
// CHECK-LABEL: func.func @rows
//       CHECK: %[[C2:.*]] = arith.constant 2 : index
//       CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[C2]]) step
//       CHECK:   %[[C256:.*]] = arith.constant 256 : index
//       CHECK:   scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[C256]]) step
//       CHECK:     %[[BASE:.*]] = arith.muli %[[B]], %{{.*}}
//       CHECK:     %[[N:.*]] = arith.addi %[[BASE]], %[[T]]
//       CHECK:     %[[C512:.*]] = arith.constant 512 : index
//       CHECK:     %[[IN:.*]] = arith.cmpi ult, %[[N]], %[[C512]]
//       CHECK:     scf.if %[[IN]]
//       CHECK:       %[[C64:.*]] = arith.constant 64 : index
//       CHECK:       %[[J:.*]] = arith.remui %[[N]], %[[C64]]
//       CHECK:       %[[I:.*]] = arith.divui %[[N]], %[[C64]]
//       CHECK:       %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]]
//       CHECK:       memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
//       CHECK:   } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
//       CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
//   CHECK-NOT: scf.parallel
// B128-LABEL: func.func @rows
//       B128: %[[C4:.*]] = arith.constant 4 : index
//       B128: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C4]])
//       B128:   arith.constant 128 : index
func.func @rows(%a: memref<8x64xf32>, %out: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c64) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<8x64xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %out[%i, %j] : memref<8x64xf32>
    scf.reduce
  }
  return
}

// -----

// Fewer iterations than a block: one block of that many threads. A
// reduction dimension stays a loop inside the thread; an allocation
// between two nests stays on the host side (a temporary).
// CHECK-LABEL: func.func @small
//       CHECK: memref.alloc() : memref<10xf32>
//       CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{(_[0-9]+)?}}) step
//       CHECK:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%c10{{(_[0-9]+)?}}) step
//       CHECK:       scf.for
//       CHECK: processor = block_x
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK: processor = block_x
func.func @small(%a: memref<10x3xf32>, %out: memref<10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c10 = arith.constant 10 : index
  %zero = arith.constant 0.0 : f32
  %tmp = memref.alloc() : memref<10xf32>
  scf.parallel (%i) = (%c0) to (%c10) step (%c1) {
    %s = scf.for %k = %c0 to %c3 step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%i, %k] : memref<10x3xf32>
      %n = arith.addf %acc, %x : f32
      scf.yield %n : f32
    }
    memref.store %s, %tmp[%i] : memref<10xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c10) step (%c1) {
    %x = memref.load %tmp[%i] : memref<10xf32>
    memref.store %x, %out[%i] : memref<10xf32>
    scf.reduce
  }
  return
}

// -----

// Scalar code: a reduction to a scalar and the store after it run in one
// thread of one block; the scalar a later nest reads (loaded from the
// result) is loaded again by each of its threads, and the allocation moves
// to the front.
// CHECK-LABEL: func.func @scalar
//       CHECK: %[[T:.*]] = memref.alloc() : memref<f32>
//       CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%c1{{(_[0-9]+)?}}) step
//       CHECK:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{(_[0-9]+)?}}) step
//       CHECK:     scf.if
//       CHECK:       %[[S:.*]] = scf.for
//       CHECK:       memref.store %[[S]], %[[T]][]
//       CHECK: processor = block_x
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.if
//       CHECK:       %[[X:.*]] = memref.load %arg0
//       CHECK:       %[[L:.*]] = memref.load %[[T]][]
//       CHECK:       arith.mulf %[[X]], %[[L]]
func.func @scalar(%a: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> (f32) {
    %x = memref.load %a[%k] : memref<16xf32>
    %n = arith.addf %acc, %x : f32
    scf.yield %n : f32
  }
  %t = memref.alloc() : memref<f32>
  memref.store %s, %t[] : memref<f32>
  %l = memref.load %t[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    %x = memref.load %a[%i] : memref<16xf32>
    %y = arith.mulf %x, %l : f32
    memref.store %y, %out[%i] : memref<16xf32>
    scf.reduce
  }
  return
}

// -----

// A scalar computation of more than 16 ops (a sum of 16 loaded partials,
// as the gradient norm's) is not recomputed by every thread of the nests
// that read it: one thread stores it to a new scalar temporary, each nest
// loads it. A short one (the partials' first sum, used by the second nest)
// is recomputed there. A use at the top after a nest reads the temporary
// too, in the run of one thread it belongs to.
// CHECK-LABEL: func.func @long_scalar
//       CHECK: %[[SLOT:.*]] = memref.alloc() : memref<f32>
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.if
//   CHECK-COUNT-16: memref.load %arg0[%c
//       CHECK:       math.sqrt
//       CHECK:       memref.store %{{.*}}, %[[SLOT]][]
//       CHECK: processor = block_x
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.if
//   CHECK-NOT:       memref.load %arg0[%c
//       CHECK:       %[[L:.*]] = memref.load %[[SLOT]][]
//       CHECK:       arith.mulf %{{.*}}, %[[L]]
//       CHECK: processor = block_x
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.if
//   CHECK-COUNT-2: memref.load %arg0[%c
//       CHECK:       arith.addf
//   CHECK-NOT:       memref.load %[[SLOT]]
//       CHECK: processor = block_x
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.if
//       CHECK:       %[[E:.*]] = memref.load %[[SLOT]][]
//       CHECK:       memref.store %[[E]], %arg2[]
func.func @long_scalar(%p: memref<16xf32>, %out: memref<16xf32>, %last: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %x0 = memref.load %p[%c0] : memref<16xf32>
  %x1 = memref.load %p[%c1] : memref<16xf32>
  %short = arith.addf %x0, %x1 : f32
  %sum1 = arith.addf %short, %zero : f32
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c10 = arith.constant 10 : index
  %c11 = arith.constant 11 : index
  %c12 = arith.constant 12 : index
  %c13 = arith.constant 13 : index
  %c14 = arith.constant 14 : index
  %c15 = arith.constant 15 : index
  %x2 = memref.load %p[%c2] : memref<16xf32>
  %s2 = arith.addf %sum1, %x2 : f32
  %x3 = memref.load %p[%c3] : memref<16xf32>
  %s3 = arith.addf %s2, %x3 : f32
  %x4 = memref.load %p[%c4] : memref<16xf32>
  %s4 = arith.addf %s3, %x4 : f32
  %x5 = memref.load %p[%c5] : memref<16xf32>
  %s5 = arith.addf %s4, %x5 : f32
  %x6 = memref.load %p[%c6] : memref<16xf32>
  %s6 = arith.addf %s5, %x6 : f32
  %x7 = memref.load %p[%c7] : memref<16xf32>
  %s7 = arith.addf %s6, %x7 : f32
  %x8 = memref.load %p[%c8] : memref<16xf32>
  %s8 = arith.addf %s7, %x8 : f32
  %x9 = memref.load %p[%c9] : memref<16xf32>
  %s9 = arith.addf %s8, %x9 : f32
  %x10 = memref.load %p[%c10] : memref<16xf32>
  %s10 = arith.addf %s9, %x10 : f32
  %x11 = memref.load %p[%c11] : memref<16xf32>
  %s11 = arith.addf %s10, %x11 : f32
  %x12 = memref.load %p[%c12] : memref<16xf32>
  %s12 = arith.addf %s11, %x12 : f32
  %x13 = memref.load %p[%c13] : memref<16xf32>
  %s13 = arith.addf %s12, %x13 : f32
  %x14 = memref.load %p[%c14] : memref<16xf32>
  %s14 = arith.addf %s13, %x14 : f32
  %x15 = memref.load %p[%c15] : memref<16xf32>
  %s15 = arith.addf %s14, %x15 : f32
  %norm = math.sqrt %s15 : f32
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    %x = memref.load %p[%i] : memref<16xf32>
    %y = arith.mulf %x, %norm : f32
    memref.store %y, %out[%i] : memref<16xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    %y = memref.load %out[%i] : memref<16xf32>
    %z = arith.addf %y, %short : f32
    memref.store %z, %out[%i] : memref<16xf32>
    scf.reduce
  }
  memref.store %norm, %last[] : memref<f32>
  return
}
