//===- RowKernels.cpp - A kernel's row ops as one warp-per-row nest -*- C++
//-*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Part of gptc-gpu-map-reductions (include/gptc/Target/CUDA/Passes.td).
// A layer norm lowers to a row sum, a row sum of squared deviations and an
// elementwise normalization: launched one by one, they read the row three
// times from memory and pass the statistics through temporaries. Here the
// whole run becomes one nest with a warp per row: the per-row values stay
// in registers (all lanes hold them after the warp reduction), a row of
// up to 32 columns a lane is held in registers too (each phase
// straight-line code over it; a wider row is streamed again in each
// phase, while it is in the SM's cache), and memory sees the inputs read
// once and the results written once.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "Reductions.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::gptc;
using namespace mlir::gptc::gpumap;

namespace {

/// Columns a lane of a row nest takes in one iteration of its loops.
constexpr int64_t kRowUnroll = 4;

/// How a row op addresses a buffer, its loops being (rows..., cols...) or,
/// for an op on one value per row, (rows...).
enum class Access {
  Element, ///< the loops' own element: only the lane running it touches it
  Row,     ///< the row's one value
  Other,   ///< anything else (a parameter broadcast over rows, a gather)
};

enum class Kind {
  RowFill,     ///< linalg.fill of a buffer of one value per row
  ElementFill, ///< linalg.fill of a rows x cols buffer
  Elementwise, ///< rows x cols, all parallel
  PerRow,      ///< rows, all parallel: arithmetic on per-row values
  Reduce,      ///< rows parallel, cols reduced
};

struct BufferUse {
  Value buffer;
  Access access;
  bool write;
};

/// The buffers an op reads and writes, as the buffers they view.
struct Effects {
  SmallVector<Value> reads, writes;
};

struct Member {
  Operation *op;
  Kind kind;
  std::optional<Reduction> reduction;
  SmallVector<BufferUse> uses;
  Effects effects;
};

/// The buffer `v` views (through subviews, reshapes, casts).
Value rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

/// An op's effects on buffers: a linalg op's memref inputs and the loads in
/// its body read, its outputs are written; a scalar load reads, a scalar
/// store writes. None for anything else (an op with other effects, or
/// tensors).
std::optional<Effects> effectsOf(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return Effects{{rootOf(load.getMemRef())}, {}};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return Effects{{}, {rootOf(store.getMemRef())}};
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics())
    return std::nullopt;
  Effects e;
  for (OpOperand *input : linalgOp.getDpsInputOperands())
    if (isa<MemRefType>(input->get().getType()))
      e.reads.push_back(rootOf(input->get()));
  for (OpOperand &init : linalgOp.getDpsInitsMutable())
    e.writes.push_back(rootOf(init.get()));
  bool known = true;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    if (auto load = dyn_cast<memref::LoadOp>(inner))
      e.reads.push_back(rootOf(load.getMemRef()));
    else if (!isMemoryEffectFree(inner))
      known = false;
  });
  if (!known)
    return std::nullopt;
  return e;
}

bool conflict(const Effects &a, const Effects &b) {
  auto meets = [](ArrayRef<Value> x, ArrayRef<Value> y) {
    return llvm::any_of(x, [&](Value v) { return llvm::is_contained(y, v); });
  };
  return meets(a.writes, b.reads) || meets(a.writes, b.writes) ||
         meets(b.writes, a.reads);
}

/// `m` addresses the loops' element (identity), the row's value (the
/// first `numRows` loops in order), or other.
Access accessOf(AffineMap m, int64_t numRows) {
  if (m.isIdentity())
    return Access::Element;
  if (m.getNumResults() == numRows &&
      llvm::all_of(llvm::seq<int64_t>(0, numRows), [&](int64_t d) {
        return m.getResult(d) == getAffineDimExpr(d, m.getContext());
      }))
    return Access::Row;
  return Access::Other;
}

/// `op` as an op of a row kernel over `rows` x `cols`, if it can be one.
std::optional<Member> classify(Operation *op, ArrayRef<int64_t> rows,
                               ArrayRef<int64_t> cols,
                               ArrayRef<linalg::GenericOp> rowReductions) {
  std::optional<Effects> effects = effectsOf(op);
  if (!effects)
    return std::nullopt;
  SmallVector<int64_t> space(rows);
  llvm::append_range(space, cols);
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    Value out = fill.getDpsInitOperand(0)->get();
    auto type = dyn_cast<MemRefType>(out.getType());
    if (!type || !type.hasStaticShape())
      return std::nullopt;
    if (type.getShape() == ArrayRef(rows))
      return Member{op,
                    Kind::RowFill,
                    std::nullopt,
                    {{out, Access::Row, true}},
                    *effects};
    if (type.getShape() == ArrayRef(space) && type.getLayout().isIdentity())
      return Member{op,
                    Kind::ElementFill,
                    std::nullopt,
                    {{out, Access::Element, true}},
                    *effects};
    return std::nullopt;
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic)
    return std::nullopt;
  for (Operation &inner : generic.getRegion().front())
    if (inner.getNumRegions() != 0)
      return std::nullopt;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  bool allParallel = generic.getNumReductionLoops() == 0;
  Member m{op, Kind::Elementwise, std::nullopt, {}, *effects};
  if (allParallel && ranges == space) {
    m.kind = Kind::Elementwise;
  } else if (allParallel && ranges == ArrayRef(rows)) {
    m.kind = Kind::PerRow;
  } else if (ranges == space && llvm::is_contained(rowReductions, generic)) {
    m.reduction = matchReduction(generic);
    if (!m.reduction ||
        m.reduction->numParallel != static_cast<int64_t>(rows.size()))
      return std::nullopt;
    m.kind = Kind::Reduce;
  } else {
    return std::nullopt;
  }
  int64_t numRows = static_cast<int64_t>(rows.size());
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    bool write = generic.isDpsInit(&operand);
    Access access = accessOf(generic.getMatchingIndexingMap(&operand), numRows);
    // On per-row loops the identity is the row's value.
    if (m.kind == Kind::PerRow && access == Access::Element)
      access = Access::Row;
    if (write &&
        access != (m.kind == Kind::Elementwise ? Access::Element : Access::Row))
      return std::nullopt;
    m.uses.push_back({operand.get(), access, write});
  }
  generic.getRegion().walk([&](memref::LoadOp load) {
    m.uses.push_back({load.getMemRef(), Access::Other, false});
  });
  return m;
}

/// A run of row ops being collected, and the linalg ops and scalar loads
/// and stores between them that run before it (hoisted: independent of
/// it; they stay where they are) or after it (deferred: a column reduction
/// reading the row statistics; they move after the nest).
struct Group {
  SmallVector<int64_t> rows, cols;
  SmallVector<Member, 8> members;
  SmallVector<Operation *> deferred;
  SmallVector<Effects> deferredEffects;
  Effects effects;
  /// Per buffer the members address: how, through which value, and
  /// whether they write it.
  struct Seen {
    Access access;
    Value through;
    bool mixed = false, written = false;
  };
  llvm::MapVector<Value, Seen> seen;
  bool hasReduce = false;

  /// Adds `m` if the run stays correct with it: every buffer the run
  /// writes is addressed one way only, the element or the row (so that the
  /// lane that wrote an element is the one that reads it, and per-row
  /// values are registers), never through a view; and `m` may run before
  /// the deferred ops that preceded it.
  bool tryAdd(const Member &m) {
    for (const Effects &d : deferredEffects)
      if (conflict(m.effects, d))
        return false;
    llvm::MapVector<Value, Seen> next = seen;
    for (const BufferUse &use : m.uses) {
      Value root = rootOf(use.buffer);
      auto [it, inserted] = next.insert({root, {use.access, use.buffer}});
      if (!inserted &&
          (it->second.access != use.access || it->second.through != use.buffer))
        it->second.mixed = true;
      it->second.written |= use.write;
    }
    for (auto &[root, s] : next)
      if (s.written &&
          (s.mixed || s.access == Access::Other || s.through != root))
        return false;
    seen = std::move(next);
    members.push_back(m);
    llvm::append_range(effects.reads, m.effects.reads);
    llvm::append_range(effects.writes, m.effects.writes);
    hasReduce |= m.kind == Kind::Reduce;
    return true;
  }

  /// Whether `e` may run before the whole run: it conflicts with no
  /// member so far and no deferred op (which would now follow it).
  bool canHoist(const Effects &e) const {
    if (conflict(e, effects))
      return false;
    return llvm::none_of(deferredEffects,
                         [&](const Effects &d) { return conflict(e, d); });
  }
};

/// The run of row ops over `rows` x `cols` from `start` on.
Group collect(Operation *start, ArrayRef<int64_t> rows, ArrayRef<int64_t> cols,
              ArrayRef<linalg::GenericOp> rowReductions) {
  Group g;
  g.rows.assign(rows.begin(), rows.end());
  g.cols.assign(cols.begin(), cols.end());
  for (Operation *op = start; op; op = op->getNextNode()) {
    if (op->hasTrait<OpTrait::IsTerminator>())
      break;
    if (isa<memref::AllocOp>(op) ||
        (isMemoryEffectFree(op) && op->getNumRegions() == 0))
      continue;
    if (std::optional<Member> m = classify(op, rows, cols, rowReductions))
      if (g.tryAdd(*m))
        continue;
    if (g.members.empty())
      break;
    std::optional<Effects> e = effectsOf(op);
    if (!e)
      break;
    if (g.canHoist(*e))
      continue;
    // A deferred op moves after the nest: nothing may use its results.
    if (op->getNumResults() != 0)
      break;
    g.deferred.push_back(op);
    g.deferredEffects.push_back(*e);
  }
  return g;
}

/// Builds a group's loop nest in place of its ops.
class RowKernelBuilder {
public:
  RowKernelBuilder(Group &g, int64_t warpsPerBlock, int64_t lanes,
                   int64_t registerColumns)
      : g(g), lanes(lanes) {
    for (int64_t n : g.rows)
      numRows *= n;
    for (int64_t n : g.cols)
      numCols *= n;
    warps = std::max<int64_t>(1, std::min(warpsPerBlock, numRows));
    if (numCols % lanes == 0 && numCols / lanes <= registerColumns)
      held = numCols / lanes;
  }

  void build();

private:
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// The row's value of `buffer`: what the run computed last, else loaded
  /// once (all lanes hold it).
  Value rowValue(Value buffer) {
    auto it = current.find(buffer);
    if (it != current.end())
      return it->second;
    Value v = memref::LoadOp::create(b, loc, buffer, rowIvs);
    current[buffer] = v;
    return v;
  }

  /// Indices of `operand` at loop indices `ivs`.
  SmallVector<Value> indicesAt(linalg::GenericOp op, OpOperand &operand,
                               ArrayRef<Value> ivs) {
    AffineMap m = op.getMatchingIndexingMap(&operand);
    SmallVector<Value> indices;
    for (AffineExpr e : m.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(m.getNumDims(), 0, e), ivs));
    return indices;
  }

  /// Whether `op`'s body, but the ops in `skip`, uses `operand`'s block
  /// argument, or `results` holds it.
  static bool isArgUsed(linalg::GenericOp op, OpOperand &operand,
                        ArrayRef<Operation *> skip, ArrayRef<Value> results) {
    BlockArgument a = op.getMatchingBlockArgument(&operand);
    return llvm::is_contained(results, a) ||
           llvm::any_of(a.getUsers(), [&](Operation *user) {
             return !llvm::is_contained(skip, user);
           });
  }

  /// Clones `op`'s body at loop indices `ivs` but the ops in `skip`; each
  /// block argument used (or in `results`) is `arg(operand)`. Returns the
  /// mapping.
  IRMapping cloneBody(linalg::GenericOp op, ArrayRef<Value> ivs,
                      function_ref<Value(OpOperand &)> arg,
                      ArrayRef<Operation *> skip = {},
                      ArrayRef<Value> results = {}) {
    IRMapping map;
    for (OpOperand &operand : op->getOpOperands())
      if (isArgUsed(op, operand, skip, results))
        map.map(op.getMatchingBlockArgument(&operand), arg(operand));
    for (Operation &inner : op.getRegion().front().without_terminator()) {
      if (llvm::is_contained(skip, &inner))
        continue;
      if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
        map.map(idx.getResult(), ivs[idx.getDim()]);
        continue;
      }
      b.clone(inner, map);
    }
    return map;
  }

  /// The value of `operand` of `op` at column `u` of the lane's held
  /// columns (`ivs`): what the lane loaded or stored there last, else
  /// loaded now.
  Value heldValue(linalg::GenericOp op, OpOperand &operand, int64_t u,
                  ArrayRef<Value> ivs) {
    HeldKey key{operand.get(), op.getMatchingIndexingMap(&operand), u};
    Value &v = heldValues[key];
    if (!v)
      v = memref::LoadOp::create(b, loc, operand.get(),
                                 indicesAt(op, operand, ivs));
    return v;
  }

  /// Ends the open loop over the row's columns.
  void flush();
  /// Adds `m` to the run: per-row ops now, column ops to the open loop.
  void add(Member &m);

  Group &g;
  int64_t lanes, warps, numRows = 1, numCols = 1;
  /// Columns each lane holds in registers (0: none): every phase is
  /// straight-line code over them, and an element is loaded once.
  int64_t held = 0;
  /// A buffer (through an indexing map) at a lane's held column: the
  /// value the lane last loaded or stored there. Exact for the buffers the
  /// run does not write, and for those it writes (only the lane itself
  /// touches their elements: Access::Element, one map each).
  using HeldKey = std::tuple<Value, AffineMap, int64_t>;
  DenseMap<HeldKey, Value> heldValues;
  OpBuilder b{g.members.back().op};
  Location loc = g.members.back().op->getLoc();
  Value lane;
  SmallVector<Value> rowIvs;
  /// Each per-row buffer's current value in this row.
  DenseMap<Value, Value> current;
  /// Per-row buffers a reduction of the open loop computes.
  DenseSet<Value> pending;
  /// The open loop's ops, with the per-row values they read (taken when
  /// they joined, as the original order has them) and each reduction's
  /// starting values.
  struct Open {
    Member *m = nullptr;
    DenseMap<OpOperand *, Value> rowArgs;
    SmallVector<Value> inits;
  };
  SmallVector<Open, 4> open;
};

void RowKernelBuilder::add(Member &m) {
  // A per-row value a reduction of the open loop has not finished, read or
  // overwritten, ends the loop.
  for (const BufferUse &use : m.uses)
    if (use.access == Access::Row && pending.contains(use.buffer)) {
      flush();
      break;
    }
  switch (m.kind) {
  case Kind::RowFill: {
    auto fill = cast<linalg::FillOp>(m.op);
    current[fill.getDpsInitOperand(0)->get()] =
        fill.getDpsInputOperand(0)->get();
    return;
  }
  case Kind::PerRow: {
    // Every lane computes the row's values (they are registers).
    auto op = cast<linalg::GenericOp>(m.op);
    IRMapping map = cloneBody(op, rowIvs, [&](OpOperand &operand) -> Value {
      if (!isa<MemRefType>(operand.get().getType()))
        return operand.get();
      if (accessOf(op.getMatchingIndexingMap(&operand), g.rows.size()) !=
          Access::Other)
        return rowValue(operand.get());
      return memref::LoadOp::create(b, loc, operand.get(),
                                    indicesAt(op, operand, rowIvs));
    });
    auto yield = cast<linalg::YieldOp>(op.getRegion().front().getTerminator());
    for (OpOperand &init : op.getDpsInitsMutable())
      current[init.get()] = map.lookupOrDefault(
          yield.getOperand(init.getOperandNumber() - op.getNumDpsInputs()));
    return;
  }
  case Kind::ElementFill:
  case Kind::Elementwise:
  case Kind::Reduce: {
    Open o;
    o.m = &m;
    auto op = dyn_cast<linalg::GenericOp>(m.op);
    for (OpOperand *input :
         op ? op.getDpsInputOperands() : SmallVector<OpOperand *>{}) {
      if (!isa<MemRefType>(input->get().getType()))
        continue;
      AffineMap map = op.getMatchingIndexingMap(input);
      if (accessOf(map, g.rows.size()) == Access::Row) {
        o.rowArgs[input] = rowValue(input->get());
        continue;
      }
      // Read at a place that depends on the row alone (a scalar, a
      // label): once per row. Such a buffer the run does not write.
      bool perRow = llvm::all_of(map.getResults(), [&](AffineExpr e) {
        for (unsigned d = g.rows.size(); d < map.getNumDims(); ++d)
          if (e.isFunctionOfDim(d))
            return false;
        return true;
      });
      if (perRow) {
        SmallVector<Value> ivs(rowIvs);
        ivs.append(g.cols.size(), index(0));
        o.rowArgs[input] = memref::LoadOp::create(b, loc, input->get(),
                                                  indicesAt(op, *input, ivs));
      }
    }
    if (m.kind == Kind::Reduce)
      for (size_t i = 0; i < m.reduction->size(); ++i) {
        o.inits.push_back(rowValue(m.reduction->output(i)));
        pending.insert(m.reduction->output(i));
      }
    open.push_back(std::move(o));
    return;
  }
  }
}

void RowKernelBuilder::flush() {
  if (open.empty())
    return;
  // Lane l runs columns l, l + lanes, ... of every op of the loop in
  // order: an element one op writes, a later one reads in the same lane.
  // When every lane has the same number of columns, the loop takes
  // `unroll` of them an iteration (a constant trip count, straight-line
  // code whose loads the assembler can issue together: a lane's one load
  // at a time would leave the memory idle). When the lane holds its
  // columns in registers, there is no loop: straight-line code over all of
  // them, each element loaded once in the whole run.
  SmallVector<Value> starts;
  for (Open &o : open)
    if (o.m->kind == Kind::Reduce)
      llvm::append_range(starts, identities(b, loc, *o.m->reduction));
  int64_t perLane = numCols % lanes == 0 ? numCols / lanes : 0;
  int64_t unroll = held;
  if (!held) {
    unroll = 1;
    for (int64_t u : {kRowUnroll, kRowUnroll / 2})
      if (perLane && perLane % u == 0) {
        unroll = u;
        break;
      }
  }
  scf::ForOp loop;
  SmallVector<Value> totals;
  {
    OpBuilder::InsertionGuard guard(b);
    SmallVector<Value> partials(starts);
    bool hasYield = false;
    if (!held) {
      loop = perLane ? scf::ForOp::create(b, loc, index(0), index(perLane),
                                          index(unroll), starts)
                     : scf::ForOp::create(b, loc, lane, index(numCols),
                                          index(lanes), starts);
      // Without reductions the builder gave the body its (empty) yield.
      hasYield = loop.getBody()->mightHaveTerminator();
      if (hasYield)
        b.setInsertionPoint(loop.getBody()->getTerminator());
      else
        b.setInsertionPointToStart(loop.getBody());
      partials.assign(loop.getRegionIterArgs().begin(),
                      loop.getRegionIterArgs().end());
    }
    // Each column's indices: lane + u * lanes (held), lane + (k + u) *
    // lanes (a loop of `unroll` columns), or the loop's own.
    SmallVector<SmallVector<Value>> columnIvs;
    for (int64_t u = 0; u < unroll; ++u) {
      Value column;
      if (held)
        column = arith::AddIOp::create(b, loc, lane, index(u * lanes));
      else if (perLane)
        column = arith::AddIOp::create(
            b, loc, lane,
            arith::MulIOp::create(
                b, loc,
                arith::AddIOp::create(b, loc, loop.getInductionVar(), index(u)),
                index(lanes)));
      else
        column = loop.getInductionVar();
      SmallVector<Value> ivs(rowIvs);
      llvm::append_range(ivs, delinearize(b, loc, column, g.cols));
      columnIvs.push_back(std::move(ivs));
    }
    // First every column's loads of buffers the loop does not write, so
    // that they are in flight together (a store between two loads would
    // otherwise wait for the first); then each column's ops in order.
    DenseSet<Value> written;
    for (Open &o : open)
      if (o.m->kind != Kind::Reduce)
        for (OpOperand &init :
             cast<DestinationStyleOpInterface>(o.m->op).getDpsInitsMutable())
          written.insert(init.get());
    DenseMap<std::pair<OpOperand *, int64_t>, Value> preloaded;
    for (int64_t u = 0; u < unroll; ++u)
      for (Open &o : open) {
        auto op = dyn_cast<linalg::GenericOp>(o.m->op);
        if (!op)
          continue;
        ArrayRef<Operation *> skip;
        ArrayRef<Value> results;
        if (o.m->kind == Kind::Reduce) {
          skip = o.m->reduction->combiners;
          results = o.m->reduction->values;
        }
        for (OpOperand *input : op.getDpsInputOperands())
          if (isa<MemRefType>(input->get().getType()) &&
              !o.rowArgs.count(input) && !written.contains(input->get()) &&
              isArgUsed(op, *input, skip, results))
            preloaded[{input, u}] =
                held ? heldValue(op, *input, u, columnIvs[u])
                     : memref::LoadOp::create(
                           b, loc, input->get(),
                           indicesAt(op, *input, columnIvs[u]));
      }
    for (int64_t u = 0; u < unroll; ++u) {
      ArrayRef<Value> ivs = columnIvs[u];
      unsigned next = 0;
      for (Open &o : open) {
        if (o.m->kind == Kind::ElementFill) {
          auto fill = cast<linalg::FillOp>(o.m->op);
          Value value = fill.getDpsInputOperand(0)->get();
          Value buffer = fill.getDpsInitOperand(0)->get();
          memref::StoreOp::create(b, loc, value, buffer, ivs);
          if (held)
            heldValues[{
                buffer,
                AffineMap::getMultiDimIdentityMap(ivs.size(), b.getContext()),
                u}] = value;
          continue;
        }
        auto op = cast<linalg::GenericOp>(o.m->op);
        auto arg = [&](OpOperand &operand) -> Value {
          if (!isa<MemRefType>(operand.get().getType()))
            return operand.get();
          if (Value v = o.rowArgs.lookup(&operand))
            return v;
          if (Value v = preloaded.lookup({&operand, u}))
            return v;
          if (held)
            return heldValue(op, operand, u, ivs);
          return memref::LoadOp::create(b, loc, operand.get(),
                                        indicesAt(op, operand, ivs));
        };
        if (o.m->kind == Kind::Elementwise) {
          IRMapping map = cloneBody(op, ivs, arg);
          auto yield =
              cast<linalg::YieldOp>(op.getRegion().front().getTerminator());
          for (OpOperand &init : op.getDpsInitsMutable()) {
            Value value = map.lookupOrDefault(yield.getOperand(
                init.getOperandNumber() - op.getNumDpsInputs()));
            memref::StoreOp::create(b, loc, value, init.get(),
                                    indicesAt(op, init, ivs));
            if (held)
              heldValues[{init.get(), op.getMatchingIndexingMap(&init), u}] =
                  value;
          }
          continue;
        }
        const Reduction &r = *o.m->reduction;
        IRMapping map = cloneBody(op, ivs, arg, r.combiners, r.values);
        for (size_t i = 0; i < r.size(); ++i, ++next)
          partials[next] = combine(b, r, i, partials[next],
                                   map.lookupOrDefault(r.values[i]));
      }
    }
    if (loop && !hasYield)
      scf::YieldOp::create(b, loc, partials);
    if (loop)
      totals.assign(loop.getResults().begin(), loop.getResults().end());
    else
      totals = partials;
  }
  // The lanes' partials combined (every lane gets the total), then each
  // output's value in this row.
  unsigned k = 0;
  for (Open &o : open) {
    if (o.m->kind != Kind::Reduce)
      continue;
    const Reduction &r = *o.m->reduction;
    for (size_t i = 0; i < r.size(); ++i, ++k) {
      Value total = totals[k];
      if (lanes > 1)
        total = gpu::SubgroupReduceOp::create(b, loc, total, r.kinds[i],
                                              /*uniform=*/true);
      current[r.output(i)] = combine(b, r, i, o.inits[i], total);
      pending.erase(r.output(i));
    }
  }
  open.clear();
}

void RowKernelBuilder::build() {
  // A warp (`lanes` threads) per row, `warps` rows per block.
  auto blocks = scf::ParallelOp::create(
      b, loc, index(0), index((numRows + warps - 1) / warps), index(1));
  b.setInsertionPointToStart(blocks.getBody());
  auto threads =
      scf::ParallelOp::create(b, loc, index(0), index(warps * lanes), index(1));
  b.setInsertionPointToStart(threads.getBody());
  Value tid = threads.getInductionVars()[0];
  lane = arith::RemUIOp::create(b, loc, tid, index(lanes));
  Value row = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, blocks.getInductionVars()[0], index(warps)),
      arith::DivUIOp::create(b, loc, tid, index(lanes)));
  // The guard is uniform over a warp, as the warp reductions need.
  auto ifRow =
      scf::IfOp::create(b, loc,
                        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              row, index(numRows)),
                        /*withElseRegion=*/false);
  b.setInsertionPoint(ifRow.thenBlock()->getTerminator());
  rowIvs = delinearize(b, loc, row, g.rows);
  for (Member &m : g.members)
    add(m);
  flush();
  // Per-row values something else reads (a deferred column reduction, the
  // caller) are stored by lane 0; the others never leave registers.
  DenseSet<Operation *> inRun;
  for (Member &m : g.members)
    inRun.insert(m.op);
  SmallVector<std::pair<Value, Value>> stores;
  for (auto &[root, s] : g.seen) {
    if (!s.written || s.access != Access::Row)
      continue;
    bool local = isa_and_nonnull<memref::AllocOp>(root.getDefiningOp()) &&
                 llvm::all_of(root.getUsers(), [&](Operation *user) {
                   return inRun.contains(user);
                 });
    if (!local)
      stores.push_back({root, current.lookup(root)});
  }
  if (!stores.empty()) {
    auto first = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, index(0)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(first.thenBlock()->getTerminator());
    for (auto [buffer, value] : stores)
      memref::StoreOp::create(b, loc, value, buffer, rowIvs);
  }
  (void)setBlockThreadMapping(blocks, threads);
  // The deferred ops before the run's last op follow the nest now.
  Operation *after = blocks;
  for (Operation *op : g.deferred)
    if (op->isBeforeInBlock(blocks)) {
      op->moveAfter(after);
      after = op;
    }
  // Each temporary once (several members use one; it is erased once).
  llvm::SetVector<Value> allocs;
  for (Member &m : g.members)
    for (Value v : m.op->getOperands())
      if (isa_and_nonnull<memref::AllocOp>(v.getDefiningOp()))
        allocs.insert(v);
  for (Member &m : g.members)
    m.op->erase();
  for (Value v : allocs)
    if (v.use_empty())
      v.getDefiningOp()->erase();
}

} // namespace

void mlir::gptc::gpumap::fuseRowKernels(
    FunctionOpInterface func, SmallVectorImpl<linalg::GenericOp> &rowReductions,
    int64_t warpsPerBlock, int64_t lanes, int64_t registerColumns) {
  if (!llvm::hasSingleElement(func.getFunctionBody()))
    return;
  // Each row reduction not yet in a run anchors one: it starts at the
  // earliest op before it that a run over its rows could begin with (not
  // across scalar code of unknown effects). A
  // run built erases ops, so the search starts over until none is.
  for (bool built = true; built;) {
    built = false;
    for (linalg::GenericOp anchor : llvm::to_vector(rowReductions)) {
      std::optional<Reduction> r = matchReduction(anchor);
      if (!r || r->numParallel == 0)
        continue;
      SmallVector<int64_t> ranges = anchor.getStaticLoopRanges();
      ArrayRef<int64_t> rows = ArrayRef(ranges).take_front(r->numParallel);
      ArrayRef<int64_t> cols = ArrayRef(ranges).drop_front(r->numParallel);
      SmallVector<Operation *> starts;
      for (Operation *op = anchor; op; op = op->getPrevNode()) {
        if (isa<memref::AllocOp>(op) ||
            (isMemoryEffectFree(op) && op->getNumRegions() == 0))
          continue;
        // Ops a run might keep before or after it do not end the search.
        if (classify(op, rows, cols, rowReductions))
          starts.push_back(op);
        else if (!effectsOf(op))
          break;
      }
      for (Operation *start : llvm::reverse(starts)) {
        Group g = collect(start, rows, cols, rowReductions);
        if (llvm::none_of(g.members,
                          [&](const Member &m) { return m.op == anchor; }))
          continue;
        if (g.members.size() < 2)
          break;
        for (const Member &m : g.members)
          if (m.kind == Kind::Reduce)
            llvm::erase(rowReductions, cast<linalg::GenericOp>(m.op));
        RowKernelBuilder(g, warpsPerBlock, lanes, registerColumns).build();
        built = true;
        break;
      }
      if (built)
        break;
    }
  }
}
