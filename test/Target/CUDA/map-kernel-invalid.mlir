// RUN: gptc-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(func.func(gptc-gpu-map-kernel))'

// A scalar one thread computes that a later nest would read as a value
// (not through memory) cannot leave its launch.
func.func @escapes(%a: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> (f32) {
    %x = memref.load %a[%k] : memref<16xf32>
    %n = arith.addf %acc, %x : f32
    scf.yield %n : f32
  }
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    // expected-error @+1 {{uses a scalar computed in a GPU launch before it; it has no GPU mapping}}
    memref.store %s, %out[%i] : memref<16xf32>
    scf.reduce
  }
  return
}

// -----

// An op the mapping does not know, outside the loops.
func.func @outside(%a: memref<4xf32>, %out: memref<4xf32>) {
  // expected-error @+1 {{runs outside the kernel's parallel loops; it has no GPU mapping}}
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Dynamic bounds: the launch size must be known when compiling.
func.func @dynamic(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  // expected-error @+1 {{has no static iteration space from 0 in steps of 1 to map onto GPU threads}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %out[%i] : memref<?xf32>
    scf.reduce
  }
  return
}
