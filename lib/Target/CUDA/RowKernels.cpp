//===- RowKernels.cpp - Row ops as warp-per-row nests -----------*- C++ -*-===//
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
// once and the results written once. A held row's column sums deferred
// after the run (layer norm's weight and bias gradients) are added up in
// the nest too, each warp over several rows.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "Reductions.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
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
/// A nest that sums columns over its rows runs at most this many warps,
/// each over at least kMinRowsPerWarp rows, and reduces their partial sums
/// after it.
constexpr int64_t kColumnSumWarps = 1024;
constexpr int64_t kMinRowsPerWarp = 16;

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

/// An op's effects on buffers: a linalg op's memref inputs and the loads in
/// its body read, its outputs are written; a scalar load reads, a scalar
/// store writes. None for anything else (an op with other effects, or
/// tensors).
std::optional<Effects> effectsOf(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return Effects{{viewSource(load.getMemRef())}, {}};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return Effects{{}, {viewSource(store.getMemRef())}};
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics())
    return std::nullopt;
  Effects e;
  for (OpOperand *input : linalgOp.getDpsInputOperands())
    if (isa<MemRefType>(input->get().getType()))
      e.reads.push_back(viewSource(input->get()));
  for (OpOperand &init : linalgOp.getDpsInitsMutable())
    e.writes.push_back(viewSource(init.get()));
  bool known = true;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    if (auto load = dyn_cast<memref::LoadOp>(inner))
      e.reads.push_back(viewSource(load.getMemRef()));
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
      Value root = viewSource(use.buffer);
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

  /// Builds the nest. A deferred column reduction it computes leaves
  /// `columnReductions` (and `rowReductions`), and the reduction of the
  /// warps' partial sums that takes its place joins `partialSums`.
  void build(SmallVectorImpl<linalg::GenericOp> &rowReductions,
             SmallVectorImpl<linalg::GenericOp> &columnReductions,
             SmallVectorImpl<linalg::GenericOp> &partialSums);

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

  /// A deferred column reduction (over the run's rows, for each column)
  /// computed in the nest: each lane sums its held columns over the rows
  /// its warp runs, in registers.
  struct ColumnSum {
    linalg::GenericOp op;
    Reduction r;
  };
  /// The deferred ops as column sums the nest can compute, if all of
  /// them are (rows held in registers; see build()).
  std::optional<SmallVector<ColumnSum>> planColumnSums();
  /// The run's ops on one row (rowIvs): its members, then lane 0's stores.
  void buildRow();

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
    /// Online softmax: the operands that read a maximum the open loop is
    /// still computing (each lane's running one: that partial's index),
    /// and per output the partial of the maximum its sum of exponentials
    /// is shifted by (-1: none) with that maximum's buffer.
    DenseMap<OpOperand *, int64_t> runningMax;
    SmallVector<int64_t> rescaledBy;
    SmallVector<Value> rescaledMax;
  };
  /// How `m`, a sum that reads maxima the open loop is still computing,
  /// can join it as an online softmax: each such maximum used only as
  /// `exp(x - max)` summed into an output. None if not.
  std::optional<Open> planOnline(Member &m);
  /// exp(from - to), 1 where they are equal (both -inf before any column).
  Value rescale(Value from, Value to);
  SmallVector<Open, 4> open;
  /// The deferred ops the nest computes as column sums.
  llvm::SmallPtrSet<Operation *, 4> columnSumOps;
};

void RowKernelBuilder::add(Member &m) {
  // A per-row value a reduction of the open loop has not finished, read or
  // overwritten, ends the loop; except a maximum that a sum only shifts
  // its exponentials by (the softmax's denominator after its maximum):
  // the sum joins the loop and rescales as each lane's maximum grows.
  std::optional<Open> online;
  if (m.kind == Kind::Reduce && llvm::any_of(m.uses, [&](const BufferUse &use) {
        return use.access == Access::Row && pending.contains(use.buffer);
      }))
    online = planOnline(m);
  for (const BufferUse &use : m.uses)
    if (!online && use.access == Access::Row && pending.contains(use.buffer)) {
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
    Open o = online ? std::move(*online) : Open();
    o.m = &m;
    auto op = dyn_cast<linalg::GenericOp>(m.op);
    for (OpOperand *input :
         op ? op.getDpsInputOperands() : SmallVector<OpOperand *>{}) {
      if (!isa<MemRefType>(input->get().getType()) || o.runningMax.count(input))
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
              !o.rowArgs.count(input) && !o.runningMax.count(input) &&
              !written.contains(input->get()) &&
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
      // The partials before this column: a sum shifted by a running
      // maximum rescales from that maximum's value here.
      SmallVector<Value> before(partials);
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
          if (auto it = o.runningMax.find(&operand); it != o.runningMax.end())
            return partials[it->second];
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
        for (size_t i = 0; i < r.size(); ++i, ++next) {
          Value sum = partials[next];
          if (!o.rescaledBy.empty() && o.rescaledBy[i] >= 0) {
            int64_t max = o.rescaledBy[i];
            sum = arith::MulFOp::create(b, loc, sum,
                                        rescale(before[max], partials[max]));
          }
          partials[next] =
              combine(b, r, i, sum, map.lookupOrDefault(r.values[i]));
        }
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
      // A lane's sum shifted by its own maximum, shifted by the row's.
      if (!o.rescaledBy.empty() && o.rescaledBy[i] >= 0)
        total = arith::MulFOp::create(
            b, loc, total,
            rescale(totals[o.rescaledBy[i]], current[o.rescaledMax[i]]));
      if (lanes > 1)
        total = gpu::SubgroupReduceOp::create(b, loc, total, r.kinds[i],
                                              /*uniform=*/true);
      current[r.output(i)] = combine(b, r, i, o.inits[i], total);
      pending.erase(r.output(i));
    }
  }
  open.clear();
}

Value RowKernelBuilder::rescale(Value from, Value to) {
  Value same =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, from, to);
  Value shifted = math::ExpOp::create(
      b, loc, arith::SubFOp::create(b, loc, from, to).getResult());
  Value one =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(from.getType(), 1.0));
  return arith::SelectOp::create(b, loc, same, one, shifted);
}

std::optional<RowKernelBuilder::Open> RowKernelBuilder::planOnline(Member &m) {
  auto op = cast<linalg::GenericOp>(m.op);
  const Reduction &r = *m.reduction;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (pending.contains(init.get()))
      return std::nullopt;
  Open plan;
  plan.rescaledBy.assign(r.size(), -1);
  plan.rescaledMax.assign(r.size(), Value());
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value buffer = input->get();
    if (!pending.contains(buffer))
      continue;
    if (accessOf(op.getMatchingIndexingMap(input), g.rows.size()) !=
        Access::Row)
      return std::nullopt;
    // The open reduction computing it: a maximum, and its partial.
    int64_t partial = 0, found = -1;
    Type maxType;
    for (Open &o : open) {
      if (o.m->kind != Kind::Reduce)
        continue;
      const Reduction &or_ = *o.m->reduction;
      for (size_t i = 0; i < or_.size(); ++i, ++partial)
        if (or_.output(i) == buffer &&
            (or_.kinds[i] == gpu::AllReduceOperation::MAXIMUMF ||
             or_.kinds[i] == gpu::AllReduceOperation::MAXNUMF)) {
          found = partial;
          maxType = or_.values[i].getType();
        }
    }
    if (found < 0)
      return std::nullopt;
    // Used only as exp(x - max), each summed into an output of its own.
    BlockArgument max = op.getMatchingBlockArgument(input);
    if (max.getType() != maxType || !isa<FloatType>(maxType))
      return std::nullopt;
    for (Operation *sub : max.getUsers()) {
      auto diff = dyn_cast<arith::SubFOp>(sub);
      if (!diff || diff.getRhs() != max || diff.getLhs() == max)
        return std::nullopt;
      for (Operation *user : diff->getUsers()) {
        auto exp = dyn_cast<math::ExpOp>(user);
        if (!exp || !exp->hasOneUse())
          return std::nullopt;
        auto at = llvm::find(r.values, exp.getResult());
        if (at == r.values.end())
          return std::nullopt;
        size_t i = at - r.values.begin();
        if (r.kinds[i] != gpu::AllReduceOperation::ADD ||
            exp.getType() != maxType || plan.rescaledBy[i] >= 0)
          return std::nullopt;
        plan.rescaledBy[i] = found;
        plan.rescaledMax[i] = buffer;
      }
    }
    plan.runningMax[input] = found;
  }
  return plan;
}

std::optional<SmallVector<RowKernelBuilder::ColumnSum>>
RowKernelBuilder::planColumnSums() {
  if (!held || g.deferred.empty())
    return std::nullopt;
  int64_t numRowDims = static_cast<int64_t>(g.rows.size()),
          numColDims = static_cast<int64_t>(g.cols.size());
  SmallVector<int64_t> space(g.cols);
  llvm::append_range(space, g.rows);
  SmallVector<ColumnSum> sums;
  Operation *last = g.members.back().op;
  for (auto [op, effects] : llvm::zip(g.deferred, g.deferredEffects)) {
    // A reduction over the rows for each column (its loops interchanged:
    // columns, then rows), outputs the run does not touch.
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || generic.getStaticLoopRanges() != space)
      return std::nullopt;
    std::optional<Reduction> r = matchReduction(generic);
    if (!r || r->numParallel != numColDims)
      return std::nullopt;
    for (Operation &inner : generic.getRegion().front())
      if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner))
        return std::nullopt;
    for (OpOperand &init : generic.getDpsInitsMutable())
      if (g.seen.count(viewSource(init.get())))
        return std::nullopt;
    // Its inputs: the run's elements (rows, then columns), per-row values
    // (rows) or per-column values the run does not write (columns), each
    // addressed as the run addresses it.
    MLIRContext *ctx = generic.getContext();
    auto dims = [&](int64_t from, int64_t count) {
      SmallVector<AffineExpr> e;
      for (int64_t d = from; d < from + count; ++d)
        e.push_back(getAffineDimExpr(d, ctx));
      return e;
    };
    SmallVector<AffineExpr> element = dims(numColDims, numRowDims);
    llvm::append_range(element, dims(0, numColDims));
    for (OpOperand *input : generic.getDpsInputOperands()) {
      if (!isa<MemRefType>(input->get().getType()))
        continue;
      ArrayRef<AffineExpr> results =
          generic.getMatchingIndexingMap(input).getResults();
      Access access;
      if (results == ArrayRef(element))
        access = Access::Element;
      else if (results == ArrayRef(dims(numColDims, numRowDims)))
        access = Access::Row;
      else if (results == ArrayRef(dims(0, numColDims)))
        access = Access::Other;
      else
        return std::nullopt;
      auto it = g.seen.find(viewSource(input->get()));
      if (it != g.seen.end() && it->second.written &&
          (access != it->second.access || it->second.through != input->get()))
        return std::nullopt;
    }
    // Its reads may happen in the nest rather than where it is: nothing
    // between the nest and it writes what it reads (its results are still
    // written where it is, by the reduction of the partials), and it
    // conflicts with no other column sum.
    if (last->isBeforeInBlock(op))
      for (Operation *between = last->getNextNode(); between != op;
           between = between->getNextNode()) {
        if (isa<memref::AllocOp>(between) ||
            (isMemoryEffectFree(between) && between->getNumRegions() == 0))
          continue;
        std::optional<Effects> e = effectsOf(between);
        if (!e || conflict(*e, Effects{effects.reads, {}}))
          return std::nullopt;
      }
    for (const ColumnSum &other : sums)
      if (conflict(*effectsOf(other.op), effects))
        return std::nullopt;
    sums.push_back({generic, *r});
  }
  return sums;
}

void RowKernelBuilder::buildRow() {
  for (Member &m : g.members)
    add(m);
  flush();
  // Per-row values something else reads (a deferred column reduction, the
  // caller) are stored by lane 0; the others never leave registers.
  DenseSet<Operation *> inRun;
  for (Member &m : g.members)
    inRun.insert(m.op);
  for (Operation *op : g.deferred)
    if (columnSumOps.contains(op))
      inRun.insert(op);
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
    OpBuilder::InsertionGuard guard(b);
    auto first = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, index(0)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(first.thenBlock()->getTerminator());
    for (auto [buffer, value] : stores)
      memref::StoreOp::create(b, loc, value, buffer, rowIvs);
  }
}

void RowKernelBuilder::build(
    SmallVectorImpl<linalg::GenericOp> &rowReductions,
    SmallVectorImpl<linalg::GenericOp> &columnReductions,
    SmallVectorImpl<linalg::GenericOp> &partialSums) {
  std::optional<SmallVector<ColumnSum>> sums = planColumnSums();
  if (sums)
    for (const ColumnSum &c : *sums)
      columnSumOps.insert(c.op);
  // A warp (`lanes` threads) per row, `warps` rows per block; with column
  // sums, `totalWarps` warps, warp w running rows w, w + totalWarps, ...
  int64_t numBlocks = (numRows + warps - 1) / warps;
  if (sums) {
    int64_t wanted = std::min(kColumnSumWarps, (numRows + kMinRowsPerWarp - 1) /
                                                   kMinRowsPerWarp);
    numBlocks = std::max<int64_t>(1, (wanted + warps - 1) / warps);
  }
  int64_t totalWarps = numBlocks * warps;
  int64_t rowsPerWarp = (numRows + totalWarps - 1) / totalWarps;
  auto blocks =
      scf::ParallelOp::create(b, loc, index(0), index(numBlocks), index(1));
  b.setInsertionPointToStart(blocks.getBody());
  auto threads =
      scf::ParallelOp::create(b, loc, index(0), index(warps * lanes), index(1));
  b.setInsertionPointToStart(threads.getBody());
  Value tid = threads.getInductionVars()[0];
  lane = arith::RemUIOp::create(b, loc, tid, index(lanes));
  Value warp = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, blocks.getInductionVars()[0], index(warps)),
      arith::DivUIOp::create(b, loc, tid, index(lanes)));
  auto inRange = [&](Value row) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row,
                                 index(numRows));
  };
  if (!sums) {
    // The guard is uniform over a warp, as the warp reductions need.
    auto ifRow = scf::IfOp::create(b, loc, inRange(warp),
                                   /*withElseRegion=*/false);
    b.setInsertionPoint(ifRow.thenBlock()->getTerminator());
    rowIvs = delinearize(b, loc, warp, g.rows);
    buildRow();
  } else {
    // The lane's held columns, and each column sum's partials for them
    // (output-major), carried over the warp's rows.
    SmallVector<SmallVector<Value>> columns;
    for (int64_t u = 0; u < held; ++u)
      columns.push_back(delinearize(
          b, loc, arith::AddIOp::create(b, loc, lane, index(u * lanes)),
          g.cols));
    SmallVector<Value> starts;
    for (const ColumnSum &c : *sums)
      for (Value id : identities(b, loc, c.r))
        starts.append(held, id);
    auto rowLoop = scf::ForOp::create(b, loc, index(0), index(rowsPerWarp),
                                      index(1), starts);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(rowLoop.getBody());
      Value row = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, rowLoop.getInductionVar(),
                                index(totalWarps)),
          warp);
      SmallVector<Value> carried(rowLoop.getRegionIterArgs());
      auto ifRow = scf::IfOp::create(b, loc, TypeRange(ValueRange(carried)),
                                     inRange(row), /*withElseRegion=*/true);
      b.setInsertionPointToStart(ifRow.elseBlock());
      scf::YieldOp::create(b, loc, carried);
      b.setInsertionPointToStart(ifRow.thenBlock());
      rowIvs = delinearize(b, loc, row, g.rows);
      buildRow();
      // Each column sum's terms for this row at the lane's columns: the
      // elements as the lane holds them, the row's values in registers.
      SmallVector<Value> next;
      AffineMap identity = AffineMap::getMultiDimIdentityMap(
          g.rows.size() + g.cols.size(), b.getContext());
      unsigned k = 0;
      for (const ColumnSum &c : *sums) {
        linalg::GenericOp op = c.op;
        SmallVector<Value> partials;
        for (int64_t u = 0; u < held; ++u) {
          SmallVector<Value> ivs(columns[u]);
          llvm::append_range(ivs, rowIvs);
          SmallVector<Value> element(rowIvs);
          llvm::append_range(element, columns[u]);
          auto arg = [&](OpOperand &operand) -> Value {
            Value buffer = operand.get();
            if (!isa<MemRefType>(buffer.getType()))
              return buffer;
            AffineMap m = op.getMatchingIndexingMap(&operand);
            unsigned n = m.getNumResults();
            if (n == g.cols.size() + g.rows.size()) {
              Value &v = heldValues[{buffer, identity, u}];
              if (!v)
                v = memref::LoadOp::create(b, loc, buffer, element);
              return v;
            }
            if (n == g.rows.size() &&
                m.getResult(0) ==
                    getAffineDimExpr(g.cols.size(), b.getContext()))
              return rowValue(buffer);
            return memref::LoadOp::create(b, loc, buffer, columns[u]);
          };
          IRMapping map = cloneBody(op, ivs, arg, c.r.combiners, c.r.values);
          for (size_t i = 0; i < c.r.size(); ++i)
            partials.push_back(map.lookupOrDefault(c.r.values[i]));
        }
        // Output-major, as the carried values are.
        for (size_t i = 0; i < c.r.size(); ++i)
          for (int64_t u = 0; u < held; ++u, ++k)
            next.push_back(
                combine(b, c.r, i, carried[k], partials[u * c.r.size() + i]));
      }
      scf::YieldOp::create(b, loc, next);
      b.setInsertionPointAfter(ifRow);
      scf::YieldOp::create(b, loc, ifRow.getResults());
    }
    // The warp's partials: partial[warp, column] of each output.
    unsigned k = 0;
    SmallVector<SmallVector<Value>> partialBuffers;
    for (const ColumnSum &c : *sums) {
      SmallVector<Value> buffers;
      for (size_t i = 0; i < c.r.size(); ++i) {
        SmallVector<int64_t> shape{totalWarps};
        llvm::append_range(shape, g.cols);
        Type element =
            cast<MemRefType>(c.r.output(i).getType()).getElementType();
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(blocks);
        buffers.push_back(
            memref::AllocOp::create(b, loc, MemRefType::get(shape, element)));
      }
      for (size_t i = 0; i < c.r.size(); ++i)
        for (int64_t u = 0; u < held; ++u, ++k) {
          SmallVector<Value> at{warp};
          llvm::append_range(at, columns[u]);
          memref::StoreOp::create(b, loc, rowLoop.getResult(k), buffers[i], at);
        }
      partialBuffers.push_back(std::move(buffers));
    }
    // Where the column sum was (after the nest if it was before it):
    // out_i = combiner_i(out_i, the warps' partials), a column reduction of
    // its own (over totalWarps rows).
    OpBuilder after(blocks->getContext());
    after.setInsertionPointAfter(blocks);
    MLIRContext *ctx = b.getContext();
    int64_t numColDims = static_cast<int64_t>(g.cols.size());
    SmallVector<AffineExpr> partialExprs{getAffineDimExpr(numColDims, ctx)};
    for (int64_t d = 0; d < numColDims; ++d)
      partialExprs.push_back(getAffineDimExpr(d, ctx));
    AffineMap partialMap = AffineMap::get(numColDims + 1, 0, partialExprs, ctx);
    AffineMap outMap = AffineMap::getMultiDimIdentityMap(numColDims, ctx);
    outMap = AffineMap::get(numColDims + 1, 0, outMap.getResults(), ctx);
    SmallVector<utils::IteratorType> iterators(numColDims,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    for (auto [c, buffers] : llvm::zip(*sums, partialBuffers)) {
      SmallVector<Value> outputs;
      for (size_t i = 0; i < c.r.size(); ++i)
        outputs.push_back(c.r.output(i));
      SmallVector<AffineMap> maps(c.r.size(), partialMap);
      maps.append(c.r.size(), outMap);
      const Reduction &r = c.r;
      if (blocks->isBeforeInBlock(c.op))
        after.setInsertionPoint(c.op);
      auto final = linalg::GenericOp::create(
          after, c.op.getLoc(), TypeRange{}, buffers, outputs, maps, iterators,
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            SmallVector<Value> results;
            for (size_t i = 0; i < r.size(); ++i)
              results.push_back(combine(nb, r, i, args[r.size() + i], args[i]));
            linalg::YieldOp::create(nb, nloc, results);
          });
      after.setInsertionPointAfter(final);
      partialSums.push_back(final);
    }
  }
  (void)setBlockThreadMapping(blocks, threads);
  // The deferred ops before the run's last op follow the nest now; the
  // column sums it computed go.
  Operation *after = blocks;
  for (Operation *op : g.deferred)
    if (!columnSumOps.contains(op) && op->isBeforeInBlock(blocks)) {
      op->moveAfter(after);
      after = op;
    }
  // Each temporary once (several members use one; it is erased once).
  llvm::SetVector<Value> allocs;
  for (Member &m : g.members)
    for (Value v : m.op->getOperands())
      if (isa_and_nonnull<memref::AllocOp>(v.getDefiningOp()))
        allocs.insert(v);
  for (Operation *op : columnSumOps)
    for (Value v : op->getOperands())
      if (isa_and_nonnull<memref::AllocOp>(v.getDefiningOp()))
        allocs.insert(v);
  for (Member &m : g.members)
    m.op->erase();
  for (Operation *op : columnSumOps) {
    llvm::erase(rowReductions, cast<linalg::GenericOp>(op));
    llvm::erase(columnReductions, cast<linalg::GenericOp>(op));
    op->erase();
  }
  for (Value v : allocs)
    if (v.use_empty())
      v.getDefiningOp()->erase();
}

} // namespace

void mlir::gptc::gpumap::fuseRowKernels(
    FunctionOpInterface func, SmallVectorImpl<linalg::GenericOp> &rowReductions,
    SmallVectorImpl<linalg::GenericOp> &columnReductions,
    SmallVectorImpl<linalg::GenericOp> &partialSums, int64_t warpsPerBlock,
    int64_t lanes, int64_t registerColumns) {
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
        RowKernelBuilder(g, warpsPerBlock, lanes, registerColumns)
            .build(rowReductions, columnReductions, partialSums);
        built = true;
        break;
      }
      if (built)
        break;
    }
  }
}
