//===- Indexing.h - Index arithmetic of the GPU mappings --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_TARGET_CUDA_INDEXING_H
#define GPTC_LIB_TARGET_CUDA_INDEXING_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

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

} // namespace mlir::gptc

#endif // GPTC_LIB_TARGET_CUDA_INDEXING_H
