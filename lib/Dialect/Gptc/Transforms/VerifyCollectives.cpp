//===- VerifyCollectives.cpp - Collectives proven to agree -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-verify-collectives: every group of ranks issues the same
// collectives in the same order (op, axes, types, reduction), and no rank
// waits forever. A rank's program is its pipeline stage's @stage<s>, or
// the one step every rank runs. Ranks that run the same program issue the
// same collectives at the same points, so a group within one stage agrees
// by construction; what remains is the stages, simulated together with
// their sends and receives, a collective over the pipeline axis a barrier
// that compares the stages' ops.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <tuple>

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCVERIFYCOLLECTIVESPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {
/// One communication of a rank's program, in program order.
struct Event {
  enum Kind { Collective, Send, Recv } kind;
  Operation *op;
  /// The op of the program's own function it is issued by: itself, or the
  /// call (of a chunk) that issues it.
  Operation *at = nullptr;
  /// Send/Recv: the peer's index along the axes; the message's key.
  int64_t peer = -1;
  std::tuple<int64_t, int64_t, bool> tag{-1, -1, false};
};

/// The axes a shard op communicates over (its `grid_axes`), if it names
/// the grid `grid`.
std::optional<SmallVector<int16_t>> gridAxes(Operation *op, StringRef grid) {
  auto ref = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!ref || !axes || ref.getValue() != grid)
    return std::nullopt;
  return SmallVector<int16_t>(axes.asArrayRef());
}

int64_t intAttr(Operation *op, StringRef name) {
  auto a = op->getAttrOfType<IntegerAttr>(name);
  return a ? a.getInt() : -1;
}

/// What two ranks must agree on for a collective: the op, its axes, its
/// operand and result types and its attributes but the location's.
bool sameCollective(Operation *a, Operation *b) {
  if (a->getName() != b->getName() ||
      a->getOperandTypes() != b->getOperandTypes() ||
      a->getResultTypes() != b->getResultTypes())
    return false;
  // Every attribute but the schedule's bookkeeping (microbatch, chunk).
  auto significant = [](Operation *op) {
    SmallVector<NamedAttribute> out;
    for (NamedAttribute attr : op->getAttrs())
      if (attr.getName() != kMicrobatchAttrName &&
          attr.getName() != kChunkAttrName)
        out.push_back(attr);
    return DictionaryAttr::get(op->getContext(), out);
  };
  return significant(a) == significant(b);
}

/// A collective in words: "shard.all_reduce of tensor<256x64xf32> over
/// grid axes [0]".
std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName().getStringRef();
  if (op->getNumOperands())
    os << " of " << op->getOperand(0).getType();
  if (auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes")) {
    os << " over grid axes [";
    llvm::interleaveComma(axes.asArrayRef(), os);
    os << "]";
  }
  return s;
}

class Verifier {
public:
  Verifier(ModuleOp module, shard::GridOp grid)
      : module(module), grid(grid), symbols(module) {}

  /// The communication of `region` in program order, calls followed.
  LogicalResult collect(Region &region, std::vector<Event> &out, int depth,
                        Operation *top = nullptr) {
    if (depth > 16)
      return module.emitError("gptc-verify-collectives: calls nested deeper "
                              "than 16");
    for (Block &block : region)
      for (Operation &op : block) {
        if (auto call = dyn_cast<func::CallOp>(op)) {
          auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
          if (callee && !callee.isExternal() &&
              failed(collect(callee.getBody(), out, depth + 1,
                             top ? top : call.getOperation())))
            return failure();
          continue;
        }
        for (Region &inner : op.getRegions())
          if (failed(collect(inner, out, depth + 1, top ? top : &op)))
            return failure();
        std::optional<SmallVector<int16_t>> axes =
            gridAxes(&op, grid.getSymName());
        // An all_slice takes this rank's block: it sends nothing.
        if (!axes || isa<shard::AllSliceOp>(op))
          continue;
        Event e{Event::Collective, &op, top ? top : &op};
        if (auto send = dyn_cast<shard::SendOp>(op)) {
          e.kind = Event::Send;
          ArrayRef<int64_t> to = send.getDestination();
          e.peer = to.empty() ? -1 : to.front();
        } else if (auto recv = dyn_cast<shard::RecvOp>(op)) {
          e.kind = Event::Recv;
          std::optional<ArrayRef<int64_t>> from = recv.getSource();
          e.peer = from && !from->empty() ? from->front() : -1;
        }
        e.tag = {intAttr(&op, kMicrobatchAttrName),
                 intAttr(&op, kChunkAttrName), op.hasAttr(kGradientAttrName)};
        out.push_back(e);
      }
    return success();
  }

  /// Simulates the stages' programs (pipeline axis `axis`).
  LogicalResult simulate(std::vector<std::vector<Event>> &programs,
                         int64_t axis, int64_t &proven) {
    size_t p = programs.size();
    std::vector<size_t> at(p, 0);
    // Messages sent and not yet received: (from, to, tag) -> count.
    std::map<std::tuple<size_t, size_t, std::tuple<int64_t, int64_t, bool>>,
             int64_t>
        inFlight;
    auto crossesStages = [&](const Event &e) {
      auto axes = e.op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      return llvm::is_contained(axes.asArrayRef(), axis);
    };
    for (;;) {
      bool moved = false, done = true;
      for (size_t s = 0; s < p; ++s) {
        while (at[s] < programs[s].size()) {
          const Event &e = programs[s][at[s]];
          if (e.kind == Event::Send) {
            ++inFlight[{s, static_cast<size_t>(e.peer), e.tag}];
          } else if (e.kind == Event::Recv) {
            auto it = inFlight.find({static_cast<size_t>(e.peer), s, e.tag});
            if (it == inFlight.end() || it->second == 0)
              break;
            --it->second;
          } else if (crossesStages(e)) {
            break; // a barrier of the stages
          } else {
            ++proven; // the stage's own group: one program
          }
          ++at[s];
          moved = true;
        }
        done &= at[s] == programs[s].size();
      }
      if (done)
        return success();
      // Every stage waits: in a collective over the stages (all must, and
      // at the same one), or in a receive that nothing will match.
      bool allInCollective = true;
      for (size_t s = 0; s < p; ++s) {
        const Event *e =
            at[s] < programs[s].size() ? &programs[s][at[s]] : nullptr;
        allInCollective &= e && e->kind == Event::Collective;
      }
      if (allInCollective) {
        Operation *first = programs[0][at[0]].op;
        for (size_t s = 1; s < p; ++s) {
          const Event &e = programs[s][at[s]];
          Operation *other = e.op;
          if (!sameCollective(first, other)) {
            InFlightDiagnostic diag =
                e.at->emitError("collectives disagree: stage ")
                << s << " issues " << describe(other)
                << " where stage 0 issues " << describe(first)
                << " (the group's collective #" << crossed + 1 << ")";
            if (e.at != other)
              diag.attachNote(other->getLoc())
                  << "stage " << s << "'s collective, in the call";
            diag.attachNote(programs[0][at[0]].at->getLoc())
                << "stage 0's collective: " << describe(first);
            return failure();
          }
        }
        ++crossed;
        proven += static_cast<int64_t>(p);
        for (size_t s = 0; s < p; ++s)
          ++at[s];
        continue;
      }
      if (!moved) {
        // Name what each stage waits in, at the first waiting one's op.
        std::string waits;
        llvm::raw_string_ostream os(waits);
        Operation *where = nullptr;
        for (size_t s = 0; s < p; ++s) {
          os << (s ? "; " : "") << "stage " << s;
          if (at[s] == programs[s].size()) {
            os << " has finished";
            continue;
          }
          const Event &e = programs[s][at[s]];
          if (!where)
            where = e.at;
          if (e.kind == Event::Recv)
            os << " waits to receive from stage " << e.peer << " (microbatch "
               << std::get<0>(e.tag) << ", chunk " << std::get<1>(e.tag)
               << (std::get<2>(e.tag) ? ", a gradient)" : ", an activation)");
          else
            os << " waits in " << describe(e.op)
               << " (a collective of the stages)";
        }
        return where->emitError("the stages' communication cannot finish: ")
               << waits;
      }
    }
  }

  LogicalResult run(int64_t &proven, int64_t &programsRead) {
    ParallelAttr parallel = getParallelConfig(module);
    int64_t pipelineAxis = -1;
    if (parallel)
      for (auto [i, kind] : llvm::enumerate(parallel.getKinds()))
        if (kind == MeshAxisKind::Pipeline)
          pipelineAxis = static_cast<int64_t>(i);
    std::vector<func::FuncOp> stages;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto s = func->getAttrOfType<IntegerAttr>(kPipelineStageAttrName)) {
        if (static_cast<size_t>(s.getInt()) >= stages.size())
          stages.resize(s.getInt() + 1);
        stages[s.getInt()] = func;
      }
    if (!stages.empty()) {
      if (pipelineAxis < 0)
        return module.emitError("gptc-verify-collectives: stage functions "
                                "without a pipeline axis in gptc.parallel");
      std::vector<std::vector<Event>> programs(stages.size());
      for (auto [s, func] : llvm::enumerate(stages)) {
        if (!func || func.isExternal())
          return module.emitError("gptc-verify-collectives: no @stage")
                 << s << " program";
        if (failed(collect(func.getBody(), programs[s], 0)))
          return failure();
      }
      programsRead = static_cast<int64_t>(stages.size());
      return simulate(programs, pipelineAxis, proven);
    }
    // One program for every rank: its collectives agree by construction;
    // counted for the report.
    SmallVector<func::FuncOp> entries;
    if (auto step = symbols.lookup<func::FuncOp>("train_step"))
      entries.push_back(step);
    else
      for (auto func : module.getOps<func::FuncOp>())
        if (func.isPublic() && !func.isExternal())
          entries.push_back(func);
    for (func::FuncOp func : entries) {
      std::vector<Event> events;
      if (failed(collect(func.getBody(), events, 0)))
        return failure();
      proven += static_cast<int64_t>(events.size());
    }
    programsRead = 1;
    return success();
  }

private:
  ModuleOp module;
  shard::GridOp grid;
  SymbolTable symbols;
  int64_t crossed = 0;
};

struct GptcVerifyCollectivesPass
    : mlir::gptc::impl::GptcVerifyCollectivesPassBase<
          GptcVerifyCollectivesPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid;
    module.walk([&](shard::GridOp op) {
      if (op.getSymName() == "mesh")
        grid = op;
    });
    if (!grid)
      return markAllAnalysesPreserved(); // one device: nothing to prove
    int64_t proven = 0, programs = 0;
    if (failed(Verifier(module, grid).run(proven, programs)))
      return signalPassFailure();
    (void)programs;
    markAllAnalysesPreserved();
  }
};
} // namespace
