//===- CommReport.h - What a sharded step communicates ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lists the `shard` collectives of a function with the bytes of their
// tensors and the bytes each rank sends with bandwidth-optimal (ring)
// algorithms, for G bytes and N ranks in the group:
//   all-reduce      2 (N-1)/N x G   (reduce-scatter, then all-gather)
//   reduce-scatter    (N-1)/N x G   (G: the whole input)
//   all-gather        (N-1)/N x G   (G: the whole result)
//   all-slice         0             (each rank keeps its block)
//   send              G             (pipeline stages; N = 2)
//   recv              0             (counted at the sender)
// A function's calls count their callees' collectives once per call.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_COMMREPORT_H
#define GPTC_ANALYSIS_COMMREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::gptc {

struct Collective {
  Operation *op;
  std::string kind;          ///< "all_reduce", ...
  std::vector<int64_t> axes; ///< grid axes
  int64_t ranks = 1;         ///< N
  int64_t bytes = 0;         ///< G
  double volume = 0;         ///< bytes sent per rank, per run
  /// Runs per step: the product of the enclosing gptc.accumulate ops'
  /// microbatches (1 outside the microbatch loop), summed over the calls
  /// that reach it.
  int64_t runs = 1;
};

/// The collectives of `func` in program order; fails on a collective whose
/// grid or shapes are not static.
FailureOr<std::vector<Collective>> collectCollectives(func::FuncOp func);

/// Prints the report of `func` (a table, then totals by kind).
LogicalResult printCommReport(func::FuncOp func, raw_ostream &os);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_COMMREPORT_H
