//===- Reductions.h - Reductions of the GPU mappings ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What gptc-gpu-map-reductions (MapReductions.cpp) and its row kernels
// (RowKernels.cpp) share: how a linalg reduction combines its outputs.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_TARGET_CUDA_REDUCTIONS_H
#define GPTC_LIB_TARGET_CUDA_REDUCTIONS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <optional>

namespace mlir::gptc::gpumap {

/// How a linalg reduction combines, for each of its outputs i:
/// `out_i = combiners[i](out_i, values[i])`. A reduction with several
/// outputs (layer norm's two row sums, its weight and bias gradients) is
/// one loop nest that reads its inputs once for all of them.
struct Reduction {
  linalg::GenericOp op;
  SmallVector<Operation *> combiners;         // in the body
  SmallVector<Value> values;                  // each combiner's operand
  SmallVector<gpu::AllReduceOperation> kinds; // each as a GPU reduction
  int64_t numParallel = 0; // leading parallel loop dimensions

  size_t size() const { return combiners.size(); }
  Value output(size_t i) const {
    return const_cast<linalg::GenericOp &>(op).getDpsInitOperand(i)->get();
  }
};

/// The reduction `op` is, if the GPU reductions can run it: parallel loop
/// dimensions then reduction dimensions, static, 32- or 64-bit outputs
/// indexed by the parallel dimensions, each combined with a value of its
/// own by add, mul, min, max, and, or or xor.
std::optional<Reduction> matchReduction(linalg::GenericOp op);

/// Combines `acc` and `v` as output i's combiner does.
Value combine(OpBuilder &b, const Reduction &r, size_t i, Value acc, Value v);

/// Each output's identity (its combiner's neutral element).
SmallVector<Value> identities(OpBuilder &b, Location loc, const Reduction &r);

/// Fuses each run of a kernel's row ops (row reductions over the innermost
/// dimensions, the elementwise ops over the same rows and columns, the ops
/// and fills on one value per row) into one loop nest of `warpsPerBlock`
/// rows per block and `lanes` threads per row (a warp; 1 runs without
/// warp reductions), already mapped onto blocks and threads. A row of at
/// most `lanes * registerColumns` columns (that divide among the lanes)
/// is held in registers: straight-line code, each element loaded once;
/// the column reductions over the rows that follow such a run (layer
/// norm's weight and bias gradients) are summed in the nest too, each
/// warp over several rows, and their partials reduced after it.
/// Only the reductions in `rowReductions` join a run; those that did are
/// removed from it (and erased with the run's other ops). A column
/// reduction a nest computed leaves `columnReductions`, and the reduction
/// of its partials (a few rows per column) joins `partialSums`.
void fuseRowKernels(FunctionOpInterface func,
                    SmallVectorImpl<linalg::GenericOp> &rowReductions,
                    SmallVectorImpl<linalg::GenericOp> &columnReductions,
                    SmallVectorImpl<linalg::GenericOp> &partialSums,
                    int64_t warpsPerBlock, int64_t lanes,
                    int64_t registerColumns);

} // namespace mlir::gptc::gpumap

#endif // GPTC_LIB_TARGET_CUDA_REDUCTIONS_H
