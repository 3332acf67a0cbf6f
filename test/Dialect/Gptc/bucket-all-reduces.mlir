// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-bucket-all-reduces{bucket-bytes=1024}))' | FileCheck %s
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-bucket-all-reduces{bucket-bytes=0}))' | FileCheck %s --check-prefix=OFF
// RUN: gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-bucket-all-reduces{bucket-bytes=0 prefetch=false}))' | FileCheck %s --check-prefix=NONE
// RUN: not gptc-opt %s --split-input-file -p 'builtin.module(func.func(gptc-bucket-all-reduces{bucket-bytes=-1}))' 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: 'func.func' op gptc-bucket-all-reduces: bucket-bytes must not be negative

// Gradients in backward order, each all-reduced as it is computed: the
// first three (256 + 512 + 256 bytes) fill a 1024-byte bucket, placed where
// the third all-reduce was; the fourth starts a bucket of its own, alone
// at the end, so it stays a shard.all_reduce. The users (the update) come
// after both.
// CHECK-LABEL: func.func @backward_order
// CHECK: %[[A:.*]] = gptc.gelu %arg0
// CHECK: %[[B:.*]] = gptc.gelu %arg1
// CHECK: %[[C:.*]] = gptc.gelu %arg2
// CHECK-NEXT: %[[R:.*]]:3 = gptc.bucket_all_reduce %[[A]], %[[B]], %[[C]] on @mesh grid_axes = [0] : tensor<64xf32>, tensor<128xf32>, tensor<64xf32>
// CHECK: %[[D:.*]] = gptc.gelu %arg3
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[D]]
// CHECK: gptc.add %[[R]]#0, %[[R]]#2
// CHECK: gptc.add %[[R]]#1, %[[R]]#1
// CHECK: gptc.add %[[S]], %[[S]]
// CHECK-NOT: shard.all_reduce
// OFF-LABEL: func.func @backward_order
// OFF-COUNT-4: shard.all_reduce
// OFF-NOT: gptc.bucket_all_reduce
shard.grid @mesh(shape = 2)
func.func @backward_order(%x: tensor<64xf32>, %y: tensor<128xf32>,
                          %z: tensor<64xf32>, %w: tensor<64xf32>)
    -> (tensor<64xf32>, tensor<128xf32>, tensor<64xf32>) {
  %a = gptc.gelu %x : tensor<64xf32>
  %ra = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
  %b = gptc.gelu %y : tensor<128xf32>
  %rb = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<128xf32> -> tensor<128xf32>
  %c = gptc.gelu %z : tensor<64xf32>
  %rc = shard.all_reduce %c on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
  %d = gptc.gelu %w : tensor<64xf32>
  %rd = shard.all_reduce %d on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
  %u = gptc.add %ra, %rc : tensor<64xf32>
  %v = gptc.add %rb, %rb : tensor<128xf32>
  %t = gptc.add %rd, %rd : tensor<64xf32>
  return %u, %v, %t : tensor<64xf32>, tensor<128xf32>, tensor<64xf32>
}

// -----

// A use of a reduced value closes the bucket before it (tensor
// parallelism's activation all-reduces are used at once and stay single);
// another grid axis, another element type or another reduction does not
// join it.
// CHECK-LABEL: func.func @cuts
// CHECK: %[[R1:.*]]:2 = gptc.bucket_all_reduce %arg0, %arg1 on @mesh grid_axes = [0]
// CHECK-NEXT: gptc.gelu %[[R1]]#0
// CHECK-NEXT: shard.all_reduce %arg2 on @mesh grid_axes = [1]
// CHECK-NEXT: shard.all_reduce %arg3 on @mesh grid_axes = [0] : tensor<8xbf16>
// CHECK-NEXT: shard.all_reduce %arg0 on @mesh grid_axes = [0] reduction = {{ *}}max
// CHECK-NEXT: %[[R2:.*]]:2 = gptc.bucket_all_reduce %arg0, %arg4 on @mesh grid_axes = [0, 1]
// CHECK-NEXT: return
shard.grid @mesh(shape = 2x2)
func.func @cuts(%x: tensor<8xf32>, %y: tensor<8xf32>, %z: tensor<8xf32>,
                %h: tensor<8xbf16>, %q: tensor<8xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>,
        tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %g = gptc.gelu %a : tensor<8xf32>
  %c = shard.all_reduce %z on @mesh grid_axes = [1] : tensor<8xf32> -> tensor<8xf32>
  %d = shard.all_reduce %h on @mesh grid_axes = [0] : tensor<8xbf16> -> tensor<8xbf16>
  %m = shard.all_reduce %x on @mesh grid_axes = [0] reduction = max : tensor<8xf32> -> tensor<8xf32>
  %e = shard.all_reduce %x on @mesh grid_axes = [0, 1] : tensor<8xf32> -> tensor<8xf32>
  %f = shard.all_reduce %q on @mesh grid_axes = [0, 1] : tensor<8xf32> -> tensor<8xf32>
  return %g, %b, %c, %d, %m, %e, %f : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A tensor larger than the bucket is a bucket of its own; a result type
// that differs from the operand's (a widening all-reduce) never joins.
// CHECK-LABEL: func.func @alone
// CHECK: shard.all_reduce %arg0 {{.*}} : tensor<512xf32> -> tensor<512xf32>
// CHECK-NEXT: shard.all_reduce %arg1 {{.*}} : tensor<8xf32> -> tensor<8xf64>
// CHECK-NEXT: return
// CHECK-NOT: gptc.bucket_all_reduce
shard.grid @mesh(shape = 2)
func.func @alone(%x: tensor<512xf32>, %y: tensor<8xf32>)
    -> (tensor<512xf32>, tensor<8xf64>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<512xf32> -> tensor<512xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf64>
  return %a, %b : tensor<512xf32>, tensor<8xf64>
}

// -----

// The microbatch loop's body is a block of its own: its all-reduces are
// bucketed there, not with the function's.
// CHECK-LABEL: func.func @regions
// CHECK: gptc.accumulate
// CHECK: gptc.bucket_all_reduce %{{.*}}, %{{.*}} on @mesh
// CHECK: gptc.yield
// CHECK: gptc.bucket_all_reduce %{{.*}}#0, %{{.*}}#1 on @mesh
shard.grid @mesh(shape = 2)
func.func @regions(%x: tensor<8x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s:2 = gptc.accumulate %x microbatches 2 : (tensor<8x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%m: tensor<4x4xf32>):
    %r = gptc.reduce_sum %m [0] : tensor<4x4xf32> -> tensor<4xf32>
    %a = shard.all_reduce %r on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %b = shard.all_reduce %r on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    gptc.yield %a, %b : tensor<4xf32>, tensor<4xf32>
  }
  %a = shard.all_reduce %s#0 on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %b = shard.all_reduce %s#1 on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// ZeRO's block collectives along dimension 0: all-gathers (parameters
// after the update, as ZeRO-1's) and sum reduce-scatters (gradients) fill
// buckets of their own kind, each open across the other kind's
// collectives, each placed where its last member was; 1024 bytes counts
// the whole tensors (a gather's results, a scatter's operands). Gathers
// along another dimension and max reduce-scatters stay single.
// CHECK-LABEL: func.func @blocks
// CHECK: %[[G:.*]]:2 = gptc.bucket_all_gather %0, %1 on @mesh grid_axes = [0] : tensor<16x4xf32>, tensor<16xf32> -> tensor<32x4xf32>, tensor<32xf32>
// CHECK-NEXT: %[[S:.*]]:2 = gptc.bucket_reduce_scatter %arg2, %arg3 on @mesh grid_axes = [0] : tensor<32x4xf32>, tensor<32xf32> -> tensor<16x4xf32>, tensor<16xf32>
// CHECK-NEXT: gptc.gelu %[[G]]#0
// CHECK-NEXT: shard.all_gather %arg4 on @mesh grid_axes = [0] gather_axis = 1
// CHECK-NEXT: shard.reduce_scatter %arg2 on @mesh grid_axes = [0] reduction = {{ *}}max
// CHECK-NEXT: return %{{.*}}, %[[G]]#1, %{{.*}}, %{{.*}}, %[[S]]#0, %[[S]]#1
// OFF-LABEL: func.func @blocks
// OFF-NOT: gptc.bucket_
shard.grid @mesh(shape = 2)
func.func @blocks(%w0: tensor<16x4xf32>, %b0: tensor<16xf32>,
                  %dw: tensor<32x4xf32>, %db: tensor<32xf32>,
                  %c: tensor<4x8xf32>)
    -> (tensor<32x4xf32>, tensor<32xf32>, tensor<4x16xf32>, tensor<16x4xf32>,
        tensor<16x4xf32>, tensor<16xf32>) {
  %w = gptc.gelu %w0 : tensor<16x4xf32>
  %b = gptc.gelu %b0 : tensor<16xf32>
  %gw = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
  %sw = shard.reduce_scatter %dw on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32x4xf32> -> tensor<16x4xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<32xf32>
  %sb = shard.reduce_scatter %db on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
  %h = gptc.gelu %gw : tensor<32x4xf32>
  %gc = shard.all_gather %c on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  %m = shard.reduce_scatter %dw on @mesh grid_axes = [0] reduction = max scatter_axis = 0 : tensor<32x4xf32> -> tensor<16x4xf32>
  return %h, %gb, %gc, %m, %sw, %sb : tensor<32x4xf32>, tensor<32xf32>, tensor<4x16xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16xf32>
}

// -----

// ZeRO-3's gathers, whose operands (the parameter slices) are there from
// the start: bucketed in the order of their first readers (512 bytes each,
// two to a 1024-byte bucket) and each bucket issued where the bucket
// before it is first read: %a and %b's bucket before the first layer, %c's
// right behind it (prefetched while %a and %b are read). The backward's
// second gather of %a waits until the forward copy's last reader is done,
// so the two whole copies of %a are never alive together.
// CHECK-LABEL: func.func @prefetch
// CHECK-NEXT: %[[AB:.*]]:2 = gptc.bucket_all_gather %arg0, %arg1 on @mesh grid_axes = [0]
// CHECK-NEXT: %[[C:.*]] = shard.all_gather %arg2
// CHECK-NEXT: %[[X0:.*]] = gptc.add %arg3, %[[AB]]#0
// CHECK-NEXT: %[[X1:.*]] = gptc.add %[[X0]], %[[AB]]#1
// CHECK-NEXT: %[[X2:.*]] = gptc.add %[[X1]], %[[C]]
// CHECK-NEXT: %[[X3:.*]] = gptc.add %[[X2]], %[[AB]]#0
// CHECK-NEXT: %[[A2:.*]] = shard.all_gather %arg0 {{.*}}gptc.rematerialize
// CHECK-NEXT: gptc.add %[[X3]], %[[A2]]
// Without buckets each gather is issued at its predecessor's first reader.
// OFF-LABEL: func.func @prefetch
// OFF-NEXT: %[[A:.*]] = shard.all_gather %arg0
// OFF-NEXT: %[[B:.*]] = shard.all_gather %arg1
// OFF-NEXT: %[[X0:.*]] = gptc.add %arg3, %[[A]]
// OFF-NEXT: %[[C:.*]] = shard.all_gather %arg2
// OFF-NEXT: %[[X1:.*]] = gptc.add %[[X0]], %[[B]]
// OFF-NEXT: %[[X2:.*]] = gptc.add %[[X1]], %[[C]]
// OFF-NEXT: %[[X3:.*]] = gptc.add %[[X2]], %[[A]]
// OFF-NEXT: %[[A2:.*]] = shard.all_gather %arg0
// OFF-NEXT: gptc.add %[[X3]], %[[A2]]
// prefetch=false with no buckets leaves the order as it was.
// NONE-LABEL: func.func @prefetch
// NONE-NEXT: shard.all_gather %arg0
// NONE-NEXT: shard.all_gather %arg1
// NONE-NEXT: shard.all_gather %arg2
// NONE-NEXT: shard.all_gather %arg0
// NONE-NEXT: gptc.add
shard.grid @mesh(shape = 2)
func.func @prefetch(%a: tensor<16x4xf32>, %b: tensor<16x4xf32>,
                    %c: tensor<16x4xf32>, %x: tensor<32x4xf32>)
    -> tensor<32x4xf32> {
  %ga = shard.all_gather %a on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
  %gc = shard.all_gather %c on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
  %ga2 = shard.all_gather %a on @mesh grid_axes = [0] gather_axis = 0 {gptc.rematerialize} : tensor<16x4xf32> -> tensor<32x4xf32>
  %0 = gptc.add %x, %ga : tensor<32x4xf32>
  %1 = gptc.add %0, %gb : tensor<32x4xf32>
  %2 = gptc.add %1, %gc : tensor<32x4xf32>
  %3 = gptc.add %2, %ga : tensor<32x4xf32>
  %4 = gptc.add %3, %ga2 : tensor<32x4xf32>
  return %4 : tensor<32x4xf32>
}

// -----

// Mixed precision's ZeRO-3 gathers the 16-bit casts of the slices; each
// cast, read only by its gather, moves with it (%b's cast and gather go
// ahead of %a's reader).
// CHECK-LABEL: func.func @prefetch_cast
// CHECK-NEXT: %[[X:.*]] = gptc.gelu %arg2
// CHECK-NEXT: %[[CA:.*]] = gptc.cast %arg0
// CHECK-NEXT: %[[CB:.*]] = gptc.cast %arg1
// CHECK-NEXT: %[[G:.*]]:2 = gptc.bucket_all_gather %[[CA]], %[[CB]] on @mesh grid_axes = [0] : tensor<16x4xbf16>, tensor<16x4xbf16> -> tensor<32x4xbf16>, tensor<32x4xbf16>
// CHECK-NEXT: %[[Y:.*]] = gptc.add %[[X]], %[[G]]#0
// CHECK-NEXT: gptc.add %[[Y]], %[[G]]#1
// OFF-LABEL: func.func @prefetch_cast
// OFF-NEXT: gptc.gelu
// OFF-NEXT: %[[CA:.*]] = gptc.cast %arg0
// OFF-NEXT: %[[GA:.*]] = shard.all_gather %[[CA]]
// OFF-NEXT: %[[CB:.*]] = gptc.cast %arg1
// OFF-NEXT: %[[GB:.*]] = shard.all_gather %[[CB]]
// OFF-NEXT: gptc.add %{{.*}}, %[[GA]]
// OFF-NEXT: gptc.add %{{.*}}, %[[GB]]
// NONE-LABEL: func.func @prefetch_cast
// NONE-NEXT: gptc.gelu
// NONE-NEXT: gptc.cast %arg0
// NONE-NEXT: shard.all_gather
// NONE-NEXT: gptc.add
// NONE-NEXT: gptc.cast %arg1
shard.grid @mesh(shape = 2)
func.func @prefetch_cast(%a: tensor<16x4xf32>, %b: tensor<16x4xf32>,
                         %x: tensor<32x4xbf16>) -> tensor<32x4xbf16> {
  %0 = gptc.gelu %x : tensor<32x4xbf16>
  %ca = gptc.cast %a : tensor<16x4xf32> -> tensor<16x4xbf16>
  %ga = shard.all_gather %ca on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xbf16> -> tensor<32x4xbf16>
  %1 = gptc.add %0, %ga : tensor<32x4xbf16>
  %cb = gptc.cast %b : tensor<16x4xf32> -> tensor<16x4xbf16>
  %gb = shard.all_gather %cb on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xbf16> -> tensor<32x4xbf16>
  %2 = gptc.add %1, %gb : tensor<32x4xbf16>
  return %2 : tensor<32x4xbf16>
}
