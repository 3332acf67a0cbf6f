// RUN: gptc-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(func.func(gptc-kernel-parallel-range))'

// A loop that is not over the parallel dimension cannot be split.
func.func @wrong_extent(%m: memref<8xf32>, %begin: index, %end: index) attributes {gptc.extent = 8 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  // expected-error@+1 {{'scf.for' op is not a loop over the kernel's parallel dimension [0, 8)}}
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %m[%i] : memref<8xf32>
    memref.store %v, %m[%i] : memref<8xf32>
  }
  return
}

// -----

// Work outside the loops would run once per row block.
func.func @outside_the_loops(%m: memref<8xf32>, %begin: index, %end: index) attributes {gptc.extent = 8 : i64} {
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  // expected-error@+1 {{'memref.store' op runs outside the kernel's parallel loops}}
  memref.store %f, %m[%c0] : memref<8xf32>
  return
}

// -----

// expected-error@+1 {{expects gptc.extent (run gptc-kernel-abi)}}
func.func @no_extent(%m: memref<8xf32>, %begin: index, %end: index) {
  return
}
