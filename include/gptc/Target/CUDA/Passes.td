//===- Passes.td - gptc CUDA code generation passes --------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_CUDA_PASSES_TD
#define GPTC_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def GptcGpuMapReductionsPass
    : InterfacePass<"gptc-gpu-map-reductions", "mlir::FunctionOpInterface"> {
  let summary = "Launch a kernel's reductions with warp and block reductions";
  let description = [{
    On a kernel function on buffers, before
    `convert-linalg-to-parallel-loops`: each top-level `linalg.generic`
    whose iterators are parallel dimensions followed by reduction
    dimensions, with 32- or 64-bit outputs indexed by the parallel
    dimensions and a body that combines each output with one value of its
    own (`out_i = op_i(out_i, f_i(ins))`, `op_i` one of add, mul, min, max,
    and, or, xor), becomes a `gpu.launch`; a reduction with several outputs
    (layer norm's two row sums, its weight and bias gradients) reads its
    inputs once, carries one partial per output and reduces each:

    - with parallel dimensions (a row reduction: layer norm's sums,
      softmax's max and sum, the loss's log-sum-exp), a warp per row,
      `warps-per-block` rows per block: lane `l` combines elements `l, l +
      32, ...` of its row, `gpu.subgroup_reduce` combines the 32 lanes
      (butterfly shuffles), lane 0 combines the result into the output;
    - without (a reduction to a scalar: a sum of squares, a token count),
      one block of 1024 threads, each combining a strided part,
      `gpu.all_reduce` combining the block, thread 0 writing. One of at
      least 65536 elements (a large tensor's term of the gradient norm,
      which one block would read at a small fraction of the memory's
      bandwidth) is first cut into min(65536, n / 16) strided partials,
      in deterministic phases of parallel loops: partial `k` combines
      elements `k, k + partials, ...` (neighbouring threads read
      neighbouring elements) into a temporary, and the partials are
      reduced the same way while they are at least 65536, then by the
      block.

    A reduction's loops are first interchanged so that its parallel
    dimensions come first; only one whose innermost dimension was reduced
    (contiguous in memory) takes a warp per row.

    **Row kernels** (`fuse-rows`, default on). A layer norm is a row sum, a
    row sum of squared deviations and an elementwise normalization;
    launched one by one they read the row three times from memory and pass
    the statistics through temporaries. Instead, each row reduction anchors
    a run of the ops over the same rows `R` and columns `C`: row reductions
    (`R` parallel, `C` reduced), elementwise ops over `R x C`, ops on one
    value per row (loops `R`) and fills of per-row or `R x C` buffers. The
    run becomes one nest of `warps-per-block` rows per block, `row-lanes`
    threads per row, already mapped onto blocks and threads
    (`gptc-gpu-map-kernel` leaves it): its ops in order, consecutive
    column ops sharing one loop of lane `l` over columns `l, l + 32, ...`,
    a loop ending where an op needs a row value a reduction of the loop
    computes (`gpu.subgroup_reduce` gives every lane the total). A sum
    that reads a maximum the loop computes only as `exp(x - max)` (the
    softmax's and the loss's denominators) stays in the loop, an online
    softmax: each lane sums against its running maximum, multiplying its
    sum by `exp(old - new)` as the maximum grows, and by `exp(lane's -
    row's)` before the lanes' sums are added, so the maximum and the sum
    take one pass over the row, not two. When
    every lane has the same number of columns, a loop takes 4 of them an
    iteration (a constant trip count) and issues their loads of buffers the loop
    does not write before any of their arithmetic and stores, so that a
    lane has several loads in flight. Per-row
    values are registers; lane 0 stores those something outside the run
    reads (a later column reduction, the caller), and a temporary only the
    run used disappears.

    A row of at most `row-lanes x row-registers` columns (default 32 a
    lane: up to 1024, GPT-2's 768 included) that divide evenly among the
    lanes is held in registers: no loops, each phase straight-line code
    over the lane's columns, every element of a buffer the run does not
    write loaded once for the whole run (all of them before the first
    phase's arithmetic), and an element the lane stored (a residual sum)
    reused rather than loaded again, so memory sees each input once. A
    wider row (a vocabulary row of logits, 100-200 KB) is read again in
    each phase (the loss: twice, the maximum with the sums of
    exponentials, then its gradient), from the SM's L1 or the L2 while it
    fits there, else from memory, as separate launches would.

    With the rows held in registers, the column reductions over the run's
    rows that would follow the nest (layer norm's weight and bias
    gradients, which read the row statistics; a reduction over the rows
    for each column, of the run's elements, its per-row values and
    per-column buffers) are computed in it too, if every op deferred
    after the run is one and nothing between the run and it writes what
    it reads: the nest then runs at most 1024 warps, each over at least 16
    rows (warp `w` takes rows `w, w + warps, ...`), each lane adding its
    columns' terms over its rows in registers (the elements as it holds
    them, the statistics from their registers: they no longer leave
    them), and stores its partials to a `warps x columns` temporary; a
    column reduction of those partials takes the reduction's place (after
    the fill of its outputs), cut like the others below but into chunks
    of 32 rows (1024 partials: 32 chunks). Memory then sees the inputs once and
    `warps x columns` partials instead of the rows again.

    A run stays correct by construction: every buffer it writes is
    addressed one way by all its ops, the loops' own element (so the lane
    that wrote it reads it) or the row's value (a register), never through
    a view; a read of another element of a written buffer ends the run.
    Linalg ops and scalar loads and stores between its ops that touch
    nothing the run does stay before it (a token count the loss gradient
    reads); the others move after it (layer norm's weight and bias
    gradients, column sums that read the row statistics), and no later op
    of the run may touch what they touch. Anything else (scalar code with
    other effects) ends the run. Kernel arguments are distinct buffers
    (the GPU runtime never aliases a kernel's operands and results). A run
    with no reduction, or a reduction alone, is left to the launches below.

    A reduction over leading
    dimensions (a bias gradient's column sums) of at least 512 rows is cut
    into up to 64 chunks of at least 256 rows, in two deterministic phases
    of parallel loops: a temporary takes each chunk's partial result per
    column, then each column combines its chunks into the output
    (neighbouring threads read neighbouring columns in both); a shorter
    one is left, parallel loops outermost, to a thread per output element. Any other linalg op is left to
    `gptc-gpu-map-kernel` (a thread per
    output element, reductions sequential in the thread); a `memref.copy`
    bufferization left becomes a copy `linalg.generic` (for it, or for a
    row kernel: two reductions starting from one fill copy it), and a splat
    constant it made a global becomes a temporary `linalg.fill` writes (the
    kernels carry no data to upload).
  }];
  let options = [
    Option<"warpsPerBlock", "warps-per-block", "int64_t", /*default=*/"8",
           "Rows (warps of 32 threads) per block of a row reduction">,
    Option<"launchReductions", "launch-reductions", "bool", /*default=*/"true",
           "Build the launches; false: leave every reduction to "
           "gptc-gpu-map-kernel (a thread per row or one thread per "
           "scalar; what the CPU can run to check the mapping)">,
    Option<"fuseRows", "fuse-rows", "bool", /*default=*/"true",
           "Fuse each run of row ops around row reductions into one "
           "warp-per-row loop nest">,
    Option<"rowLanes", "row-lanes", "int64_t", /*default=*/"32",
           "Threads per row of a fused row nest: 32 (a warp), or 1 (no "
           "warp reduction: what the CPU can run to check the fusion)">,
    Option<"rowRegisters", "row-registers", "int64_t", /*default=*/"32",
           "Columns a lane of a fused row nest holds in registers, at "
           "most 128: a row of at most row-lanes times this many columns "
           "(that divide among the lanes) is read from memory once; 0: "
           "each phase reads it again">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::affine::AffineDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def GptcGpuLowerReductionsPass : Pass<"gptc-gpu-lower-reductions"> {
  let summary = "Lower gpu.subgroup_reduce and gpu.all_reduce to shuffles";
  let description = [{
    In outlined GPU kernels: `gpu.subgroup_reduce` becomes five butterfly
    `gpu.shuffle xor` steps over a warp of 32 lanes (`shfl.sync.bfly` in
    PTX), and `gpu.all_reduce` a reduction within each warp, the warps'
    partial results exchanged through workgroup (shared) memory and
    reduced again, as MLIR's GPU rewrite patterns build them.
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::cf::ControlFlowDialect"
  ];
}

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

    A large elementwise nest (at least `coarsen-min-elements` iterations,
    a multiple of `elements-per-thread` x `block-size`, a body of loads,
    stores and arithmetic only, no buffer both read and written) gives
    each thread `elements-per-thread` iterations instead, `n / per`
    apart (so that each load is still coalesced across a warp), with
    every iteration's loads first, then the arithmetic, then the stores:
    the loads of all of them are in flight at once. A thread per 16-bit
    element keeps too few bytes in flight to fill the memory's
    bandwidth; the grid is `n / (per * block-size)` blocks, with no idle
    thread and no guard.

    Allocations at the top of the function (values passed from one loop
    nest to the next) and launches `gptc-gpu-map-reductions` built stay:
    each allocation becomes a device temporary the launch sequence passes
    between kernels. Scalar code at the top (a loaded scalar, the
    arithmetic on it) that a later nest reads is recomputed by each of
    its threads when it is at most 16 ops (the learning rate); a longer
    one (the clipping scale: a sum over every tensor's partial of the
    gradient norm, then its square root) is stored once to a new scalar
    temporary that the nests load. A store to a scalar or a loop nest
    with no parallel dimension (a reduction to a scalar of a form the
    warp and block reductions do not take) runs in one thread of one
    block: correct, and slow for a large reduction. Anything else at the
    top that touches memory has no GPU mapping and is an error.

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
           "Threads per block">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t",
           /*default=*/"4",
           "Iterations per thread of a large straight-line nest (1: one each)">,
    Option<"coarsenMinElements", "coarsen-min-elements", "int64_t",
           /*default=*/"1048576",
           "The fewest iterations of a nest whose threads take several">
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

def GptcGpuShareFunctionsPass
    : Pass<"gptc-gpu-share-functions", "mlir::ModuleOp"> {
  let summary = "Compile one GPU function per distinct body";
  let description = [{
    A model's layers launch the same GPU code on the same shapes: the
    outliner gives every launch a `gpu.func` of its own, so the fused
    optimizer's kernel of GPT-2 1.5B (an update per parameter tensor)
    brings 2,954 functions of which a few dozen differ. This pass keeps,
    in each `gpu.module`, the first function of each body (its type, its
    attributes but the name, and its ops, locations aside) and points
    every `gpu.launch_func` of an erased one at the one kept, so that the
    NVVM lowering and the NVPTX back end compile each body once and the
    image's size does not grow with depth.

    Run it right after gptc-gpu-merge-modules: the outliner makes equal
    bodies of equal loop nests (the same ops, constants sunk in the same
    order), and every pass after it then works on the distinct functions
    only. A function some op other than a launch refers to is kept as it
    is.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def GptcGpuKernelArgAttrsPass
    : Pass<"gptc-gpu-kernel-arg-attrs", "mlir::gpu::GPUModuleOp"> {
  let summary = "Mark kernel buffers noalias, and those a kernel only reads "
                "readonly";
  let description = [{
    On every kernel (`gpu.func ... kernel`) of the module, each memref
    argument gets `llvm.noalias`, and one the kernel never writes (no op
    in it writes the argument or a view of it) also `llvm.readonly`;
    `convert-gpu-to-nvvm` with bare pointers carries both to the LLVM
    function. This is the kernel ABI's contract made visible to LLVM: a
    kernel's results and temporaries are buffers of their own (the
    runtime never aliases them with anything else), its operands are only
    read (bufferization copies an operand before writing it), and a
    launch receives whole buffers, never two views of one. Two operands
    may be views of one buffer (a reshape planned as a view), which
    `noalias` allows since neither is written. With both attributes
    LLVM's NVPTX back end reads the operands through the non-coherent
    cache (`ld.global.nc`, CUDA's `const __restrict__`), and may reorder
    an operand's loads across the kernel's stores.

    It runs after `gptc-gpu-lower-reductions`, on the shuffles, barriers
    and shared memory a block reduction becomes (a barrier writes nothing;
    shared memory is not an argument). An op whose effects are unknown
    (it does not describe them; nothing in the generated kernels is such
    an op) or that writes memory no value names makes every argument
    written.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def GptcGpuEmulateOnHostPass
    : Pass<"gptc-gpu-emulate-on-host", "mlir::ModuleOp"> {
  let summary = "Turn NVVM kernels and their launches into host code that "
                "runs under the test suite's CUDA emulation";
  let description = [{
    A test aid: it lets the suite run the kernels the CUDA pipeline
    generates, warp shuffles and block barriers included, on a machine
    without a GPU. Its input is the pipeline's output at `format=none`:
    host functions with `gpu.launch_func`, and a `gpu.module` of kernels
    in the LLVM dialect with NVVM operations (bare-pointer arguments).

    - Every function and global of the `gpu.module` moves into the host
      module (definitions renamed `__emu_<module>_<name>`; declarations,
      libdevice's `__nv_*` math functions, keep their names and are
      provided by the emulation library). Shared memory becomes ordinary
      memory (address space 0): the emulation runs a block at a time.
    - NVVM's special registers (`tid`, `ntid`, `ctaid`, `nctaid`,
      `laneid`, `warpsize`) become calls to `gptc_emu_sreg`, `barrier0`
      to `gptc_emu_barrier0`, and `shfl.sync` to `gptc_emu_shfl`, which
      implements PTX's rule for each mode (clamp and segment mask, the
      source lane and its validity). Any other NVVM operation is an error
      naming it: nothing is silently left out.
    - Each kernel gets a thunk taking CUDA's kernel-parameter array (a
      pointer to each argument), and each `gpu.launch_func` becomes a call
      to `gptc_emu_launch(thunk, grid, block, params, synchronizes)`
      (whether the kernel has a barrier or a shuffle: one that has not runs
      its threads as plain calls, not fibers).

    The library (`libGptcNvvmEmulation.so`, `lib/Runtime/VirtualCuda/NvvmEmulation.cpp`)
    runs every thread of a block as a fiber from barrier to barrier, so
    a missing barrier, a shuffle some lanes skip, or a shuffle that reads
    a lane the block does not have or that has exited (a NaN is read)
    shows up in the results. It is not a model of the GPU's memory
    ordering between blocks, nor of its speed.

    With `export-kernels`, the output is the virtual CUDA device's image
    (`gptc --device virtual-cuda`, docs/Runtime.md): each kernel's thunk is
    exported as `gptc_kernel_<name>` and described by a constant
    `gptc_kernel_info_<name>` of i64s: whether it synchronizes, its
    `nvvm.maxntid` (0: none), the bytes of shared memory it declares, its
    parameter count, then per parameter the
    bytes a launch passes (the largest over its launches; minus its bytes
    for a scalar, 0 when not static) and whether the kernel may write through it (not
    `llvm.readonly`). The host functions are erased: the runtime replays
    the launches itself.
  }];
  let options = [
    Option<"exportKernels", "export-kernels", "bool", /*default=*/"false",
           "Export each kernel's thunk and description for the virtual "
           "CUDA device, and drop the host functions">
  ];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

#endif // GPTC_TARGET_CUDA_PASSES_TD
