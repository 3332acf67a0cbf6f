// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-fuse-gemm-epilogues))' | FileCheck %s
// The printed gptc.fused_gemm parses back (round trip).
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-fuse-gemm-epilogues))' | gptc-opt --split-input-file | FileCheck %s
// The fused program still verifies and forms its kernels around the calls.
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-fuse-gemm-epilogues,gptc-form-kernels))' | FileCheck %s --check-prefix=KERNELS

// fp32 MLP, forward and backward as gptc-autodiff writes them: the
// up-projection takes its GELU (gelu_aux, yielding the GELU input that the
// gradient reads), the down-projection's input gradient takes gelu_grad
// and the up-projection's bias gradient (dgelu_bgrad), and the
// down-projection's weight gradient takes its bias gradient (bgrad).
// CHECK-LABEL: func.func @mlp_f32
//  CHECK-SAME: (%[[X:[^:]*]]: tensor<8x4x16xf32>, %[[W1:[^:]*]]: tensor<64x16xf32>, %[[B1:[^:]*]]: tensor<64xf32>, %[[W2:[^:]*]]: tensor<16x64xf32>, %[[DY:[^:]*]]: tensor<32x16xf32>
//       CHECK: %[[UP:.*]]:2 = gptc.fused_gemm gelu_aux(%[[X]], %[[W1]], %[[B1]])
//       CHECK:   %[[H:.*]] = gptc.linear
//       CHECK:   %[[A:.*]] = gptc.gelu %[[H]]
//       CHECK:   gptc.yield %[[A]], %[[H]]
//       CHECK: %[[A2:.*]] = gptc.reshape %[[UP]]#0
//       CHECK: %[[DW2:.*]]:2 = gptc.fused_gemm bgrad(%[[DY]], %[[A2]])
//       CHECK:   gptc.matmul %{{.*}}, %{{.*}} transpose_lhs
//       CHECK:   gptc.reduce_sum %{{.*}} [0]
//       CHECK: %[[DH:.*]]:2 = gptc.fused_gemm dgelu_bgrad(%[[DY]], %[[W2]], %[[UP]]#1)
//       CHECK:   %[[G:.*]] = gptc.matmul
//       CHECK:   %[[G3:.*]] = gptc.reshape %[[G]]
//       CHECK:   %[[D:.*]] = gptc.gelu_grad %{{.*}}, %[[G3]]
//       CHECK:   %[[D2:.*]] = gptc.reshape %[[D]]
//       CHECK:   %[[S:.*]] = gptc.reduce_sum %[[D2]] [0]
//       CHECK:   gptc.yield %[[D]], %[[S]]
//   CHECK-NOT: gptc.gelu
//   CHECK-NOT: gptc.reduce_sum
//       CHECK: return %[[UP]]#0, %[[DW2]]#0, %[[DW2]]#1, %[[DH]]#0, %[[DH]]#1
// KERNELS-LABEL: func.func @mlp_f32
//   KERNELS-NOT: gptc.kernel
func.func @mlp_f32(%x: tensor<8x4x16xf32>, %w1: tensor<64x16xf32>, %b1: tensor<64xf32>, %w2: tensor<16x64xf32>, %dy: tensor<32x16xf32>)
    -> (tensor<8x4x64xf32>, tensor<16x64xf32>, tensor<16xf32>, tensor<8x4x64xf32>, tensor<64xf32>) {
  %h = gptc.linear %x, %w1, %b1 : tensor<8x4x16xf32>, tensor<64x16xf32>, tensor<64xf32> -> tensor<8x4x64xf32>
  %a = gptc.gelu %h : tensor<8x4x64xf32>
  %a2 = gptc.reshape %a : tensor<8x4x64xf32> -> tensor<32x64xf32>
  %dw2 = gptc.matmul %dy, %a2 transpose_lhs : tensor<32x16xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
  %db2 = gptc.reduce_sum %dy [0] : tensor<32x16xf32> -> tensor<16xf32>
  %g = gptc.matmul %dy, %w2 : tensor<32x16xf32>, tensor<16x64xf32> -> tensor<32x64xf32>
  %g3 = gptc.reshape %g : tensor<32x64xf32> -> tensor<8x4x64xf32>
  %dh = gptc.gelu_grad %h, %g3 : tensor<8x4x64xf32>
  %dh2 = gptc.reshape %dh : tensor<8x4x64xf32> -> tensor<32x64xf32>
  %db1 = gptc.reduce_sum %dh2 [0] : tensor<32x64xf32> -> tensor<64xf32>
  return %a, %dw2, %db2, %dh, %db1 : tensor<8x4x64xf32>, tensor<16x64xf32>, tensor<16xf32>, tensor<8x4x64xf32>, tensor<64xf32>
}

// -----

// Under mixed precision the GELU runs in f32 between exact casts: the
// casts go into the regions, and the GELU input the backward pass reads
// is the product's bf16 result (the unfused program kept an f32 copy).
// The widening of it that the backward pass read is gone with it.
// CHECK-LABEL: func.func @mlp_bf16
//       CHECK: %[[UP:.*]]:2 = gptc.fused_gemm gelu_aux
//  CHECK-SAME: -> (tensor<32x64xbf16>, tensor<32x64xbf16>)
//       CHECK:   %[[H:.*]] = gptc.linear
//       CHECK:   %[[HW:.*]] = gptc.cast %[[H]] : tensor<32x64xbf16> -> tensor<32x64xf32>
//       CHECK:   %[[A:.*]] = gptc.gelu %[[HW]]
//       CHECK:   %[[AN:.*]] = gptc.cast %[[A]] : tensor<32x64xf32> -> tensor<32x64xbf16>
//       CHECK:   gptc.yield %[[AN]], %[[H]]
//       CHECK: %[[DH:.*]] = gptc.fused_gemm dgelu(%{{.*}}, %{{.*}}, %[[UP]]#1)
//       CHECK:   %[[G:.*]] = gptc.matmul
//       CHECK:   %[[PW:.*]] = gptc.cast %{{.*}} : tensor<32x64xbf16> -> tensor<32x64xf32>
//       CHECK:   %[[GW:.*]] = gptc.cast %[[G]] : tensor<32x64xbf16> -> tensor<32x64xf32>
//       CHECK:   %[[D:.*]] = gptc.gelu_grad %[[PW]], %[[GW]]
//       CHECK:   %[[DN:.*]] = gptc.cast %[[D]] : tensor<32x64xf32> -> tensor<32x64xbf16>
//       CHECK:   gptc.yield %[[DN]]
//       CHECK: return %[[UP]]#0, %[[DH]]
// KERNELS-LABEL: func.func @mlp_bf16
//   KERNELS-NOT: gptc.kernel
func.func @mlp_bf16(%x: tensor<32x16xbf16>, %w1: tensor<64x16xbf16>, %b1: tensor<64xbf16>, %w2: tensor<16x64xbf16>, %dy: tensor<32x16xbf16>)
    -> (tensor<32x64xbf16>, tensor<32x64xbf16>) {
  %h = gptc.linear %x, %w1, %b1 : tensor<32x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16> -> tensor<32x64xbf16>
  %hw = gptc.cast %h : tensor<32x64xbf16> -> tensor<32x64xf32>
  %a = gptc.gelu %hw : tensor<32x64xf32>
  %an = gptc.cast %a : tensor<32x64xf32> -> tensor<32x64xbf16>
  %g = gptc.matmul %dy, %w2 : tensor<32x16xbf16>, tensor<16x64xbf16> -> tensor<32x64xbf16>
  %gw = gptc.cast %g : tensor<32x64xbf16> -> tensor<32x64xf32>
  %dh = gptc.gelu_grad %hw, %gw : tensor<32x64xf32>
  %dhn = gptc.cast %dh : tensor<32x64xf32> -> tensor<32x64xbf16>
  return %an, %dhn : tensor<32x64xbf16>, tensor<32x64xbf16>
}

// -----

// Near misses stay as they are: a GELU whose f32 value is read elsewhere
// under mixed precision (the fused op yields only the 16-bit one), a
// product that something else reads as well, a bias sum over the wrong
// dimension (of a weight gradient's lhs) and f64 (the CPU's reference
// path).
// CHECK-LABEL: func.func @near_misses
//   CHECK-NOT: gptc.fused_gemm
// KERNELS-LABEL: func.func @near_misses
//       KERNELS: gptc.kernel
//       CHECK: return
func.func @near_misses(%x: tensor<32x16xbf16>, %w1: tensor<64x16xbf16>, %dy: tensor<32x16xf32>, %w2: tensor<16x64xf32>, %p: tensor<32x64xf32>, %xd: tensor<32x16xf64>, %wd: tensor<64x16xf64>, %x2: tensor<32x64xf32>)
    -> (tensor<32x64xbf16>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf64>, tensor<64x16xf32>, tensor<16xf32>, tensor<32xf32>) {
  %h = gptc.linear %x, %w1 : tensor<32x16xbf16>, tensor<64x16xbf16> -> tensor<32x64xbf16>
  %hw = gptc.cast %h : tensor<32x64xbf16> -> tensor<32x64xf32>
  %a = gptc.gelu %hw : tensor<32x64xf32>
  %an = gptc.cast %a : tensor<32x64xf32> -> tensor<32x64xbf16>
  %g = gptc.matmul %dy, %w2 : tensor<32x16xf32>, tensor<16x64xf32> -> tensor<32x64xf32>
  %d = gptc.gelu_grad %p, %g : tensor<32x64xf32>
  %hd = gptc.linear %xd, %wd : tensor<32x16xf64>, tensor<64x16xf64> -> tensor<32x64xf64>
  %ad = gptc.gelu %hd : tensor<32x64xf64>
  %tw = gptc.matmul %x2, %dy transpose_lhs : tensor<32x64xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
  %s1 = gptc.reduce_sum %dy [0] : tensor<32x16xf32> -> tensor<16xf32>
  %s2 = gptc.reduce_sum %x2 [1] : tensor<32x64xf32> -> tensor<32xf32>
  return %an, %a, %g, %d, %ad, %tw, %s1, %s2 : tensor<32x64xbf16>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf64>, tensor<64x16xf32>, tensor<16xf32>, tensor<32xf32>
}

// -----

// The exact GELU stays outside: cuBLASLt's GELU epilogues (and the CPU's
// fused ones, which compute what they do) are the tanh approximation.
// CHECK-LABEL: func.func @mlp_exact
//   CHECK-NOT: gelu_aux
//   CHECK-NOT: dgelu
//       CHECK: gptc.gelu %{{.*}} exact
//       CHECK: gptc.gelu_grad %{{.*}}, %{{.*}} exact
func.func @mlp_exact(%x: tensor<8x4x16xf32>, %w1: tensor<64x16xf32>, %b1: tensor<64xf32>, %w2: tensor<16x64xf32>, %dy: tensor<32x16xf32>)
    -> (tensor<8x4x64xf32>, tensor<8x4x64xf32>) {
  %h = gptc.linear %x, %w1, %b1 : tensor<8x4x16xf32>, tensor<64x16xf32>, tensor<64xf32> -> tensor<8x4x64xf32>
  %a = gptc.gelu %h exact : tensor<8x4x64xf32>
  %g = gptc.matmul %dy, %w2 : tensor<32x16xf32>, tensor<16x64xf32> -> tensor<32x64xf32>
  %g3 = gptc.reshape %g : tensor<32x64xf32> -> tensor<8x4x64xf32>
  %dh = gptc.gelu_grad %h, %g3 exact : tensor<8x4x64xf32>
  return %a, %dh : tensor<8x4x64xf32>, tensor<8x4x64xf32>
}
