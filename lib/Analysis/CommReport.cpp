//===- CommReport.cpp - What a sharded step communicates -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/CommReport.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::gptc;

static int64_t tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return -1;
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

FailureOr<std::vector<Collective>>
mlir::gptc::collectCollectives(func::FuncOp func) {
  std::vector<Collective> out;
  SymbolTableCollection symbols;
  WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
    Collective c;
    c.op = op;
    // G is the bytes of the whole tensor the collective moves.
    auto record = [&](StringRef kind, FlatSymbolRefAttr gridName,
                      ArrayRef<shard::GridAxis> axes, Type whole,
                      double factor) -> WalkResult {
      FailureOr<shard::GridOp> grid =
          shard::getGridOrNull(op, gridName, symbols);
      if (failed(grid) || !*grid) {
        op->emitOpError("refers to an unknown grid");
        return WalkResult::interrupt();
      }
      c.kind = kind.str();
      for (shard::GridAxis a : axes) {
        int64_t size = (*grid).getShape()[a];
        if (ShapedType::isDynamic(size)) {
          op->emitOpError("needs a static grid for the report");
          return WalkResult::interrupt();
        }
        c.axes.push_back(a);
        c.ranks *= size;
      }
      c.bytes = tensorBytes(whole);
      if (c.bytes < 0) {
        op->emitOpError("needs a static tensor shape for the report");
        return WalkResult::interrupt();
      }
      double n = static_cast<double>(c.ranks);
      c.volume = factor * (n - 1) / n * static_cast<double>(c.bytes);
      for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
        if (auto loop = dyn_cast<AccumulateOp>(p))
          c.runs *= loop.getMicrobatches();
      out.push_back(c);
      return WalkResult::advance();
    };
    return llvm::TypeSwitch<Operation *, WalkResult>(op)
        .Case([&](shard::AllReduceOp o) {
          return record(o.getReduction() == shard::ReductionKind::Max
                            ? "all_reduce_max"
                            : "all_reduce",
                        o.getGridAttr(), o.getGridAxes(),
                        o.getResult().getType(), 2.0);
        })
        .Case([&](shard::ReduceScatterOp o) {
          return record("reduce_scatter", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 1.0);
        })
        .Case([&](shard::AllGatherOp o) {
          return record("all_gather", o.getGridAttr(), o.getGridAxes(),
                        o.getResult().getType(), 1.0);
        })
        .Case([&](shard::AllSliceOp o) {
          return record("all_slice", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 0.0);
        })
        .Default([](Operation *) { return WalkResult::advance(); });
  });
  if (walk.wasInterrupted())
    return failure();
  return out;
}

/// What the collective carries: the token count, the gradient norm, or the
/// name of the layer its location names.
static std::string purpose(Operation *op);

/// "h.0.mlp.c_fc" for a name location, else "".
static std::string where(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string w = where(l); !w.empty())
        return w;
  return "";
}

static std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto t = cast<RankedTensorType>(type);
  for (int64_t d : t.getShape())
    os << d << "x";
  os << t.getElementType();
  return s;
}

LogicalResult mlir::gptc::printCommReport(func::FuncOp func, raw_ostream &os) {
  FailureOr<std::vector<Collective>> all = collectCollectives(func);
  if (failed(all))
    return failure();
  os << "communication of @" << func.getSymName()
     << " per rank and step (G: bytes of the whole tensor, N: ranks in the "
        "group;\n  all_reduce 2(N-1)/N G, reduce_scatter and all_gather "
        "(N-1)/N G, all_slice 0;\n  a collective in the microbatch loop "
        "runs once per microbatch (xM): its sent bytes and\n  the totals "
        "count every run)\n";
  os << llvm::format("%4s  %-15s %-6s %3s  %-16s %12s %12s  %s\n", "#",
                     "collective", "axes", "N", "tensor", "G bytes",
                     "sent bytes", "for");
  struct Total {
    int64_t count = 0, bytes = 0;
    double volume = 0;
  };
  std::vector<std::pair<std::string, Total>> byKind;
  Total total;
  for (auto [i, c] : llvm::enumerate(*all)) {
    std::string axes = "[";
    for (auto [j, a] : llvm::enumerate(c.axes))
      axes += (j ? "," : "") + std::to_string(a);
    axes += "]";
    Type shown = isa<shard::AllReduceOp, shard::AllGatherOp>(c.op)
                     ? c.op->getResult(0).getType()
                     : c.op->getOperand(0).getType();
    double runs = static_cast<double>(c.runs);
    std::string what = purpose(c.op);
    if (c.runs > 1)
      what += (what.empty() ? "x" : " x") + std::to_string(c.runs);
    os << llvm::format(
        "%4zu  %-15s %-6s %3lld  %-16s %12lld %12.0f  %s\n", i + 1,
        c.kind.c_str(), axes.c_str(), static_cast<long long>(c.ranks),
        typeString(shown).c_str(), static_cast<long long>(c.bytes),
        c.volume * runs, what.c_str());
    auto it = llvm::find_if(byKind, [&](auto &e) { return e.first == c.kind; });
    if (it == byKind.end())
      it = byKind.insert(byKind.end(), {c.kind, Total()});
    Total &t = it->second;
    for (Total *x : {&t, &total}) {
      x->count += c.runs;
      x->bytes += c.bytes * c.runs;
      x->volume += c.volume * runs;
    }
  }
  for (auto &[kind, t] : byKind)
    os << llvm::format("%-15s %4lld collectives %14lld G bytes %14.0f sent "
                       "bytes\n",
                       kind.c_str(), static_cast<long long>(t.count),
                       static_cast<long long>(t.bytes), t.volume);
  os << llvm::format("%-15s %4lld collectives %14lld G bytes %14.0f sent "
                     "bytes\n",
                     "total", static_cast<long long>(total.count),
                     static_cast<long long>(total.bytes), total.volume);
  return success();
}

static std::string purpose(Operation *op) {
  if (Operation *def = op->getOperand(0).getDefiningOp()) {
    if (isa<CountTokensOp>(def))
      return "token count";
    if (isa<SumSquaresOp>(def))
      return "gradient norm";
  }
  return where(op->getLoc());
}
