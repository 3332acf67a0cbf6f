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

// In PTX, for sm_90, the bf16 inputs widened and the result rounded.
// PTX: .target sm_90
// PTX-SAME: cvt.f32.bf16
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: cvt.rn.bf16.f32
