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

#include <map>

using namespace mlir;
using namespace mlir::gptc;

static int64_t tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return -1;
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

/// Appends `func`'s collectives, each run `runs` times per step, to `out`:
/// an op met again (a function called more than once) adds its runs to its
/// row; sends and receives of one kind, peer and type share a row.
static LogicalResult collectInto(func::FuncOp func, int64_t runs,
                                 SymbolTableCollection &symbols,
                                 std::vector<Collective> &out,
                                 std::map<std::string, size_t> &rows,
                                 int depth) {
  if (depth > 8)
    return func.emitOpError("calls nest too deep for the report");
  WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
    int64_t loops = 1;
    for (Operation *p = op->getParentOp(); p && p != func; p = p->getParentOp())
      if (auto loop = dyn_cast<AccumulateOp>(p))
        loops *= loop.getMicrobatches();
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
          op, call.getCalleeAttr());
      if (!callee || callee.isExternal())
        return WalkResult::advance();
      return failed(collectInto(callee, runs * loops, symbols, out, rows,
                                depth + 1))
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    }
    Collective c;
    c.op = op;
    // G is the bytes of the whole tensor the collective moves.
    auto record = [&](StringRef kind, FlatSymbolRefAttr gridName,
                      ArrayRef<shard::GridAxis> axes, Type whole, double factor,
                      std::string key, int64_t wholeBytes = -1) -> WalkResult {
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
      c.bytes = wholeBytes >= 0 ? wholeBytes : tensorBytes(whole);
      if (c.bytes < 0) {
        op->emitOpError("needs a static tensor shape for the report");
        return WalkResult::interrupt();
      }
      double n = static_cast<double>(c.ranks);
      // Point to point: the pair; a send moves the whole tensor, a receive
      // nothing of this rank's.
      if (kind == "send" || kind == "recv") {
        c.ranks = 2;
        c.volume = factor * static_cast<double>(c.bytes);
      } else if (kind == "shift") {
        // Every rank sends its tensor to its neighbour on the axis.
        c.volume = n > 1 ? factor * static_cast<double>(c.bytes) : 0.0;
      } else {
        c.volume = factor * (n - 1) / n * static_cast<double>(c.bytes);
      }
      c.runs = runs * loops;
      if (key.empty()) {
        std::string s;
        llvm::raw_string_ostream os(s);
        os << static_cast<const void *>(op);
        key = s;
      }
      auto [it, fresh] = rows.try_emplace(key, out.size());
      if (fresh)
        out.push_back(c);
      else
        out[it->second].runs += c.runs;
      return WalkResult::advance();
    };
    auto pointToPoint = [&](StringRef kind, ArrayRef<int64_t> peer) {
      std::string key;
      llvm::raw_string_ostream os(key);
      os << kind << (op->hasAttr(kGradientAttrName) ? " gradient" : "") << " "
         << op->getOperand(0).getType();
      for (int64_t p : peer)
        os << " " << p;
      return key;
    };
    return llvm::TypeSwitch<Operation *, WalkResult>(op)
        .Case([&](shard::AllReduceOp o) {
          return record(o.getReduction() == shard::ReductionKind::Max
                            ? "all_reduce_max"
                            : "all_reduce",
                        o.getGridAttr(), o.getGridAxes(),
                        o.getResult().getType(), 2.0, "");
        })
        .Case([&](BucketAllReduceOp o) -> WalkResult {
          // One collective over every tensor of the bucket.
          int64_t bytes = 0;
          for (Value v : o.getInputs()) {
            int64_t b = tensorBytes(v.getType());
            if (b < 0) {
              op->emitOpError("needs a static tensor shape for the report");
              return WalkResult::interrupt();
            }
            bytes += b;
          }
          return record("all_reduce", o.getGridAttr(), o.getGridAxes(),
                        o.getResult(0).getType(), 2.0, "", bytes);
        })
        .Case<BucketAllGatherOp, BucketReduceScatterOp>(
            [&](auto o) -> WalkResult {
              // One collective; G is the whole tensors' bytes together.
              bool gather = isa<BucketAllGatherOp>(o.getOperation());
              int64_t bytes = 0;
              for (Value v : gather ? ValueRange(o.getResults())
                                    : ValueRange(o.getInputs())) {
                int64_t b = tensorBytes(v.getType());
                if (b < 0) {
                  op->emitOpError("needs a static tensor shape for the report");
                  return WalkResult::interrupt();
                }
                bytes += b;
              }
              return record(gather ? "all_gather" : "reduce_scatter",
                            o.getGridAttr(), o.getGridAxes(),
                            o.getInputs()[0].getType(), 1.0, "", bytes);
            })
        .Case([&](shard::ReduceScatterOp o) {
          return record("reduce_scatter", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 1.0, "");
        })
        .Case([&](shard::AllGatherOp o) {
          return record("all_gather", o.getGridAttr(), o.getGridAxes(),
                        o.getResult().getType(), 1.0, "");
        })
        .Case([&](shard::AllSliceOp o) {
          return record("all_slice", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 0.0, "");
        })
        .Case([&](shard::ShiftOp o) {
          return record("shift", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 1.0, "");
        })
        .Case([&](shard::SendOp o) {
          return record("send", o.getGridAttr(), o.getGridAxes(),
                        o.getInput().getType(), 1.0,
                        pointToPoint("send", o.getDestination()));
        })
        .Case([&](shard::RecvOp o) {
          return record("recv", o.getGridAttr(), o.getGridAxes(),
                        o.getResult().getType(), 0.0,
                        pointToPoint("recv", o.getSource().value_or(
                                                 ArrayRef<int64_t>())));
        })
        .Default([](Operation *) { return WalkResult::advance(); });
  });
  return failure(walk.wasInterrupted());
}

FailureOr<std::vector<Collective>>
mlir::gptc::collectCollectives(func::FuncOp func) {
  std::vector<Collective> out;
  std::map<std::string, size_t> rows;
  SymbolTableCollection symbols;
  if (failed(collectInto(func, 1, symbols, out, rows, 0)))
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
        "(N-1)/N G, all_slice 0, send G, recv 0, shift G;\n  a collective in "
        "the "
        "microbatch loop (or in a function called M times) runs xM: its "
        "sent bytes\n  and the totals count every run)\n";
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
    Type shown =
        isa<shard::AllReduceOp, shard::AllGatherOp, shard::RecvOp>(c.op)
            ? c.op->getResult(0).getType()
            : c.op->getOperand(0).getType();
    double runs = static_cast<double>(c.runs);
    std::string tensor =
        isa<BucketAllReduceOp, BucketAllGatherOp, BucketReduceScatterOp>(c.op)
            ? "bucket of " + std::to_string(c.op->getNumOperands())
            : typeString(shown);
    std::string what = purpose(c.op);
    if (c.runs > 1)
      what += (what.empty() ? "x" : " x") + std::to_string(c.runs);
    os << llvm::format("%4zu  %-15s %-6s %3lld  %-16s %12lld %12.0f  %s\n",
                       i + 1, c.kind.c_str(), axes.c_str(),
                       static_cast<long long>(c.ranks), tensor.c_str(),
                       static_cast<long long>(c.bytes), c.volume * runs,
                       what.c_str());
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

/// The parameter `v` is (`gptc.param` of a function argument), or its
/// cast (mixed precision's 16-bit slice), or "".
static std::string parameterName(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (Value source = getCastSource(def))
      v = source;
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return "";
  auto func = dyn_cast_or_null<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getBody().front())
    return "";
  auto name =
      func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
  return name ? name.str() : "";
}

static std::string purpose(Operation *op) {
  // ZeRO-3's gathers name the parameters they rebuild.
  if (isa<shard::AllGatherOp, BucketAllGatherOp>(op)) {
    std::string first = parameterName(op->getOperand(0));
    std::string last = parameterName(op->getOperands().back());
    if (!first.empty() && !last.empty())
      return first == last ? first : first + " .. " + last;
  }
  auto stageOf = [](std::optional<ArrayRef<int64_t>> peer) {
    return peer && peer->size() == 1 ? std::to_string((*peer)[0])
                                     : std::string("?");
  };
  if (auto send = dyn_cast<shard::SendOp>(op))
    return (op->hasAttr(kGradientAttrName) ? "gradient to stage "
                                           : "activation to stage ") +
           stageOf(send.getDestination());
  if (auto recv = dyn_cast<shard::RecvOp>(op))
    return (op->hasAttr(kGradientAttrName) ? "gradient from stage "
                                           : "activation from stage ") +
           stageOf(recv.getSource());
  if (isa<BucketAllReduceOp, BucketAllGatherOp, BucketReduceScatterOp>(op)) {
    // The layers of its first and last tensors (program order).
    SmallVector<std::string> names;
    // (Members at one location fuse into that location.)
    Location loc = op->getLoc();
    auto fused = dyn_cast<FusedLoc>(loc);
    for (Location l : fused ? fused.getLocations() : ArrayRef<Location>(loc))
      if (std::string w = where(l); !w.empty())
        names.push_back(w);
    if (names.empty())
      return isa<BucketAllGatherOp>(op) ? "parameter bucket"
                                        : "gradient bucket";
    if (names.front() == names.back())
      return names.front();
    return names.front() + " .. " + names.back();
  }
  if (Operation *def = op->getOperand(0).getDefiningOp()) {
    if (isa<CountTokensOp>(def))
      return "token count";
    if (isa<SumSquaresOp>(def))
      return "gradient norm";
  }
  return where(op->getLoc());
}
