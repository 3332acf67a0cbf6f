// RUN: gptc-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(func.func(gptc-gpu-map-kernel))'

// A reduction to a scalar has no parallel dimension to map.
func.func @scalar(%a: memref<16xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{is a loop nest with no parallel dimension (a reduction to a scalar); the GPU target has no mapping for it yet}}
  %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> (f32) {
    %x = memref.load %a[%k] : memref<16xf32>
    %n = arith.addf %acc, %x : f32
    scf.yield %n : f32
  }
  memref.store %s, %out[] : memref<f32>
  return
}

// -----

// A store outside the loops would run once per thread.
func.func @outside(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  // expected-error @+1 {{runs outside the kernel's parallel loops; it has no GPU mapping}}
  memref.store %one, %out[%c0] : memref<4xf32>
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
