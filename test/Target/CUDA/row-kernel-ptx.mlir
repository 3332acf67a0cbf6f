// The PTX of row-kernel.mlir's fused residual + layer norm (MLIR's NVPTX
// serialization needs the CUDA toolkit's libdevice even for PTX).
// REQUIRES: cuda-toolkit
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline)' | FileCheck %s --check-prefix=PTX

func.func @k(%a: tensor<64x768xbf16>, %b: tensor<64x768xbf16>, %g: tensor<768xf32>, %be: tensor<768xf32>) -> tensor<64x768xbf16> {
  %s = gptc.add %a, %b : tensor<64x768xbf16>
  %x = gptc.cast %s : tensor<64x768xbf16> -> tensor<64x768xf32>
  %y = gptc.layer_norm %x, %g, %be eps 1.0e-05 : tensor<64x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<64x768xf32>
  %z = gptc.cast %y : tensor<64x768xf32> -> tensor<64x768xbf16>
  return %z : tensor<64x768xbf16>
}

// In PTX, for sm_90, the bf16 inputs widened and the result rounded. The
// statistics' phases are straight-line code (24 columns a lane, the loop
// unrolled: all loads can be in flight), each ending in five shuffles;
// the normalization takes 4 columns an iteration, their 16 loads (two
// bf16 inputs, the f32 weight and bias) before the first store.
// PTX: .target sm_90
// PTX-SAME: .maxntid 256, 1, 1
// PTX-NOT: bra
// PTX-SAME: cvt.f32.bf16
// PTX-SAME: ld.global.b16 {{[^;]*}}+640]
// PTX-NOT: bra
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-NOT: bra
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: $L__BB0_1:
// PTX-NOT: st.global
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: ld.global.b16
// PTX-SAME: cvt.rn.bf16.f32
// PTX-SAME: st.global.b16
// PTX-SAME: bra
