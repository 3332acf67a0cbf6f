// A large bf16 elementwise kernel (16 x 1024 x 768, above the million
// elements from which a thread takes 4): the PTX loads all four
// iterations' operands (2 bytes each, 6 MiB apart) before the first
// arithmetic, so that 8 loads a thread are in flight, then stores the four
// results; the grid is a quarter of a thread per element's.
// REQUIRES: cuda-toolkit
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline)' | FileCheck %s
// RUN: gptc-opt %s -p 'builtin.module(gptc-gpu-kernel-lowering-pipeline{elements-per-thread=1})' | FileCheck %s --check-prefix=ONE

// CHECK: gpu.launch_func {{ *}}@gptc_kernels::@k_kernel blocks in (%c12288,
// CHECK: assembly = "
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[A:%rd[0-9]+]]];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[B:%rd[0-9]+]]];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[A]]+6291456];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[B]]+6291456];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[A]]+12582912];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[B]]+12582912];
// CHECK-NOT: add.rn
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[A]]+18874368];
// CHECK-SAME: ld.global.nc.b16 {{[^;]*}}[[B]]+18874368];
// CHECK-SAME: add.rn.bf16
// CHECK-SAME: st.global.b16
// CHECK-SAME: st.global.b16 {{[^;]*}}+6291456]
// CHECK-SAME: st.global.b16 {{[^;]*}}+12582912]
// CHECK-SAME: st.global.b16 {{[^;]*}}+18874368]
// ONE: gpu.launch_func {{ *}}@gptc_kernels::@k_kernel blocks in (%c49152,
// ONE-NOT: +6291456]
func.func @k(%a: tensor<16x1024x768xbf16>, %b: tensor<16x1024x768xbf16>) -> tensor<16x1024x768xbf16> {
  %s = gptc.add %a, %b : tensor<16x1024x768xbf16>
  return %s : tensor<16x1024x768xbf16>
}
