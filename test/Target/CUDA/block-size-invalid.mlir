// RUN: not gptc-opt %s -p 'builtin.module(func.func(gptc-gpu-map-kernel{block-size=2048}))' 2>&1 | FileCheck %s

// CHECK: error: 'func.func' op block-size must be in [1, 1024], got 2048
func.func @k(%out: memref<4xf32>) {
  return
}
