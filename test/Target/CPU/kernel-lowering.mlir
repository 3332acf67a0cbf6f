// The CPU target's lowering, stage by stage, on one kernel function (what
// gptc-outline-kernels builds from a gptc.kernel).
// RUN: gptc-opt %s -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1},gptc-kernel-fuse))' | FileCheck %s --check-prefix=FUSE
// RUN: gptc-opt %s -p 'builtin.module(func.func(convert-gptc-to-linalg{full=1},gptc-kernel-fuse,canonicalize,gptc-kernel-abi))' | FileCheck %s --check-prefix=ABI
// RUN: gptc-opt %s -p 'builtin.module(gptc-kernel-lowering-pipeline)' | FileCheck %s --check-prefix=LLVM
// RUN: gptc-opt %s -p 'builtin.module(gptc-kernel-lowering-pipeline)' | gptc-opt | FileCheck %s --check-prefix=LLVM

func.func @k(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = gptc.add %a, %b : tensor<8x64xf32>
  %g = gptc.gelu %s : tensor<8x64xf32>
  %d = gptc.gelu_grad %s, %g : tensor<8x64xf32>
  return %g, %d : tensor<8x64xf32>, tensor<8x64xf32>
}

// Fusion through producers with two users: one loop nest per result, each
// recomputing the sum (and GELU) from the two inputs; nothing else stays.
// FUSE-LABEL: func.func @k
//  FUSE-SAME: (%[[A:.*]]: tensor<8x64xf32>, %[[B:.*]]: tensor<8x64xf32>)
//       FUSE: %[[G:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : {{.*}})
//       FUSE: %[[D:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : {{.*}})
//   FUSE-NOT: linalg.generic
//       FUSE: return %[[G]], %[[D]]

// Destination passing: inputs, then one buffer per result, then the row
// range; the extent of dimension 0 recorded.
// ABI-LABEL: func.func @k
//  ABI-SAME: (%[[A:.*]]: memref<8x64xf32>, %[[B:.*]]: memref<8x64xf32>, %[[G:.*]]: memref<8x64xf32>, %[[D:.*]]: memref<8x64xf32>, %{{.*}}: index, %{{.*}}: index)
//  ABI-SAME: attributes {gptc.extent = 8 : i64}
//       ABI: bufferization.to_tensor %[[A]] restrict
//       ABI: bufferization.to_tensor %[[B]] restrict
//       ABI: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[G]]
//       ABI: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[D]]
//       ABI: return

// The entry point loads the four buffers and calls the body, whose loops
// start at begin and stop at end; no allocation is left.
// LLVM-LABEL: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// LLVM-COUNT-4: llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
//       LLVM: llvm.call @k.body(
//       LLVM: llvm.func internal @k.body(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
//       LLVM: llvm.br ^[[HEAD:.*]](%[[BEGIN]] : i64)
//       LLVM: llvm.icmp "slt" %{{.*}}, %[[END]]
//   LLVM-NOT: malloc
