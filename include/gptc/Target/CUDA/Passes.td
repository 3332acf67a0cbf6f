//===- Passes.td - gptc CUDA code generation passes --------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CUDA_PASSES_TD
#define GPTC_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def GptcGpuMapKernelPass
    : InterfacePass<"gptc-gpu-map-kernel", "mlir::FunctionOpInterface"> {
  let summary = "Map a kernel's parallel loops onto GPU blocks and threads";
  let description = [{
    On a kernel function in destination-passing style on buffers, after
    `convert-linalg-to-parallel-loops`: every `scf.parallel` at the top of
    the function (one per linalg op, over its parallel dimensions) becomes
    a grid of `ceil(n / block-size)` blocks of `block-size` threads (fewer
    when the nest has fewer iterations): thread `t` of block `b` runs
    iteration `b * block-size + t` of the nest's iteration space linearized
    row-major, so that adjacent threads touch adjacent elements of the
    innermost dimension (coalesced loads and stores); the threads past the
    end idle. Reduction dimensions stay sequential loops inside a thread.
    `convert-parallel-loops-to-gpu` then turns each nest into a
    `gpu.launch`.

    Allocations at the top of the function (values passed from one loop
    nest to the next) stay: each becomes a device temporary the launch
    sequence passes between kernels. Anything else at the top that touches
    memory has no GPU mapping and is an error, as is a loop nest with no
    parallel dimension (a reduction to a scalar).

    ```mlir
    scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c64) step (%c1, %c1) {...}
    // becomes (512 iterations, block-size 256)
    scf.parallel (%b) = (%c0) to (%c2) step (%c1) {
      scf.parallel (%t) = (%c0) to (%c256) step (%c1) {
        %n = b * 256 + t
        scf.if %n < 512 { %i = %n / 64, %j = %n % 64, ... }
      } {mapping = [#gpu.loop_dim_map<processor = thread_x, ...>]}
    } {mapping = [#gpu.loop_dim_map<processor = block_x, ...>]}
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::arith::ArithDialect"
  ];
}

def GptcGpuMergeModulesPass
    : Pass<"gptc-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Gather the outlined GPU kernels into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` puts each kernel in a `gpu.module` of its own.
    This pass moves every kernel into one module, `@gptc_kernels`, and
    points each `gpu.launch_func` at its new place, so that the program's
    kernels compile to one binary (one PTX text, one cubin) the runtime
    loads once. Kernel names are unique already (the outliner derives them
    from the host function's).
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // GPTC_TARGET_CUDA_PASSES_TD
