// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions{fuse-rows=0}))' | FileCheck %s --check-prefix=OFF
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions{row-registers=0}))' | FileCheck %s --check-prefix=LOOP
// RUN: not gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions{row-lanes=16}))' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-gpu-map-reductions{row-registers=129}))' 2>&1 | FileCheck %s --check-prefix=BAD-REGISTERS

// Row kernels: the run of row ops around a kernel's row reductions as one
// loop nest, a warp per row, already mapped onto blocks and threads.

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A residual sum and the layer norm after it (what bufferization leaves
// of gptc.add + gptc.layer_norm): 20 rows of 300 in 3 blocks of 8 warps.
// Each phase is a loop of the lanes over the row; the mean and the
// variance are registers every lane holds after gpu.subgroup_reduce (the
// variance loop reads the mean's value, not memory); the residual sum is
// written in the first loop; no temporary is left.
// CHECK-LABEL: func.func @add_layer_norm
//   CHECK-NOT: memref.alloc
//       CHECK: scf.parallel (%[[BX:.*]]) = (%{{.*}}) to (%c3{{.*}}) step
//       CHECK:   scf.parallel (%[[TX:.*]]) = (%{{.*}}) to (%c256{{.*}}) step
//       CHECK:     %[[LANE:.*]] = arith.remui %[[TX]], %c32
//       CHECK:     %[[ROW:.*]] = arith.addi
//       CHECK:     arith.cmpi ult, %[[ROW]], %c20
//       CHECK:     %[[S:.*]] = scf.for %{{.*}} = %[[LANE]] to %c300{{.*}} step %c32{{.*}} iter_args
//       CHECK:       arith.addf
//       CHECK:       memref.store %{{.*}}, %arg4
//       CHECK:       arith.addf
//       CHECK:       scf.yield
//       CHECK:     %[[ST:.*]] = gpu.subgroup_reduce add %[[S]] uniform
//       CHECK:     %[[SUM:.*]] = arith.addf %cst{{.*}}, %[[ST]]
//       CHECK:     %[[V:.*]] = scf.for %{{.*}} = %[[LANE]] to %c300{{.*}} step %c32{{.*}} iter_args
//       CHECK:       arith.divf %[[SUM]], %cst
//       CHECK:     %[[VT:.*]] = gpu.subgroup_reduce add %[[V]] uniform
//       CHECK:     %[[VAR:.*]] = arith.addf %cst{{.*}}, %[[VT]]
//       CHECK:     scf.for %{{.*}} = %[[LANE]] to %c300{{.*}} step %c32
//       CHECK:       arith.divf %[[VAR]], %cst
//       CHECK:       math.sqrt
//       CHECK:       memref.store %{{.*}}, %arg5
//   CHECK-NOT:     memref.store
//       CHECK:   } {mapping = [#gpu.loop_dim_map<processor = thread_x
//       CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
//   CHECK-NOT: linalg
//   CHECK-NOT: gpu.launch
// Without fusion: the sum, two launches for the two reductions, then the
// normalization, through two temporaries.
// OFF-LABEL: func.func @add_layer_norm
// OFF-COUNT-2: memref.alloc
// OFF-COUNT-2: gpu.launch
//       OFF: linalg.generic
func.func @add_layer_norm(%a: memref<20x300xf32>, %b: memref<20x300xf32>, %g: memref<300xf32>, %be: memref<300xf32>, %sum: memref<20x300xf32>, %out: memref<20x300xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 300.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#el, #el, #el], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<20x300xf32>, memref<20x300xf32>) outs(%sum : memref<20x300xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  %mean = memref.alloc() : memref<20xf32>
  linalg.fill ins(%zero : f32) outs(%mean : memref<20xf32>)
  linalg.generic {indexing_maps = [#el, #el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<20x300xf32>, memref<20x300xf32>) outs(%mean : memref<20xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %s = arith.addf %x, %y : f32
    %r = arith.addf %s, %acc : f32
    linalg.yield %r : f32
  }
  %var = memref.alloc() : memref<20xf32>
  linalg.fill ins(%zero : f32) outs(%var : memref<20xf32>)
  linalg.generic {indexing_maps = [#el, #el, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b, %mean : memref<20x300xf32>, memref<20x300xf32>, memref<20xf32>) outs(%var : memref<20xf32>) {
  ^bb0(%x: f32, %y: f32, %m: f32, %acc: f32):
    %s = arith.addf %x, %y : f32
    %mu = arith.divf %m, %n : f32
    %d = arith.subf %s, %mu : f32
    %sq = arith.mulf %d, %d : f32
    %r = arith.addf %sq, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el, #el, #row, #row, #col, #col, #el], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %mean, %var, %g, %be : memref<20x300xf32>, memref<20x300xf32>, memref<20xf32>, memref<20xf32>, memref<300xf32>, memref<300xf32>) outs(%out : memref<20x300xf32>) {
  ^bb0(%x: f32, %y: f32, %m: f32, %v: f32, %w: f32, %bi: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %mu = arith.divf %m, %n : f32
    %va = arith.divf %v, %n : f32
    %ve = arith.addf %va, %eps : f32
    %sd = math.sqrt %ve : f32
    %rs = arith.divf %one, %sd : f32
    %d = arith.subf %s, %mu : f32
    %h = arith.mulf %d, %rs : f32
    %sc = arith.mulf %h, %w : f32
    %r = arith.addf %sc, %bi : f32
    linalg.yield %r : f32
  }
  return
}

// BAD: error: 'func.func' op row-lanes must be 1 or 32, got 16
// BAD-REGISTERS: error: 'func.func' op row-registers must be in [0, 128], got 129

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A row of 64 columns, 2 a lane, is held in registers: no loops, each
// input element loaded once for the whole run (the two statistics phases
// and the normalization reuse the loaded values; the mean's phase takes
// the residual sum as the lane stored it), the weight and bias loaded in
// the normalization before its stores.
// CHECK-LABEL: func.func @held_add_layer_norm
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//   CHECK-NOT:     scf.for
// CHECK-COUNT-2:   memref.load %arg0
//   CHECK-NOT:     memref.load %arg0
//       CHECK:     gpu.subgroup_reduce add
//   CHECK-NOT:     memref.load %arg0
//   CHECK-NOT:     memref.load %arg1
//       CHECK:     gpu.subgroup_reduce add
//   CHECK-NOT:     memref.load %arg0
//   CHECK-NOT:     memref.load %arg1
//       CHECK:     memref.load %arg2
//       CHECK:     memref.load %arg3
//       CHECK:     memref.load %arg2
//       CHECK:     memref.load %arg3
//       CHECK:     memref.store %{{.*}}, %arg5
//       CHECK:     memref.store %{{.*}}, %arg5
//   CHECK-NOT:     memref.load
//   CHECK-NOT:     scf.for
//       CHECK:   } {mapping = [#gpu.loop_dim_map<processor = thread_x
// Every phase a loop reading the row again, without registers:
// LOOP-LABEL: func.func @held_add_layer_norm
// LOOP-COUNT-3: scf.for
func.func @held_add_layer_norm(%a: memref<4x64xf32>, %b: memref<4x64xf32>, %g: memref<64xf32>, %be: memref<64xf32>, %sum: memref<4x64xf32>, %out: memref<4x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#el, #el, #el], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<4x64xf32>, memref<4x64xf32>) outs(%sum : memref<4x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  %mean = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%mean : memref<4xf32>)
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sum : memref<4x64xf32>) outs(%mean : memref<4xf32>) {
  ^bb0(%s: f32, %acc: f32):
    %r = arith.addf %s, %acc : f32
    linalg.yield %r : f32
  }
  %var = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%var : memref<4xf32>)
  linalg.generic {indexing_maps = [#el, #el, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b, %mean : memref<4x64xf32>, memref<4x64xf32>, memref<4xf32>) outs(%var : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32, %m: f32, %acc: f32):
    %s = arith.addf %x, %y : f32
    %mu = arith.divf %m, %n : f32
    %d = arith.subf %s, %mu : f32
    %sq = arith.mulf %d, %d : f32
    %r = arith.addf %sq, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el, #row, #row, #col, #col, #el], iterator_types = ["parallel", "parallel"]}
      ins(%sum, %mean, %var, %g, %be : memref<4x64xf32>, memref<4xf32>, memref<4xf32>, memref<64xf32>, memref<64xf32>) outs(%out : memref<4x64xf32>) {
  ^bb0(%s: f32, %m: f32, %v: f32, %w: f32, %bi: f32, %o: f32):
    %mu = arith.divf %m, %n : f32
    %va = arith.divf %v, %n : f32
    %ve = arith.addf %va, %eps : f32
    %sd = math.sqrt %ve : f32
    %rs = arith.divf %one, %sd : f32
    %d = arith.subf %s, %mu : f32
    %h = arith.mulf %d, %rs : f32
    %sc = arith.mulf %h, %w : f32
    %r = arith.addf %sc, %bi : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
#bycol3 = affine_map<(d0, d1, d2) -> (d2)>
// Layer norm's gradient: the column sums (weight and bias gradients) read
// the row statistics, so they follow the nest, which stores those rows'
// statistics from lane 0; the fills of the column results run before it
// (they touch nothing the nest does). Rows are 2 x 8, delinearized.
// CHECK-LABEL: func.func @layer_norm_grad
//       CHECK: %[[MEAN:.*]] = memref.alloc() {{.*}}: memref<2x8xf32>
//       CHECK: linalg.fill ins(%{{.*}}) outs(%arg3 : memref<16xf32>)
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     gpu.subgroup_reduce add
//       CHECK:     scf.for
//       CHECK:       memref.store %{{.*}}, %arg4
//       CHECK:     %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0
//       CHECK:     scf.if %[[FIRST]] {
//       CHECK:       memref.store %{{.*}}, %[[MEAN]][%{{.*}}, %{{.*}}] : memref<2x8xf32>
//       CHECK:   } {mapping = [#gpu.loop_dim_map<processor = thread_x
//       CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
//       CHECK: linalg.generic {{.*}} ins(%arg0, %[[MEAN]] : memref<2x8x16xf32>, memref<2x8xf32>) outs(%arg3 : memref<16xf32>)
func.func @layer_norm_grad(%x: memref<2x8x16xf32>, %dy: memref<2x8x16xf32>, %w: memref<16xf32>, %dw: memref<16xf32>, %dx: memref<2x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %mean = memref.alloc() : memref<2x8xf32>
  linalg.fill ins(%zero : f32) outs(%mean : memref<2x8xf32>)
  linalg.generic {indexing_maps = [#el3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x8x16xf32>) outs(%mean : memref<2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%dw : memref<16xf32>)
  linalg.generic {indexing_maps = [#el3, #row3, #bycol3], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x, %mean : memref<2x8x16xf32>, memref<2x8xf32>) outs(%dw : memref<16xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %r = arith.addf %d, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el3, #el3, #row3, #col3, #el3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %dy, %mean, %w : memref<2x8x16xf32>, memref<2x8x16xf32>, memref<2x8xf32>, memref<16xf32>) outs(%dx : memref<2x8x16xf32>) {
  ^bb0(%in: f32, %g: f32, %m: f32, %ww: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    %p = arith.mulf %d, %g : f32
    %r = arith.mulf %p, %ww : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#scalar3 = affine_map<(d0, d1, d2) -> ()>
#rows2 = affine_map<(d0, d1) -> (d0, d1)>
#none2 = affine_map<(d0, d1) -> ()>
// The loss gradient: the token count (a reduction to a scalar the nest
// reads) runs before the nest; the nest reads the count once per row, not
// in its loops; the row max is a register that never reaches memory.
// CHECK-LABEL: func.func @loss_grad
//   CHECK-NOT: memref<3x4xf32>
//       CHECK: %[[COUNT:.*]] = memref.alloc() : memref<f32>
//       CHECK: gpu.launch
//       CHECK:   gpu.all_reduce add
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     maximumf
//       CHECK:     %[[MAX:.*]] = gpu.subgroup_reduce maximumf
//       CHECK:     %[[N:.*]] = memref.load %[[COUNT]][]
//       CHECK:     scf.for
//       CHECK-NOT:   memref.load %[[COUNT]]
//       CHECK:       arith.divf %{{.*}}, %[[N]]
//       CHECK:       memref.store
//   CHECK-NOT: memref<3x4xf32>
func.func @loss_grad(%logits: memref<3x4x50xf32>, %labels: memref<3x4xi32>, %grad: memref<3x4x50xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %max = memref.alloc() : memref<3x4xf32>
  linalg.fill ins(%ninf : f32) outs(%max : memref<3x4xf32>)
  linalg.generic {indexing_maps = [#el3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%logits : memref<3x4x50xf32>) outs(%max : memref<3x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  }
  %count = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%count : memref<f32>)
  linalg.generic {indexing_maps = [#rows2, #none2], iterator_types = ["reduction", "reduction"]}
      ins(%labels : memref<3x4xi32>) outs(%count : memref<f32>) {
  ^bb0(%in: i32, %acc: f32):
    %r = arith.addf %acc, %one : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el3, #row3, #scalar3, #el3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%logits, %max, %count : memref<3x4x50xf32>, memref<3x4xf32>, memref<f32>) outs(%grad : memref<3x4x50xf32>) {
  ^bb0(%in: f32, %m: f32, %n: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %n : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Online softmax: the sum of exp(x - max) joins the loop of the maximum
// it reads (each lane's running maximum; the sum rescaled by exp(old -
// new) as it grows, 1 while they are equal), so the row is read twice,
// not three times: the maximum and the sums (the picked logit's beside
// them, not rescaled), then the output. After the loop each lane's sum is
// rescaled to the row's maximum before the lanes' sums are added.
// CHECK-LABEL: func.func @softmax_online
//       CHECK: %[[P:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %c100{{.*}} step %c32{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}, %[[X:.*]] = %{{.*}})
//       CHECK:   %[[NEW:.*]] = arith.maximumf %[[M]], %{{.*}}
//       CHECK:   %[[XD:.*]] = arith.subf %{{.*}}, %[[NEW]]
//       CHECK:   %[[XE:.*]] = math.exp %[[XD]]
//       CHECK:   %[[SAME:.*]] = arith.cmpf oeq, %[[M]], %[[NEW]]
//       CHECK:   %[[D:.*]] = arith.subf %[[M]], %[[NEW]]
//       CHECK:   %[[E:.*]] = math.exp %[[D]]
//       CHECK:   %[[R:.*]] = arith.select %[[SAME]], %cst{{.*}}, %[[E]]
//       CHECK:   %[[SR:.*]] = arith.mulf %[[S]], %[[R]]
//       CHECK:   arith.addf %[[SR]], %[[XE]]
//       CHECK:   arith.addf %[[X]], %{{.*}}
//       CHECK:   scf.yield %[[NEW]]
//       CHECK: %[[ROWMAX:.*]] = gpu.subgroup_reduce maximumf %[[P]]#0 uniform
//       CHECK: %[[MAX:.*]] = arith.maximumf %{{.*}}, %[[ROWMAX]]
//       CHECK: arith.cmpf oeq, %[[P]]#0, %[[MAX]]
//       CHECK: arith.subf %[[P]]#0, %[[MAX]]
//       CHECK: %[[LANE:.*]] = arith.mulf %[[P]]#1
//       CHECK: gpu.subgroup_reduce add %[[LANE]] uniform
//       CHECK: gpu.subgroup_reduce add %[[P]]#2 uniform
//       CHECK: scf.for
//       CHECK:   math.exp
//       CHECK:   memref.store
//   CHECK-NOT: scf.for
// LOOP-LABEL: func.func @softmax_online
// LOOP-COUNT-2: scf.for
//   LOOP-NOT: scf.for
func.func @softmax_online(%x: memref<6x100xf32>, %out: memref<6x100xf32>, %sx: memref<6xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %max = memref.alloc() : memref<6xf32>
  linalg.fill ins(%ninf : f32) outs(%max : memref<6xf32>)
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<6x100xf32>) outs(%max : memref<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %acc, %in : f32
    linalg.yield %r : f32
  }
  %sum = memref.alloc() : memref<6xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<6xf32>)
  linalg.fill ins(%zero : f32) outs(%sx : memref<6xf32>)
  linalg.generic {indexing_maps = [#el, #row, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : memref<6x100xf32>, memref<6xf32>) outs(%sum, %sx : memref<6xf32>, memref<6xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32, %acc2: f32):
    %d = arith.subf %in, %m : f32
    %e = math.exp %d : f32
    %r = arith.addf %acc, %e : f32
    %r2 = arith.addf %acc2, %in : f32
    linalg.yield %r, %r2 : f32, f32
  }
  linalg.generic {indexing_maps = [#el, #row, #row, #el], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max, %sum : memref<6x100xf32>, memref<6xf32>, memref<6xf32>) outs(%out : memref<6x100xf32>) {
  ^bb0(%in: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
// A run ends where it would be wrong: the second sum reads the squares the
// first op wrote transposed (another lane's, another row's elements), so
// it is not one of the run's ops; the reduction before it is, with the
// elementwise op writing them.
// With the row held in registers (4 columns a lane), that second sum is a
// sum over the run's rows for each column: the nest computes it too. Its
// 8 warps run 16 rows each; each lane adds the squares of its 4 columns
// as it stored them (no load) into 4 carried partials, stores them at
// [warp, column] of a temporary after its rows, and a column reduction of
// those 8 partials follows the nest.
// CHECK-LABEL: func.func @transposed
//       CHECK: %[[PART:.*]] = memref.alloc() : memref<8x128xf32>
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     %[[SUMS:.*]]:4 = scf.for %{{.*}} = %{{.*}} to %c16{{.*}} iter_args(%[[P0:.*]] = %cst{{.*}}, %[[P1:.*]] = %cst{{.*}}, %[[P2:.*]] = %cst{{.*}}, %[[P3:.*]] = %cst{{.*}})
//       CHECK:       scf.if %{{.*}} -> (f32, f32, f32, f32)
// CHECK-COUNT-4:       memref.load %arg0
//   CHECK-NOT:       memref.load
//       CHECK:       %[[SQ0:.*]] = arith.mulf
//       CHECK:       memref.store %[[SQ0]], %arg1
//   CHECK-NOT:       memref.load
//       CHECK:       gpu.subgroup_reduce
//       CHECK:       memref.store %{{.*}}, %arg2
//       CHECK:       %[[N0:.*]] = arith.addf %[[P0]], %[[SQ0]]
//       CHECK:       scf.yield %[[N0]],
//       CHECK:     } else {
//       CHECK:       scf.yield %[[P0]], %[[P1]], %[[P2]], %[[P3]]
//       CHECK:     memref.store %[[SUMS]]#0, %[[PART]]
//       CHECK:     memref.store %[[SUMS]]#3, %[[PART]]
//       CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[PART]] : memref<8x128xf32>) outs(%arg3 : memref<128xf32>)
//   CHECK-NOT: gpu.launch
// Without registers, the second sum is a launch of its own after the nest;
// in the nest's loop (4 columns an iteration) the loads of the input come
// first, and the sum's load of a square follows the square's store.
// LOOP-LABEL: func.func @transposed
//       LOOP: scf.parallel
//       LOOP:   scf.parallel
//       LOOP:     scf.for
// LOOP-COUNT-4:     memref.load %arg0
//   LOOP-NOT:     memref.load
//       LOOP:     memref.store %{{.*}}, %arg1
//       LOOP:     memref.load %arg1
//       LOOP:     gpu.subgroup_reduce
//       LOOP:     memref.store %{{.*}}, %arg2
//       LOOP: gpu.launch
//       LOOP:   memref.load %arg1[%{{.*}}, %{{.*}}]
//       LOOP:   gpu.subgroup_reduce
func.func @transposed(%x: memref<128x128xf32>, %sq: memref<128x128xf32>, %s1: memref<128xf32>, %s2: memref<128xf32>) {
  linalg.generic {indexing_maps = [#el, #el], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<128x128xf32>) outs(%sq : memref<128x128xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %in : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : memref<128x128xf32>) outs(%s1 : memref<128xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#tr, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : memref<128x128xf32>) outs(%s2 : memref<128xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Scalar code between row ops: a store to a buffer the run does not touch
// stays where it is, before the nest (the fill joined the run); one to a
// buffer the run reads stays after it, and so does the reduction that
// reads what that store wrote (a launch of its own).
// CHECK-LABEL: func.func @scalar_code
//       CHECK: memref.store %{{.*}}, %arg3[]
//       CHECK: scf.parallel
//       CHECK:   gpu.subgroup_reduce
//       CHECK: memref.store %{{.*}}, %arg0[%{{.*}}, %{{.*}}]
//       CHECK: gpu.launch
//       CHECK:   gpu.subgroup_reduce  maximumf
func.func @scalar_code(%x: memref<8x64xf32>, %s1: memref<8xf32>, %s2: memref<8xf32>, %flag: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  linalg.fill ins(%zero : f32) outs(%s1 : memref<8xf32>)
  memref.store %zero, %flag[] : memref<f32>
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%s1 : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  memref.store %zero, %x[%c0, %c0] : memref<8x64xf32>
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%s2 : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A column sum over the run's rows after it, with a fill of its output
// between: the nest adds each lane's 2 columns of the centred rows (as
// stored) times the row sum (its register) over its warp's rows (32 rows:
// 8 warps of 4), in registers; the partials' reduction stays where the
// sum was, after the fill. The row sums never leave registers: nothing
// outside the nest reads them now.
// CHECK-LABEL: func.func @column_sum
//       CHECK: %[[PART:.*]] = memref.alloc() : memref<8x64xf32>
//   CHECK-NOT: memref.alloc
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//       CHECK:     scf.for %{{.*}} = %{{.*}} to %c4{{.*}} iter_args
//       CHECK:       gpu.subgroup_reduce add
//       CHECK:       memref.store %[[Y0:.*]], %arg1
//       CHECK:       memref.store %[[Y1:.*]], %arg1
//   CHECK-NOT:       memref.store
//       CHECK:       %[[T0:.*]] = arith.mulf %[[Y0]], %[[S:.*]] : f32
//       CHECK:       %[[T1:.*]] = arith.mulf %[[Y1]], %[[S]] : f32
//       CHECK:       arith.addf %{{.*}}, %[[T0]]
//       CHECK:       arith.addf %{{.*}}, %[[T1]]
//       CHECK:       scf.yield
//       CHECK:     memref.store %{{.*}}, %[[PART]]
//       CHECK:     memref.store %{{.*}}, %[[PART]]
//       CHECK: linalg.fill ins(%{{.*}}) outs(%arg2 : memref<64xf32>)
//  CHECK-NEXT: linalg.generic {{.*}} ins(%[[PART]] : memref<8x64xf32>) outs(%arg2 : memref<64xf32>)
//   CHECK-NOT: gpu.launch
// Without registers the column sum is a launch of its own, after the
// nest, which then stores the row sums.
// LOOP-LABEL: func.func @column_sum
//       LOOP: memref.alloc() {{.*}}: memref<32xf32>
//       LOOP: scf.for
//       LOOP: gpu.subgroup_reduce add
//       LOOP: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<32xf32>
//       LOOP: linalg.fill ins(%{{.*}}) outs(%arg2 : memref<64xf32>)
//       LOOP: linalg.generic {{.*}} outs(%arg2 : memref<64xf32>)
func.func @column_sum(%x: memref<32x64xf32>, %y: memref<32x64xf32>, %cs: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %s = memref.alloc() : memref<32xf32>
  linalg.fill ins(%zero : f32) outs(%s : memref<32xf32>)
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<32x64xf32>) outs(%s : memref<32xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el, #row, #el], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<32x64xf32>, memref<32xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%in: f32, %sum: f32, %o: f32):
    %m = arith.divf %sum, %n : f32
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  }
  linalg.fill ins(%zero : f32) outs(%cs : memref<64xf32>)
  linalg.generic {indexing_maps = [#el, #row, #col], iterator_types = ["reduction", "parallel"]}
      ins(%y, %s : memref<32x64xf32>, memref<32xf32>) outs(%cs : memref<64xf32>) {
  ^bb0(%in: f32, %sum: f32, %acc: f32):
    %p = arith.mulf %in, %sum : f32
    %r = arith.addf %p, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#el = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// The same, but the column sum also reads a buffer the run does not touch,
// and a store into that buffer comes between (it stays where it is): the
// sum must read it after that store, so it stays a launch of its own
// after the nest (which has no row loop).
// CHECK-LABEL: func.func @column_sum_after_store
//       CHECK: scf.parallel
//       CHECK:   scf.parallel
//   CHECK-NOT:     scf.for
//       CHECK:     gpu.subgroup_reduce add
//       CHECK: memref.store %{{.*}}, %arg3[%{{.*}}, %{{.*}}] : memref<32x64xf32>
//       CHECK: linalg.fill ins(%{{.*}}) outs(%arg2 : memref<64xf32>)
//       CHECK: linalg.generic {{.*}} outs(%arg2 : memref<64xf32>)
func.func @column_sum_after_store(%x: memref<32x64xf32>, %y: memref<32x64xf32>, %cs: memref<64xf32>, %z: memref<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %c0 = arith.constant 0 : index
  %s = memref.alloc() : memref<32xf32>
  linalg.fill ins(%zero : f32) outs(%s : memref<32xf32>)
  linalg.generic {indexing_maps = [#el, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<32x64xf32>) outs(%s : memref<32xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#el, #row, #el], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<32x64xf32>, memref<32xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%in: f32, %sum: f32, %o: f32):
    %m = arith.divf %sum, %n : f32
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  }
  memref.store %zero, %z[%c0, %c0] : memref<32x64xf32>
  linalg.fill ins(%zero : f32) outs(%cs : memref<64xf32>)
  linalg.generic {indexing_maps = [#el, #el, #col], iterator_types = ["reduction", "parallel"]}
      ins(%y, %z : memref<32x64xf32>, memref<32x64xf32>) outs(%cs : memref<64xf32>) {
  ^bb0(%in: f32, %w: f32, %acc: f32):
    %p = arith.mulf %in, %w : f32
    %r = arith.addf %p, %acc : f32
    linalg.yield %r : f32
  }
  return
}
