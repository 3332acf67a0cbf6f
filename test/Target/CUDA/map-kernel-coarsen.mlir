// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-kernel{coarsen-min-elements=4096}))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-kernel))' | FileCheck %s --check-prefix=SMALL
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-kernel{coarsen-min-elements=4096 elements-per-thread=1}))' | FileCheck %s --check-prefix=SMALL

// A large elementwise nest: 8192 iterations, 4 a thread, 2048 apart, in 8
// blocks of 256 threads with no guard. The stride is 1 of dimension 0's
// slices, so iterations 1-3 only add to that index. Every iteration's loads
// come first (the bias's once: the same index), then the arithmetic, then
// the stores.
// CHECK-LABEL: func.func @batch
//       CHECK: %[[C8:.*]] = arith.constant 8 : index
//       CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[C8]]) step
//       CHECK:   %[[C256:.*]] = arith.constant 256 : index
//       CHECK:   scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[C256]]) step
//   CHECK-NOT:     scf.if
//       CHECK:     %[[N:.*]] = arith.addi %{{.*}}, %[[T]]
//       CHECK:     %[[K:.*]] = arith.remui %[[N]]
//       CHECK:     %[[IJ:.*]] = arith.divui %[[N]]
//       CHECK:     %[[J:.*]] = arith.remui %[[IJ]]
//       CHECK:     %[[I:.*]] = arith.divui %[[IJ]]
//       CHECK:     %[[I1:.*]] = arith.addi %[[I]], %c1{{(_[0-9]+)?}} :
//       CHECK:     %[[I2:.*]] = arith.addi %[[I]], %c2{{(_[0-9]+)?}} :
//       CHECK:     %[[I3:.*]] = arith.addi %[[I]], %c3{{(_[0-9]+)?}} :
//       CHECK:     %[[X0:.*]] = memref.load %[[A:.*]][%[[I]], %[[J]], %[[K]]]
//       CHECK:     %[[Y0:.*]] = memref.load %[[BIAS:.*]][%[[K]]]
//       CHECK:     %[[X1:.*]] = memref.load %[[A]][%[[I1]], %[[J]], %[[K]]]
//       CHECK:     memref.load %[[BIAS]][%[[K]]]
//       CHECK:     memref.load %[[A]][%[[I2]], %[[J]], %[[K]]]
//       CHECK:     memref.load %[[BIAS]][%[[K]]]
//       CHECK:     memref.load %[[A]][%[[I3]], %[[J]], %[[K]]]
//       CHECK:     memref.load %[[BIAS]][%[[K]]]
//       CHECK:     %[[S0:.*]] = arith.addf %[[X0]], %[[Y0]]
//       CHECK:     %[[R0:.*]] = arith.truncf %[[S0]]
//       CHECK:     arith.addf %[[X1]]
//       CHECK:     arith.addf
//       CHECK:     arith.addf
//       CHECK:     memref.store %[[R0]], %[[OUT:.*]][%[[I]], %[[J]], %[[K]]]
//       CHECK:     memref.store %{{.*}}, %[[OUT]][%[[I1]], %[[J]], %[[K]]]
//       CHECK:     memref.store %{{.*}}, %[[OUT]][%[[I2]], %[[J]], %[[K]]]
//       CHECK:     memref.store %{{.*}}, %[[OUT]][%[[I3]], %[[J]], %[[K]]]
//       CHECK:   processor = thread_x
// Below the threshold (or one element a thread): a thread per iteration.
// SMALL-LABEL: func.func @batch
//       SMALL: %[[C32:.*]] = arith.constant 32 : index
//       SMALL: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C32]]) step
//       SMALL:     scf.if
//   SMALL-NOT: arith.addf
//       SMALL:       arith.addf
//   SMALL-NOT: arith.addf
//       SMALL: processor = block_x
func.func @batch(%a: memref<4x64x32xf32>, %bias: memref<32xf32>, %out: memref<4x64x32xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c32 = arith.constant 32 : index
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c4, %c64, %c32) step (%c1, %c1, %c1) {
    %x = memref.load %a[%i, %j, %k] : memref<4x64x32xf32>
    %y = memref.load %bias[%k] : memref<32xf32>
    %s = arith.addf %x, %y : f32
    %t = arith.truncf %s : f32 to bf16
    memref.store %t, %out[%i, %j, %k] : memref<4x64x32xbf16>
    scf.reduce
  }
  return
}

// -----

// 3 x 64 x 64 in 12 blocks: the stride (3072) is not a whole number of
// dimension 0's slices (4096), so each iteration's indices come from its
// own linear index.
// CHECK-LABEL: func.func @general
//       CHECK: %[[C12:.*]] = arith.constant 12 : index
//       CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C12]]) step
//       CHECK:     %[[N:.*]] = arith.addi
//       CHECK:     %[[N1:.*]] = arith.addi %[[N]], %c3072
//       CHECK:     arith.remui %[[N1]]
//       CHECK:     %[[N2:.*]] = arith.addi %[[N]], %c6144
//       CHECK:     arith.remui %[[N2]]
//       CHECK:     %[[N3:.*]] = arith.addi %[[N]], %c9216
//       CHECK:     arith.remui %[[N3]]
//  CHECK-COUNT-4:  memref.load
//   CHECK-COUNT-4: arith.mulf
//   CHECK-COUNT-4: memref.store
func.func @general(%a: memref<3x64x64xf32>, %out: memref<3x64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c3, %c64, %c64) step (%c1, %c1, %c1) {
    %x = memref.load %a[%i, %j, %k] : memref<3x64x64xf32>
    %y = arith.mulf %x, %x : f32
    memref.store %y, %out[%i, %j, %k] : memref<3x64x64xf32>
    scf.reduce
  }
  return
}

// -----

// A gather: the table's load needs a loaded id, so it waits with the
// arithmetic; the ids' loads come first.
// CHECK-LABEL: func.func @gather
//  CHECK-COUNT-4: memref.load %{{.*}} : memref<128x32xi32>
//       CHECK:     arith.index_cast
//       CHECK:     memref.load %{{.*}} : memref<1000xf32>
//  CHECK-COUNT-3: memref.load %{{.*}} : memref<1000xf32>
//  CHECK-COUNT-4: memref.store
func.func @gather(%ids: memref<128x32xi32>, %table: memref<1000xf32>, %out: memref<128x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c32 = arith.constant 32 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c128, %c32) step (%c1, %c1) {
    %id = memref.load %ids[%i, %j] : memref<128x32xi32>
    %n = arith.index_cast %id : i32 to index
    %x = memref.load %table[%n] : memref<1000xf32>
    memref.store %x, %out[%i, %j] : memref<128x32xf32>
    scf.reduce
  }
  return
}

// -----

// Not coarsened: a buffer both read and written (its loads cannot all
// run before the stores), a loop in the body, a size that is not a
// multiple of 4 x 256.
// CHECK-LABEL: func.func @inplace
//       CHECK: %[[C32:.*]] = arith.constant 32 : index
//       CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C32]]) step
//       CHECK:     scf.if
func.func @inplace(%a: memref<8192xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 8192 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<8192xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %a[%i] : memref<8192xf32>
    scf.reduce
  }
  return
}

// -----

// CHECK-LABEL: func.func @loop
//       CHECK: %[[C32:.*]] = arith.constant 32 : index
//       CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C32]]) step
//       CHECK:     scf.if
//       CHECK:       scf.for
func.func @loop(%a: memref<8192x4xf32>, %out: memref<8192xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = arith.constant 8192 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %s = scf.for %k = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%i, %k] : memref<8192x4xf32>
      %t = arith.addf %acc, %x : f32
      scf.yield %t : f32
    }
    memref.store %s, %out[%i] : memref<8192xf32>
    scf.reduce
  }
  return
}

// -----

// CHECK-LABEL: func.func @odd
//       CHECK: %[[C36:.*]] = arith.constant 36 : index
//       CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C36]]) step
//       CHECK:     scf.if
func.func @odd(%a: memref<9000xf32>, %out: memref<9000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 9000 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<9000xf32>
    memref.store %x, %out[%i] : memref<9000xf32>
    scf.reduce
  }
  return
}
