// The PTX of row-kernel.mlir's fused residual + layer norm (MLIR's NVPTX
// serialization needs the CUDA toolkit's libdevice even for PTX).
// REQUIRES: cuda-toolkit
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline)' | sed 's/\\0A/\n/g' | FileCheck %s --check-prefix=PTX

func.func @k(%a: tensor<64x768xbf16>, %b: tensor<64x768xbf16>, %g: tensor<768xf32>, %be: tensor<768xf32>) -> tensor<64x768xbf16> {
  %s = gptc.add %a, %b : tensor<64x768xbf16>
  %x = gptc.cast %s : tensor<64x768xbf16> -> tensor<64x768xf32>
  %y = gptc.layer_norm %x, %g, %be eps 1.0e-05 : tensor<64x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<64x768xf32>
  %z = gptc.cast %y : tensor<64x768xf32> -> tensor<64x768xbf16>
  return %z : tensor<64x768xbf16>
}

// In PTX, for sm_90, the bf16 inputs widened and the result rounded. The
// 768-wide row is held in registers (24 columns a lane): the whole kernel
// is straight-line code; the two bf16 inputs are loaded once each (48
// loads a lane, all before the first shuffle), the variance's phase
// reads no memory, and the normalization loads the f32 weight and bias
// (48 loads) before its 24 stores.
// Every input is read through the non-coherent cache (noalias, readonly).
// PTX: .target sm_90
// PTX: .maxntid 256, 1, 1
// PTX-NOT: bra
// PTX-COUNT-48: ld.global.nc.b16
// PTX-NOT: ld.global
// PTX: cvt.f32.bf16
// PTX-NOT: ld.global
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX-NOT: ld.global
// PTX-NOT: bra
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX-NOT: st.global
// PTX-NOT: bra
// PTX-COUNT-48: ld.global.nc.b32
// PTX-NOT: ld.global
// PTX-NOT: bra
// PTX-COUNT-24: st.global.b16
// PTX-NOT: ld.global
// PTX-NOT: bra
// PTX: ret;
