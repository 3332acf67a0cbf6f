// gptc-context-parallel's ring attention (the default): on the importer's
// graph of a 2-layer model over 4 context-parallel ranks, sequence 16
// (chunks of 2 tokens, rank r holding chunks r and 7 - r), each layer's
// attention is 4 steps. Step 0 attends the rank's own keys and values;
// before each step the next block is passed on (shard.shift by one along
// the context axis, with its positions), and each step's output and
// log-sum-exp are merged into the running ones (online softmax).
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=4 --emit=mlir -o %t.mlir
// RUN: gptc-opt %t.mlir --gptc-context-parallel | FileCheck %s
// The backward on cp=2: each block's gradient from the merges' gradients,
// the passed blocks' key and value gradients shifted back (offset -1) to
// the rank they came from and added to its own block's.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --emit=mlir -o %t.cp2.mlir
// RUN: gptc-opt %t.cp2.mlir --gptc-context-parallel --gptc-autodiff --canonicalize | FileCheck %s --check-prefix=GRAD
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --emit=comm | FileCheck %s --check-prefix=COMM
// With a tensor axis: each rank passes the keys and values of its heads
// around the context axis (grid axis 1).
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh tp=2,cp=2 --emit=mlir -o %t.tp.mlir
// RUN: gptc-opt %t.tp.mlir --gptc-sharding-propagation --gptc-tensor-parallel --gptc-context-parallel | FileCheck %s --check-prefix=TP
// Mixed precision: each step takes bf16 queries, keys and values and gives
// fp32 outputs and log-sum-exps, which the merges accumulate in fp32; its
// gradient gives bf16 gradients of its bf16 operands.
// RUN: gptc %S/../../Parallel/Inputs/tiny-bf16.pbtxt --mesh cp=2 --emit=train | FileCheck %s --check-prefix=BF16
// The mode is the description's (parallel.context_attention) or the
// command line's, and it shows in the module's attribute.
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --context-attention=all-gather --emit=mlir | FileCheck %s --check-prefix=ATTR
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --context-attention=all-gather --emit=summary | FileCheck %s --check-prefix=SUMMARY-AG
// RUN: gptc %S/../../Parallel/Inputs/tiny-dp.pbtxt --mesh cp=2 --emit=summary | FileCheck %s --check-prefix=SUMMARY

// CHECK-LABEL: func.func @forward
// CHECK: %[[IOTA:.*]] = gptc.iota dim 0 : tensor<16xi32>
// CHECK: %[[POS:.*]] = shard.all_slice {{.*}} slice_axis = 0 : tensor<16xi32> -> tensor<4xi32>
// CHECK: %[[Q:.*]] = gptc.linear {{.*}} -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[K:.*]] = gptc.linear {{.*}} -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[V:.*]] = gptc.linear {{.*}} -> tensor<8x4x32xf32>
// Step 0 (the next block passed first).
// CHECK-NEXT: %[[K1:.*]] = shard.shift %[[K]] on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<8x4x32xf32> -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[V1:.*]] = shard.shift %[[V]] on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate
// CHECK-NEXT: %[[P1:.*]] = shard.shift %[[POS]] on @mesh grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<4xi32> -> tensor<4xi32>
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = gptc.attention_block %[[Q]], %[[K]], %[[V]] at %[[POS]], %[[POS]] heads 4 : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<8x4x32xf32>, tensor<8x4x4xf32>
// Step 1: the previous rank's block.
// CHECK-NEXT: %[[K2:.*]] = shard.shift %[[K1]]
// CHECK-NEXT: %[[V2:.*]] = shard.shift %[[V1]]
// CHECK-NEXT: %[[P2:.*]] = shard.shift %[[P1]]
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = gptc.attention_block %[[Q]], %[[K1]], %[[V1]] at %[[POS]], %[[P1]] heads 4
// CHECK-NEXT: %[[M1:.*]], %[[ML1:.*]] = gptc.attention_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]] : tensor<8x4x32xf32>, tensor<8x4x4xf32>, tensor<8x4x32xf32>, tensor<8x4x4xf32> -> tensor<8x4x32xf32>, tensor<8x4x4xf32>
// Step 2.
// CHECK-NEXT: %[[K3:.*]] = shard.shift %[[K2]]
// CHECK-NEXT: %[[V3:.*]] = shard.shift %[[V2]]
// CHECK-NEXT: %[[P3:.*]] = shard.shift %[[P2]]
// CHECK-NEXT: %[[O2:.*]], %[[L2:.*]] = gptc.attention_block %[[Q]], %[[K2]], %[[V2]] at %[[POS]], %[[P2]] heads 4
// CHECK-NEXT: %[[M2:.*]], %[[ML2:.*]] = gptc.attention_merge %[[M1]], %[[ML1]], %[[O2]], %[[L2]]
// Step 3, the last: nothing more to pass.
// CHECK-NEXT: %[[O3:.*]], %[[L3:.*]] = gptc.attention_block %[[Q]], %[[K3]], %[[V3]] at %[[POS]], %[[P3]] heads 4
// CHECK-NEXT: %[[M3:.*]], %{{.*}} = gptc.attention_merge %[[M2]], %[[ML2]], %[[O3]], %[[L3]]
// CHECK-NEXT: gptc.linear %[[M3]]
// CHECK-NOT: shard.all_gather
// CHECK: gptc.cross_entropy

// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[K1:.*]] = shard.shift %[[K:[0-9]+]] {{.*}} offset = 1 rotate
// GRAD-NEXT: %[[V1:.*]] = shard.shift %[[V:[0-9]+]] {{.*}} offset = 1 rotate
// GRAD-NEXT: %[[P1:.*]] = shard.shift %[[POS:[a-z_0-9]+]] {{.*}} offset = 1 rotate
// GRAD-NEXT: %[[O0:.*]], %[[L0:.*]] = gptc.attention_block %[[Q:[0-9]+]], %[[K]], %[[V]] at %[[POS]], %[[POS]]
// GRAD-NEXT: %[[O1:.*]], %[[L1:.*]] = gptc.attention_block %[[Q]], %[[K1]], %[[V1]] at %[[POS]], %[[P1]]
// GRAD-NEXT: gptc.attention_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]]
// The second layer's backward comes first; then this layer's.
// GRAD: gptc.attention_merge_grad
// GRAD: %[[DA:.*]], %[[DLA:.*]], %[[DB:.*]], %[[DLB:.*]] = gptc.attention_merge_grad %[[O0]], %[[L0]], %[[O1]], %[[L1]], %{{.*}}, %{{.*}} :
// GRAD-NEXT: %{{.*}}, %[[DK1:.*]], %[[DV1:.*]] = gptc.attention_block_grad %[[Q]], %[[K1]], %[[V1]] at %[[POS]], %[[P1]], %[[DB]], %[[DLB]] heads 4
// GRAD-NEXT: %{{.*}}, %[[DK0:.*]], %[[DV0:.*]] = gptc.attention_block_grad %[[Q]], %[[K]], %[[V]] at %[[POS]], %[[POS]], %[[DA]], %[[DLA]] heads 4
// GRAD: %[[BV:.*]] = shard.shift %[[DV1]] on @mesh grid_axes = [0] shift_axis = 0 offset = -1 rotate
// GRAD-NEXT: gptc.add %[[DV0]], %[[BV]]
// GRAD-NEXT: %[[BK:.*]] = shard.shift %[[DK1]] on @mesh grid_axes = [0] shift_axis = 0 offset = -1 rotate
// GRAD-NEXT: gptc.add %[[DK0]], %[[BK]]

// Per layer: the keys, values and positions forward, the keys' and values'
// gradients backward (the positions are passed once, CSE sharing them).
// COMM: shift [0] 2 8x8x32xf32 8192 8192 h.0.attn
// COMM: shift [0] 2 8xi32 32 32 h.0.attn
// COMM: shift 9 collectives 65568 G bytes 65568 sent bytes
// COMM-NOT: all_gather
// COMM: total

// TP: %[[K1:.*]] = shard.shift %{{.*}} on @mesh grid_axes = [1] shift_axis = 1 offset = 1 rotate : tensor<8x8x16xf32> -> tensor<8x8x16xf32>
// TP: gptc.attention_block {{.*}} heads 2 : {{.*}} -> tensor<8x8x16xf32>, tensor<8x8x2xf32>

// BF16: gptc.attention_block {{.*}} : tensor<8x8x32xbf16>, tensor<8x8x32xbf16>, tensor<8x8x32xbf16>, tensor<8xi32>, tensor<8xi32> -> tensor<8x8x32xf32>, tensor<8x8x4xf32>
// BF16: gptc.attention_merge {{.*}} : tensor<8x8x32xf32>, tensor<8x8x4xf32>, tensor<8x8x32xf32>, tensor<8x8x4xf32> -> tensor<8x8x32xf32>, tensor<8x8x4xf32>
// BF16: gptc.attention_block_grad {{.*}} : tensor<8x8x32xbf16>, tensor<8x8x32xbf16>, tensor<8x8x32xbf16>, tensor<8xi32>, tensor<8xi32>, tensor<8x8x32xf32>, tensor<8x8x4xf32> -> tensor<8x8x32xbf16>, tensor<8x8x32xbf16>, tensor<8x8x32xbf16>

// ATTR: gptc.parallel = #gptc.parallel<axes = ["cp"], kinds = ["context"], context_all_gather = true>
// SUMMARY-AG: parallel: data 1, tensor 1, pipeline 1, context 2 (all-gather attention), ZeRO stage 0
// SUMMARY: parallel: data 1, tensor 1, pipeline 1, context 2 (ring attention), ZeRO stage 0
