// RUN: gptc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(func.func(gptc-model-stats))'
// RUN: gptc-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(func.func(gptc-model-stats{annotate=true remarks=false}))' \
// RUN:   | FileCheck %s

// One block of width 8, 2 heads, MLP 16, batch 2 x seq 4, vocab 10.
// Parameters (the three norms share one gamma/beta pair): wte 80 + wpe 32
// + ln 16 + q/k/v/o 4 x 72 + fc 144 + proj 136 = 696.
// Forward FLOPs: embed add 64, ln 3 x 512, attention 4*2*4*4*8 + 5*2*2*4*4
// = 1344, projections 4 x (2*8*8*8 + 64) = 4352, residuals 2 x 64, fc
// 2*8*16*8 + 128 = 2176, gelu 1024, proj 2*8*8*16 + 64 = 2112, head
// 2*8*10*8 = 1280, loss 400: 14416.

// expected-remark@+3 {{gptc.model: 696 parameters in 16 tensors; forward 14416 FLOPs for 8 tokens}}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: gptc.forward_flops = 14416 : i64, gptc.num_params = 696 : i64, gptc.tokens = 8 : i64
func.func @forward(
    %wte: tensor<10x8xf32> {gptc.param = "wte"}, %wpe: tensor<4x8xf32> {gptc.param = "wpe"},
    %g1: tensor<8xf32> {gptc.param = "ln_1.weight"}, %b1: tensor<8xf32> {gptc.param = "ln_1.bias"},
    %wq: tensor<8x8xf32> {gptc.param = "q.weight"}, %bq: tensor<8xf32> {gptc.param = "q.bias"},
    %wk: tensor<8x8xf32> {gptc.param = "k.weight"}, %bk: tensor<8xf32> {gptc.param = "k.bias"},
    %wv: tensor<8x8xf32> {gptc.param = "v.weight"}, %bv: tensor<8xf32> {gptc.param = "v.bias"},
    %wo: tensor<8x8xf32> {gptc.param = "o.weight"}, %bo: tensor<8xf32> {gptc.param = "o.bias"},
    %wf: tensor<16x8xf32> {gptc.param = "fc.weight"}, %bf: tensor<16xf32> {gptc.param = "fc.bias"},
    %wp: tensor<8x16xf32> {gptc.param = "proj.weight"}, %bp: tensor<8xf32> {gptc.param = "proj.bias"},
    %tokens: tensor<2x4xi32> {gptc.input = #gptc.input<tokens>}, %labels: tensor<2x4xi32> {gptc.input = #gptc.input<labels>})
    -> tensor<f32> {
  %e = gptc.embedding %tokens, %wte : tensor<2x4xi32>, tensor<10x8xf32> -> tensor<2x4x8xf32>
  %p = gptc.iota dim 1 : tensor<2x4xi32>
  %pe = gptc.embedding %p, %wpe : tensor<2x4xi32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  %x = gptc.add %e, %pe : tensor<2x4x8xf32>
  %n = gptc.layer_norm %x, %g1, %b1 eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %q = gptc.linear %n, %wq, %bq : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %k = gptc.linear %n, %wk, %bk : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %v = gptc.linear %n, %wv, %bv : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %a = gptc.causal_attention %q, %k, %v heads 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %o = gptc.linear %a, %wo, %bo : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %x1 = gptc.add %x, %o : tensor<2x4x8xf32>
  %n2 = gptc.layer_norm %x1, %g1, %b1 eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %f = gptc.linear %n2, %wf, %bf : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
  %g = gptc.gelu %f : tensor<2x4x16xf32>
  %pr = gptc.linear %g, %wp, %bp : tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %x2 = gptc.add %x1, %pr : tensor<2x4x8xf32>
  %nf = gptc.layer_norm %x2, %g1, %b1 eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %logits = gptc.linear %nf, %wte : tensor<2x4x8xf32>, tensor<10x8xf32> -> tensor<2x4x10xf32>
  %loss = gptc.cross_entropy %logits, %labels : tensor<2x4x10xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A function without parameters is not a model: no remark, no attributes.
// CHECK-LABEL: func.func @helper
// CHECK-NOT: gptc.num_params
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = gptc.gelu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
