//===- Indexing.h - Index arithmetic of the GPU mappings --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_TARGET_CUDA_INDEXING_H
#define GPTC_LIB_TARGET_CUDA_INDEXING_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::gptc {

/// `linear` split into indices of `extents`, row-major (the last index
/// varies fastest): remainders and quotients by the constant extents.
inline SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                                      ArrayRef<int64_t> extents) {
  SmallVector<Value> ivs(extents.size());
  for (int64_t d = static_cast<int64_t>(extents.size()) - 1; d >= 0; --d) {
    Value extent = arith::ConstantIndexOp::create(b, loc, extents[d]);
    ivs[d] = d == 0 ? linear : arith::RemUIOp::create(b, loc, linear, extent);
    if (d > 0)
      linear = arith::DivUIOp::create(b, loc, linear, extent);
  }
  return ivs;
}

/// The buffer `v` views (through subviews, reshapes, casts), or `v`.
inline Value viewSource(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Marks `blocks` and `threads` (one dimension each) as blocks x and
/// threads x: the mapping convert-parallel-loops-to-gpu reads, and that
/// gptc-gpu-map-kernel leaves alone.
inline LogicalResult setBlockThreadMapping(scf::ParallelOp blocks,
                                           scf::ParallelOp threads) {
  MLIRContext *ctx = blocks.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  auto onto = [&](gpu::Processor p) {
    return gpu::ParallelLoopDimMappingAttr::get(ctx, p, id, id);
  };
  if (failed(gpu::setMappingAttr(blocks, {onto(gpu::Processor::BlockX)})) ||
      failed(gpu::setMappingAttr(threads, {onto(gpu::Processor::ThreadX)})))
    return blocks.emitOpError("cannot be mapped onto GPU blocks");
  return success();
}

} // namespace mlir::gptc

#endif // GPTC_LIB_TARGET_CUDA_INDEXING_H
