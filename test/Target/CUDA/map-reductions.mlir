// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions))' | FileCheck %s
// RUN: not gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions{warps-per-block=64}))' 2>&1 | FileCheck %s --check-prefix=BAD

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// A row sum of squares over 20 rows of 300: a warp per row, 8 rows per
// block, so 3 blocks of 256 threads; lanes stride the row by 32, the warp
// combines with gpu.subgroup_reduce, lane 0 adds into the output.
// CHECK-LABEL: func.func @rows
//       CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c3{{(_[0-9]+)?}}, %{{.*}} = %c1{{(_[0-9]+)?}}, %{{.*}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{(_[0-9]+)?}},
//       CHECK:   %[[WARP:.*]] = arith.divui %[[TX]], %c32
//       CHECK:   %[[LANE:.*]] = arith.remui %[[TX]], %c32
//       CHECK:   %[[ROW:.*]] = arith.addi %{{.*}}, %[[WARP]]
//       CHECK:   arith.cmpi ult, %[[ROW]], %c20
//       CHECK:   scf.if
//       CHECK:     %[[P:.*]] = scf.for %[[K:.*]] = %[[LANE]] to %c300{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args(%[[ACC:.*]] = %cst
//       CHECK:       %[[X:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}]
//       CHECK:       %[[SQ:.*]] = arith.mulf %[[X]], %[[X]]
//       CHECK:       %[[N:.*]] = arith.addf %[[ACC]], %[[SQ]]
//       CHECK:       scf.yield %[[N]]
//       CHECK:     %[[T:.*]] = gpu.subgroup_reduce add %[[P]] uniform : (f32) -> f32
//       CHECK:     arith.cmpi eq, %[[LANE]], %c0
//       CHECK:     scf.if
//       CHECK:       %[[OLD:.*]] = memref.load %arg1[%[[ROW]]]
//       CHECK:       %[[NEW:.*]] = arith.addf %[[OLD]], %[[T]]
//       CHECK:       memref.store %[[NEW]], %arg1[%[[ROW]]]
//   CHECK-NOT: linalg.generic
func.func @rows(%x: memref<20x300xf32>, %out: memref<20xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<20x300xf32>) outs(%out : memref<20xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %n = arith.addf %acc, %sq : f32
    linalg.yield %n : f32
  }
  return
}

// BAD: error: 'func.func' op warps-per-block must be in [1, 32], got 64

// -----

#all = affine_map<(d0, d1) -> (d0, d1)>
#none = affine_map<(d0, d1) -> ()>
// A maximum to a scalar: one block of 1024 threads, gpu.all_reduce.
// CHECK-LABEL: func.func @scalar
//       CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c1024{{(_[0-9]+)?}},
//       CHECK:   %[[P:.*]] = scf.for %{{.*}} = %[[TX]] to %c1000 step %c1024
//       CHECK:     arith.maximumf
//       CHECK:   %[[T:.*]] = gpu.all_reduce maximumf %[[P]] uniform {
//       CHECK:   arith.cmpi eq, %[[TX]], %c0
//       CHECK:   memref.load %arg1[]
//       CHECK:   arith.maximumf
//       CHECK:   memref.store
func.func @scalar(%x: memref<10x100xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<10x100xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  }
  return
}

// -----

#all = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
// A body that is not out = op(out, value) stays a linalg op (a thread per
// output element, then).
// CHECK-LABEL: func.func @other
//   CHECK-NOT: gpu.launch
//       CHECK: linalg.generic
func.func @other(%x: memref<16xf32>, %out: memref<f32>) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction"]}
      ins(%x : memref<16xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %bad = arith.cmpf uno, %in, %in : f32
    %s = arith.select %bad, %one, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#cols = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Column sums over 2048 rows (reduction first, as a bias gradient's): the
// loops are interchanged, and the rows cut into 8 chunks of 256 whose
// partial sums a temporary holds (a thread per chunk and column), then a
// thread per column adds its chunks to the output.
// CHECK-LABEL: func.func @columns
//       CHECK: %[[P:.*]] = memref.alloc() : memref<8x16xf32>
//       CHECK: scf.parallel (%[[C:.*]], %[[J:.*]]) = (%{{.*}}, %{{.*}}) to (%c8{{(_[0-9]+)?}}, %c16{{(_[0-9]+)?}})
//       CHECK:   %[[B:.*]] = arith.muli %[[C]], %c256
//       CHECK:   %[[E:.*]] = arith.minui %{{.*}}, %c2048
//       CHECK:   %[[S:.*]] = scf.for %[[R:.*]] = %[[B]] to %[[E]] step %{{.*}} iter_args
//       CHECK:     %[[I0:.*]] = affine.apply #{{.*}}(%[[J]], %[[R]])
//       CHECK:     %[[I1:.*]] = affine.apply #{{.*}}(%[[J]], %[[R]])
//       CHECK:     memref.load %arg0[%[[I0]], %[[I1]]]
//       CHECK:     arith.addf
//       CHECK:   memref.store %[[S]], %[[P]][%[[C]], %[[J]]]
//       CHECK: scf.parallel (%[[J2:.*]]) = (%{{.*}}) to (%c16{{(_[0-9]+)?}})
//       CHECK:   scf.for %[[K:.*]] = %{{.*}} to %c8{{(_[0-9]+)?}}
//       CHECK:     memref.load %[[P]][%[[K]], %[[J2]]]
//       CHECK:   %[[OLD:.*]] = memref.load %arg1[%[[J2]]]
//       CHECK:   memref.store %{{.*}}, %arg1[%[[J2]]]
//   CHECK-NOT: linalg.generic
func.func @columns(%x: memref<2048x16xf32>, %out: memref<16xf32>) {
  linalg.generic {indexing_maps = [#cols, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<2048x16xf32>) outs(%out : memref<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %n = arith.addf %acc, %in : f32
    linalg.yield %n : f32
  }
  return
}
