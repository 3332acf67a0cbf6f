// The PTX of kernel-lowering.mlir's kernel (MLIR's NVPTX serialization
// needs the CUDA toolkit's libdevice even for PTX).
// REQUIRES: cuda-toolkit
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline)' | FileCheck %s --check-prefix=PTX
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline{block-size=128 chip=sm_80 features=+ptx70})' | FileCheck %s --check-prefix=SM80

func.func @k(%a: tensor<8x64x256xbf16>, %b: tensor<8x64x256xbf16>, %c: tensor<8x64x256xbf16>) -> tensor<8x64x256xbf16> {
  %s = gptc.add %a, %b : tensor<8x64x256xbf16>
  %t = gptc.add %s, %c : tensor<8x64x256xbf16>
  return %t : tensor<8x64x256xbf16>
}

// In PTX, one entry of four pointers and its known block size (LLVM knows
// the thread ids' range: 32-bit index arithmetic, no guard), 16-bit loads
// through the non-coherent cache (the inputs are noalias and readonly)
// converted to f32 and the sum rounded to bf16 once more (round to nearest
// even) before its store.
// PTX: gpu.binary @gptc_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// PTX-SAME: assembly = "
// PTX-SAME: .version 8.0
// PTX-SAME: .target sm_90
// PTX-SAME: .entry k_kernel(
// PTX-SAME: k_kernel_param_3
// PTX-SAME: .maxntid 256, 1, 1
// PTX-SAME: mov.u32 {{.*}}%tid.x
// PTX-SAME: mov.u32 {{.*}}%ctaid.x
// PTX-NOT: setp
// PTX-SAME: ld.global.nc.b16
// PTX-SAME: cvt.f32.bf16
// PTX-SAME: add.rn.f32
// PTX-SAME: cvt.rn.bf16.f32
// PTX-SAME: st.global.b16

// Another chip and block size.
// SM80-DAG: %[[C1024:.*]] = arith.constant 1024 : index
// SM80-DAG: %[[C128:.*]] = arith.constant 128 : index
// SM80: gpu.launch_func @gptc_kernels::@k_kernel blocks in (%[[C1024]], %{{.*}}) threads in (%[[C128]],
// SM80: chip = "sm_80"
// SM80-SAME: .target sm_80
