//===- Passes.td - gptc CPU code generation passes ---------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CPU_PASSES_TD
#define GPTC_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def GptcKernelFusePass
    : InterfacePass<"gptc-kernel-fuse", "mlir::FunctionOpInterface"> {
  let summary = "Fuse a kernel's linalg ops into one loop nest";
  let description = [{
    Producer-consumer fusion of the elementwise `linalg.generic`s of a
    kernel function, as `linalg-fuse-elementwise-ops` does, but also
    through a producer with several users: inside a kernel recomputing an
    elementwise value is cheaper than storing it, so a value used twice
    (the sum before GELU and its gradient) is fused into both consumers.
    Results nobody reads are then dropped, so a kernel of a chain becomes
    one loop nest that writes only the kernel's results. Last, a
    `linalg.generic` that computes what an earlier one in its block does
    (the same inputs, indexing maps, iterators and body, its outputs
    starting from the same tensors or from fills of one scalar into new
    tensors) is replaced by the earlier one's results: the loss and its
    gradient in one kernel each find the logits' row maxima, once now.
    Not `cse`, which would also share the two fills and make bufferization
    copy one.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def GptcKernelAbiPass
    : InterfacePass<"gptc-kernel-abi", "mlir::FunctionOpInterface"> {
  let summary = "Give a kernel function the runtime's calling convention";
  let description = [{
    Rewrites a kernel function on tensors, `(inputs) -> (results)`, into
    destination-passing style on buffers: its arguments become `memref`s of
    the same shapes, followed by one `memref` per result (the buffer the
    runtime planned for it) and the `begin`, `end` range of the kernel's
    parallel dimension (dimension 0 of every result, whose extent is
    recorded as `gptc.extent`). Inputs are read through
    `bufferization.to_tensor ... restrict` and each result is written with
    `bufferization.materialize_in_destination`, so that bufferization
    computes it in its buffer. Every result must have dimension 0 of one
    extent.

    ```mlir
    func.func @k(%a: tensor<8x64xf32>) -> tensor<8x64xf32>
    // becomes
    func.func @k(%a: memref<8x64xf32>, %out: memref<8x64xf32>,
                 %begin: index, %end: index) attributes {gptc.extent = 8}
    ```

    With `row-range=false` (the CUDA target, whose kernels cover every
    row in one launch) the function takes no `begin`, `end`.
  }];
  let options = [
    Option<"rowRange", "row-range", "bool", /*default=*/"true",
           "End the signature with the begin, end row range the CPU "
           "runtime splits over its threads">
  ];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def GptcKernelParallelRangePass
    : InterfacePass<"gptc-kernel-parallel-range", "mlir::FunctionOpInterface"> {
  let summary = "Run a kernel's outermost loops over [begin, end) only";
  let description = [{
    After bufferization and `convert-linalg-to-loops`, each loop nest at
    the top of a kernel function iterates dimension 0 of the results from
    0 to `gptc.extent`. This pass makes those loops run from the
    function's `begin` to its `end` argument, so that the runtime can
    split a kernel's rows over its threads (each call computes a
    contiguous block of rows; the rows are independent, as every kernel's
    dimension 0 is parallel). Anything else at the top of the function
    that touches memory is an error.

    ```mlir
    scf.for %i = %c0 to %c8 step %c1 { ... }
    // becomes
    scf.for %i = %begin to %end step %c1 { ... }
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def GptcKernelEntryPass : Pass<"gptc-kernel-entry", "mlir::ModuleOp"> {
  let summary = "Wrap each lowered kernel in the runtime's entry point";
  let description = [{
    On the LLVM dialect, after `convert-func-to-llvm` with bare pointers:
    each public kernel `@k(ptr x N, i64 begin, i64 end)` becomes the
    internal `@k.body`, called by a new public

    ```mlir
    llvm.func @k(%buffers: !llvm.ptr, %begin: i64, %end: i64)
    ```
    that loads the N buffer pointers from the array `buffers` (operands,
    then results, as the artifact lists them). One C signature for every
    kernel, `void(void **, int64_t, int64_t)`, is what the runtime calls.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // GPTC_TARGET_CPU_PASSES_TD
