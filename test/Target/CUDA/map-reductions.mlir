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

// -----

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Two row sums in one nest (layer norm's gradient: dy w and dy w xhat): a
// warp per row reads the inputs once, one loop carries both partials, each
// is reduced over the warp, lane 0 writes both.
// CHECK-LABEL: func.func @two_row_sums
//       CHECK: gpu.launch
//       CHECK:   %[[P:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %c300{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args(%[[A:.*]] = %cst{{(_[0-9]+)?}}, %[[B:.*]] = %cst{{(_[0-9]+)?}})
//       CHECK:     %[[X:.*]] = memref.load %arg0
//       CHECK:     %[[Y:.*]] = memref.load %arg1
//       CHECK:     %[[XY:.*]] = arith.mulf %[[X]], %[[Y]]
//   CHECK-DAG:     %[[NA:.*]] = arith.addf %[[A]], %[[X]]
//   CHECK-DAG:     %[[NB:.*]] = arith.addf %[[B]], %[[XY]]
//       CHECK:     scf.yield %[[NA]], %[[NB]]
//       CHECK:   %[[TA:.*]] = gpu.subgroup_reduce add %[[P]]#0 uniform
//       CHECK:   %[[TB:.*]] = gpu.subgroup_reduce add %[[P]]#1 uniform
//       CHECK:   scf.if
//       CHECK:     memref.store %{{.*}}, %arg2
//       CHECK:     memref.store %{{.*}}, %arg3
//   CHECK-NOT: linalg.generic
func.func @two_row_sums(%x: memref<20x300xf32>, %y: memref<20x300xf32>,
                        %sx: memref<20xf32>, %sxy: memref<20xf32>) {
  linalg.generic {indexing_maps = [#rows, #rows, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %y : memref<20x300xf32>, memref<20x300xf32>) outs(%sx, %sxy : memref<20xf32>, memref<20xf32>) {
  ^bb0(%a: f32, %b: f32, %acc0: f32, %acc1: f32):
    %ab = arith.mulf %a, %b : f32
    %n0 = arith.addf %acc0, %a : f32
    %n1 = arith.addf %acc1, %ab : f32
    linalg.yield %n0, %n1 : f32, f32
  }
  return
}

// -----

#cols = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Two column sums in one nest (layer norm's weight and bias gradients)
// over 1024 rows: cut into 4 chunks, a temporary of partials for each,
// one pass over the rows for both, then both combined per column.
// CHECK-LABEL: func.func @two_column_sums
//       CHECK: %[[P0:.*]] = memref.alloc() : memref<4x16xf32>
//       CHECK: %[[P1:.*]] = memref.alloc() : memref<4x16xf32>
//       CHECK: scf.parallel (%[[C:.*]], %[[J:.*]]) = (%{{.*}}, %{{.*}}) to (%c4{{(_[0-9]+)?}}, %c16{{(_[0-9]+)?}})
//       CHECK:   %[[S:.*]]:2 = scf.for
//       CHECK:   memref.store %[[S]]#0, %[[P0]][%[[C]], %[[J]]]
//       CHECK:   memref.store %[[S]]#1, %[[P1]][%[[C]], %[[J]]]
//       CHECK: scf.parallel (%[[J2:.*]]) = (%{{.*}}) to (%c16{{(_[0-9]+)?}})
//       CHECK:   %[[T:.*]]:2 = scf.for %[[K:.*]] = %{{.*}} to %c4{{(_[0-9]+)?}}
//       CHECK:     memref.load %[[P0]][%[[K]], %[[J2]]]
//       CHECK:     memref.load %[[P1]][%[[K]], %[[J2]]]
//       CHECK:   memref.store %{{.*}}, %arg2[%[[J2]]]
//       CHECK:   memref.store %{{.*}}, %arg3[%[[J2]]]
//   CHECK-NOT: linalg.generic
func.func @two_column_sums(%x: memref<1024x16xf32>, %y: memref<1024x16xf32>,
                           %sx: memref<16xf32>, %sxy: memref<16xf32>) {
  linalg.generic {indexing_maps = [#cols, #cols, #col, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %y : memref<1024x16xf32>, memref<1024x16xf32>) outs(%sx, %sxy : memref<16xf32>, memref<16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc0: f32, %acc1: f32):
    %ab = arith.mulf %a, %b : f32
    %n0 = arith.addf %acc0, %a : f32
    %n1 = arith.addf %acc1, %ab : f32
    linalg.yield %n0, %n1 : f32, f32
  }
  return
}

// -----

#all = affine_map<(d0, d1) -> (d0, d1)>
#none = affine_map<(d0, d1) -> ()>
// A sum of squares in f64 over 1024 x 1024 elements (a gradient norm's
// term): one block alone keeps too few loads in flight, so the elements
// are first combined into 65536 strided partials (a thread each after
// gptc-gpu-map-kernel; neighbouring threads read neighbouring elements),
// those into 4096 the same way, and one block of 1024 threads reduces the
// last and adds into the output. Deterministic: the split is fixed.
// CHECK-LABEL: func.func @scalar_split
//       CHECK: %[[P1:.*]] = memref.alloc() : memref<65536xf64>
//       CHECK: scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%c65536{{(_[0-9]+)?}})
//       CHECK:   %[[S:.*]] = scf.for %{{.*}} = %[[K]] to %c1048576 step %c65536{{(_[0-9]+)?}} iter_args
//       CHECK:     memref.load %arg0
//       CHECK:     arith.extf
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//       CHECK:   memref.store %[[S]], %[[P1]][%[[K]]]
//       CHECK: %[[P2:.*]] = memref.alloc() : memref<4096xf64>
//       CHECK: scf.parallel (%[[K2:.*]]) = (%{{.*}}) to (%c4096{{(_[0-9]+)?}})
//       CHECK:   scf.for %{{.*}} = %[[K2]] to %c65536{{(_[0-9]+)?}} step %c4096{{(_[0-9]+)?}} iter_args
//       CHECK:     memref.load %[[P1]]
//       CHECK:   memref.store %{{.*}}, %[[P2]][%[[K2]]]
//       CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c1024{{(_[0-9]+)?}},
//       CHECK:   scf.for %{{.*}} = %[[TX]] to %c4096{{(_[0-9]+)?}} step %c1024
//       CHECK:     memref.load %[[P2]]
//       CHECK:   gpu.all_reduce add
//       CHECK:   memref.load %arg1[]
//       CHECK:   memref.store %{{.*}}, %arg1[]
//   CHECK-NOT: linalg.generic
func.func @scalar_split(%x: memref<1024x1024xf32>, %out: memref<f64>) {
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<1024x1024xf32>) outs(%out : memref<f64>) {
  ^bb0(%in: f32, %acc: f64):
    %e = arith.extf %in : f32 to f64
    %sq = arith.mulf %e, %e : f64
    %n = arith.addf %acc, %sq : f64
    linalg.yield %n : f64
  }
  return
}

// -----

#all = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
// Just below the split (65535 elements): one block.
// CHECK-LABEL: func.func @scalar_unsplit
//   CHECK-NOT: memref.alloc
//       CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024
func.func @scalar_unsplit(%x: memref<65535xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction"]}
      ins(%x : memref<65535xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %n = arith.addf %acc, %in : f32
    linalg.yield %n : f32
  }
  return
}
