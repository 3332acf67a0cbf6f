//===- MapReductions.cpp - Warp and block reductions ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-gpu-map-reductions and gptc-gpu-lower-reductions; see
// include/gptc/Target/CUDA/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/Passes.h"

#include "Indexing.h"
#include "Reductions.h"

#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCGPUMAPREDUCTIONSPASS
#define GEN_PASS_DEF_GPTCGPULOWERREDUCTIONSPASS
#include "gptc/Target/CUDA/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;
using gpumap::combine;
using gpumap::identities;
using gpumap::matchReduction;
using gpumap::Reduction;

//===----------------------------------------------------------------------===//
// Matching a reduction
//===----------------------------------------------------------------------===//

static std::optional<gpu::AllReduceOperation> kindOf(Operation *op) {
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(op)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
      .Case<arith::MaximumFOp>([](auto) { return K::MAXIMUMF; })
      .Case<arith::MinimumFOp>([](auto) { return K::MINIMUMF; })
      .Case<arith::MaxNumFOp>([](auto) { return K::MAXNUMF; })
      .Case<arith::MinNumFOp>([](auto) { return K::MINNUMF; })
      .Case<arith::MaxSIOp>([](auto) { return K::MAXSI; })
      .Case<arith::MinSIOp>([](auto) { return K::MINSI; })
      .Case<arith::MaxUIOp>([](auto) { return K::MAXUI; })
      .Case<arith::MinUIOp>([](auto) { return K::MINUI; })
      .Case<arith::AndIOp>([](auto) { return K::AND; })
      .Case<arith::OrIOp>([](auto) { return K::OR; })
      .Case<arith::XOrIOp>([](auto) { return K::XOR; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The reduction `op` is, if the GPU reductions can run it.
std::optional<Reduction> gpumap::matchReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() < 1)
    return std::nullopt;
  // 1. Parallel dimensions, then at least one reduction dimension.
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  int64_t numParallel = 0;
  while (numParallel < static_cast<int64_t>(iterators.size()) &&
         iterators[numParallel] == utils::IteratorType::parallel)
    ++numParallel;
  if (numParallel == static_cast<int64_t>(iterators.size()) ||
      llvm::any_of(ArrayRef(iterators).drop_front(numParallel),
                   [](utils::IteratorType t) {
                     return t != utils::IteratorType::reduction;
                   }))
    return std::nullopt;
  // 2. Static loops; every output indexed by the parallel dimensions in
  //    order, of a 32- or 64-bit scalar element.
  if (!llvm::all_of(op.getStaticLoopRanges(),
                    [](int64_t n) { return !ShapedType::isDynamic(n); }))
    return std::nullopt;
  Reduction r{op, {}, {}, {}, numParallel};
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap outMap = op.getMatchingIndexingMap(&init);
    if (outMap.getNumResults() != numParallel)
      return std::nullopt;
    for (int64_t d = 0; d < numParallel; ++d)
      if (outMap.getResult(d) != getAffineDimExpr(d, op.getContext()))
        return std::nullopt;
    auto outType = dyn_cast<MemRefType>(init.get().getType());
    if (!outType || !outType.getLayout().isIdentity() ||
        !outType.getElementType().isIntOrFloat() ||
        (outType.getElementTypeBitWidth() != 32 &&
         outType.getElementTypeBitWidth() != 64))
      return std::nullopt;
    // 3. The body: out = combiner(out, value), yielded at the output's
    //    place; out used only there, the combiner's result only yielded.
    BlockArgument out = op.getMatchingBlockArgument(&init);
    int64_t index = init.getOperandNumber() - op.getNumDpsInputs();
    Operation *combiner = yield.getOperand(index).getDefiningOp();
    if (!combiner || combiner->getBlock() != &body ||
        combiner->getNumOperands() != 2 || !out.hasOneUse() ||
        out.getUses().begin()->getOwner() != combiner ||
        !combiner->getResult(0).hasOneUse())
      return std::nullopt;
    std::optional<gpu::AllReduceOperation> kind = kindOf(combiner);
    if (!kind || !arith::getNeutralElement(combiner))
      return std::nullopt;
    r.combiners.push_back(combiner);
    r.values.push_back(combiner->getOperand(0) == out
                           ? combiner->getOperand(1)
                           : combiner->getOperand(0));
    r.kinds.push_back(*kind);
  }
  // No combiner may feed another's value (each is one output's own).
  for (Value v : r.values)
    if (llvm::is_contained(r.combiners, v.getDefiningOp()))
      return std::nullopt;
  return r;
}

/// Combines `acc` and `v` as output i's combiner does.
Value gpumap::combine(OpBuilder &b, const Reduction &r, size_t i, Value acc,
                      Value v) {
  IRMapping map;
  map.map(r.combiners[i]->getOperand(0), acc);
  map.map(r.combiners[i]->getOperand(1), v);
  return b.clone(*r.combiners[i], map)->getResult(0);
}

/// Each output's identity (its combiner's neutral element).
SmallVector<Value> gpumap::identities(OpBuilder &b, Location loc,
                                      const Reduction &r) {
  SmallVector<Value> ids;
  for (Operation *combiner : r.combiners)
    ids.push_back(
        arith::ConstantOp::create(b, loc, *arith::getNeutralElement(combiner)));
  return ids;
}

namespace {
constexpr int64_t kWarpSize = 32;
/// The most columns a lane of a row nest may hold in registers (the
/// straight-line code grows with them).
constexpr int64_t kMaxRowRegisters = 128;
constexpr int64_t kBlockReductionThreads = 1024;
/// A column reduction is cut into at most this many chunks of rows, each
/// at least kRowsPerChunk long.
constexpr int64_t kColumnChunks = 64;
constexpr int64_t kRowsPerChunk = 256;
/// The same for a row nest's partial column sums (few rows per column).
constexpr int64_t kPartialRowsPerChunk = 32;
/// A reduction to a scalar of at least this many elements is first cut
/// into at most kScalarPartials strided partial results, each of at least
/// kScalarPerPartial elements (one block of kBlockReductionThreads alone
/// keeps too few loads in flight to stream a large tensor).
constexpr int64_t kScalarSplitAt = 65536;
constexpr int64_t kScalarPartials = 65536;
constexpr int64_t kScalarPerPartial = 16;

/// The body's values at loop indices `ivs`, one per output: each input
/// loaded through its indexing map, the body's ops but the combiners
/// cloned.
SmallVector<Value> valuesAt(OpBuilder &b, Location loc, const Reduction &r,
                            ArrayRef<Value> ivs) {
  linalg::GenericOp op = r.op;
  IRMapping map;
  for (OpOperand *input : op.getDpsInputOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(input);
    if (!isa<MemRefType>(input->get().getType())) {
      map.map(arg, input->get()); // a scalar operand
      continue;
    }
    AffineMap m = op.getMatchingIndexingMap(input);
    SmallVector<Value> indices;
    for (AffineExpr e : m.getResults())
      indices.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(m.getNumDims(), 0, e), ivs));
    map.map(arg, memref::LoadOp::create(b, loc, input->get(), indices));
  }
  for (Operation &inner : op.getRegion().front().without_terminator()) {
    if (llvm::is_contained(r.combiners, &inner))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  SmallVector<Value> values;
  for (Value v : r.values)
    values.push_back(map.lookupOrDefault(v));
  return values;
}

/// A launch of `blocks` x `threads`; the builder left inside its body.
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, int64_t blocks,
                           int64_t threads) {
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value one = index(1);
  auto launch = gpu::LaunchOp::create(b, loc, index(blocks), one, one,
                                      index(threads), one, one);
  b.setInsertionPointToStart(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// Combines, in thread `start`, elements start, start + stride, ... of the
/// reduction dimensions at parallel indices `rowIvs`: a partial per output.
SmallVector<Value> stridedPartials(OpBuilder &b, Location loc,
                                   const Reduction &r,
                                   ArrayRef<int64_t> reduced,
                                   ArrayRef<Value> rowIvs, Value start,
                                   int64_t stride) {
  int64_t count = 1;
  for (int64_t n : reduced)
    count *= n;
  auto loop = scf::ForOp::create(
      b, loc, start, arith::ConstantIndexOp::create(b, loc, count),
      arith::ConstantIndexOp::create(b, loc, stride), identities(b, loc, r));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs(rowIvs);
  llvm::append_range(ivs, delinearize(b, loc, loop.getInductionVar(), reduced));
  SmallVector<Value> values = valuesAt(b, loc, r, ivs), next;
  for (size_t i = 0; i < r.size(); ++i)
    next.push_back(combine(b, r, i, loop.getRegionIterArgs()[i], values[i]));
  scf::YieldOp::create(b, loc, next);
  return SmallVector<Value>(loop.getResults());
}

/// out_i[rowIvs] = combiner_i(out_i[rowIvs], totals[i]) for every output,
/// in the thread `leader`.
void writeOnce(OpBuilder &b, Location loc, const Reduction &r, Value leader,
               ArrayRef<Value> rowIvs, ArrayRef<Value> totals) {
  auto ifLeader = scf::IfOp::create(b, loc, leader, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifLeader.thenBlock()->getTerminator());
  for (size_t i = 0; i < r.size(); ++i) {
    Value old = memref::LoadOp::create(b, loc, r.output(i), rowIvs);
    memref::StoreOp::create(b, loc, combine(b, r, i, old, totals[i]),
                            r.output(i), rowIvs);
  }
}

void buildLaunch(const Reduction &r, int64_t warpsPerBlock) {
  linalg::GenericOp op = r.op;
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  ArrayRef<int64_t> parallel = ArrayRef(ranges).take_front(r.numParallel);
  ArrayRef<int64_t> reduced = ArrayRef(ranges).drop_front(r.numParallel);
  OpBuilder b(op);
  auto c = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  if (parallel.empty()) {
    // A reduction to a scalar: one block, strided partials, all_reduce.
    gpu::LaunchOp launch = createLaunch(b, loc, 1, kBlockReductionThreads);
    Value tid = launch.getThreadIds().x;
    SmallVector<Value> totals =
        stridedPartials(b, loc, r, reduced, {}, tid, kBlockReductionThreads);
    for (size_t i = 0; i < r.size(); ++i)
      totals[i] = gpu::AllReduceOp::create(
          b, loc, totals[i],
          gpu::AllReduceOperationAttr::get(b.getContext(), r.kinds[i]),
          /*uniform=*/true);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, c(0));
    writeOnce(b, loc, r, first, {}, totals);
  } else {
    // A warp per row.
    int64_t rows = 1;
    for (int64_t n : parallel)
      rows *= n;
    int64_t warps = std::max<int64_t>(1, std::min(warpsPerBlock, rows));
    gpu::LaunchOp launch =
        createLaunch(b, loc, (rows + warps - 1) / warps, warps * kWarpSize);
    Value tid = launch.getThreadIds().x;
    Value warp = arith::DivUIOp::create(b, loc, tid, c(kWarpSize));
    Value lane = arith::RemUIOp::create(b, loc, tid, c(kWarpSize));
    Value row = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().x, c(warps)),
        warp);
    // The guard is uniform over a warp, as the shuffles need.
    Value inRange =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, c(rows));
    auto ifRow = scf::IfOp::create(b, loc, inRange, false);
    b.setInsertionPoint(ifRow.thenBlock()->getTerminator());
    SmallVector<Value> rowIvs = delinearize(b, loc, row, parallel);
    SmallVector<Value> totals =
        stridedPartials(b, loc, r, reduced, rowIvs, lane, kWarpSize);
    for (size_t i = 0; i < r.size(); ++i)
      totals[i] = gpu::SubgroupReduceOp::create(b, loc, totals[i], r.kinds[i],
                                                /*uniform=*/true);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c(0));
    writeOnce(b, loc, r, first, rowIvs, totals);
  }
  op.erase();
}

/// A reduction over leading dimensions (a bias gradient's column sums:
/// R rows reduced for each of P columns) in two deterministic phases of
/// plain parallel loops, so that gptc-gpu-map-kernel gives them a thread
/// per (chunk, column) and then per column: the rows are cut into
/// `chunks` chunks whose partial results a temporary holds, then each
/// column combines its chunks into the output. Neighbouring threads still
/// read neighbouring columns, and the reduction has `chunks` times the
/// threads a thread per column would have.
void splitColumns(const Reduction &r, int64_t chunks) {
  linalg::GenericOp op = r.op;
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  ArrayRef<int64_t> parallel = ArrayRef(ranges).take_front(r.numParallel);
  ArrayRef<int64_t> reduced = ArrayRef(ranges).drop_front(r.numParallel);
  int64_t columns = 1, rows = 1;
  for (int64_t n : parallel)
    columns *= n;
  for (int64_t n : reduced)
    rows *= n;
  int64_t perChunk = (rows + chunks - 1) / chunks;
  OpBuilder b(op);
  auto c = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  SmallVector<Value> partials;
  for (size_t i = 0; i < r.size(); ++i) {
    Type element = cast<MemRefType>(r.output(i).getType()).getElementType();
    partials.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get({chunks, columns}, element)));
  }
  // 1. partials_i[chunk, column]: the chunk's rows of the column.
  {
    auto loop = scf::ParallelOp::create(b, loc, ValueRange{c(0), c(0)},
                                        ValueRange{c(chunks), c(columns)},
                                        ValueRange{c(1), c(1)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value chunk = loop.getInductionVars()[0],
          column = loop.getInductionVars()[1];
    Value begin = arith::MulIOp::create(b, loc, chunk, c(perChunk));
    Value end = arith::MinUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, begin, c(perChunk)), c(rows));
    auto rowLoop =
        scf::ForOp::create(b, loc, begin, end, c(1), identities(b, loc, r));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(rowLoop.getBody());
      SmallVector<Value> ivs = delinearize(b, loc, column, parallel);
      llvm::append_range(
          ivs, delinearize(b, loc, rowLoop.getInductionVar(), reduced));
      SmallVector<Value> values = valuesAt(b, loc, r, ivs), next;
      for (size_t i = 0; i < r.size(); ++i)
        next.push_back(
            combine(b, r, i, rowLoop.getRegionIterArgs()[i], values[i]));
      scf::YieldOp::create(b, loc, next);
    }
    for (size_t i = 0; i < r.size(); ++i)
      memref::StoreOp::create(b, loc, rowLoop.getResult(i), partials[i],
                              ValueRange{chunk, column});
  }
  // 2. out_i[column] = combiner_i(out_i[column], the column's partials).
  {
    auto loop = scf::ParallelOp::create(b, loc, c(0), c(columns), c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value column = loop.getInductionVars()[0];
    auto chunkLoop = scf::ForOp::create(b, loc, c(0), c(chunks), c(1),
                                        identities(b, loc, r));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(chunkLoop.getBody());
      SmallVector<Value> next;
      for (size_t i = 0; i < r.size(); ++i) {
        Value part = memref::LoadOp::create(
            b, loc, partials[i],
            ValueRange{chunkLoop.getInductionVar(), column});
        next.push_back(
            combine(b, r, i, chunkLoop.getRegionIterArgs()[i], part));
      }
      scf::YieldOp::create(b, loc, next);
    }
    SmallVector<Value> ivs = delinearize(b, loc, column, parallel);
    for (size_t i = 0; i < r.size(); ++i) {
      Value old = memref::LoadOp::create(b, loc, r.output(i), ivs);
      memref::StoreOp::create(b, loc,
                              combine(b, r, i, old, chunkLoop.getResult(i)),
                              r.output(i), ivs);
    }
  }
  op.erase();
}

/// A reduction to a scalar in two deterministic
/// phases: plain parallel loops that gptc-gpu-map-kernel gives a thread
/// per partial (partial k combines elements k, k + partials, ..., so that
/// neighbouring threads read neighbouring elements), then a new
/// reduction of the partials into the output, returned (the caller
/// splits it again, or launches it as one block).
linalg::GenericOp splitScalar(const Reduction &r, int64_t partials) {
  linalg::GenericOp op = r.op;
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  OpBuilder b(op);
  auto c = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  SmallVector<Value> buffers, outputs;
  for (size_t i = 0; i < r.size(); ++i) {
    outputs.push_back(r.output(i));
    Type element = cast<MemRefType>(r.output(i).getType()).getElementType();
    buffers.push_back(
        memref::AllocOp::create(b, loc, MemRefType::get({partials}, element)));
  }
  // 1. buffers_i[k]: elements k, k + partials, ... combined.
  {
    auto loop = scf::ParallelOp::create(b, loc, c(0), c(partials), c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value k = loop.getInductionVars()[0];
    SmallVector<Value> sums =
        stridedPartials(b, loc, r, ranges, {}, k, partials);
    for (size_t i = 0; i < r.size(); ++i)
      memref::StoreOp::create(b, loc, sums[i], buffers[i], ValueRange{k});
  }
  // 2. out_i = combiner_i(out_i, the partials), as a reduction of its own.
  MLIRContext *ctx = b.getContext();
  AffineMap all = AffineMap::getMultiDimIdentityMap(1, ctx),
            none = AffineMap::get(1, 0, ctx);
  SmallVector<AffineMap> maps(r.size(), all);
  maps.append(r.size(), none);
  auto next = linalg::GenericOp::create(
      b, loc, TypeRange{}, buffers, outputs, maps,
      SmallVector<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> results;
        for (size_t i = 0; i < r.size(); ++i)
          results.push_back(combine(nb, r, i, args[r.size() + i], args[i]));
        linalg::YieldOp::create(nb, nloc, results);
      });
  op.erase();
  return next;
}

struct GptcGpuMapReductionsPass final
    : mlir::gptc::impl::GptcGpuMapReductionsPassBase<GptcGpuMapReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    if (func.isExternal())
      return;
    if (warpsPerBlock < 1 || warpsPerBlock > 32) {
      func.emitOpError("warps-per-block must be in [1, 32], got ")
          << static_cast<int64_t>(warpsPerBlock);
      return signalPassFailure();
    }
    if (rowRegisters < 0 || rowRegisters > kMaxRowRegisters) {
      func.emitOpError("row-registers must be in [0, ")
          << kMaxRowRegisters << "], got "
          << static_cast<int64_t>(rowRegisters);
      return signalPassFailure();
    }
    if (rowLanes != 1 && rowLanes != kWarpSize) {
      func.emitOpError("row-lanes must be 1 or 32, got ")
          << static_cast<int64_t>(rowLanes);
      return signalPassFailure();
    }
    // A copy bufferization left (a result computed in a temporary, a
    // shared initial value) is a linalg.generic like the others, so that
    // it maps onto threads or joins a row kernel.
    {
      IRRewriter rewriter(func.getContext());
      func.walk([&](memref::CopyOp copy) {
        rewriter.setInsertionPoint(copy);
        auto linalgCopy = linalg::CopyOp::create(
            rewriter, copy.getLoc(), copy.getSource(), copy.getTarget());
        rewriter.eraseOp(copy);
        (void)linalg::generalizeNamedOp(rewriter, linalgCopy);
      });
    }
    // A splat constant bufferization made a global (a loss gradient's seed
    // of 1.0, a zero) is written on the device instead: the kernels carry
    // no data the runtime would have to upload.
    SymbolTableCollection symbols;
    func.walk([&](memref::GetGlobalOp get) {
      auto global = symbols.lookupNearestSymbolFrom<memref::GlobalOp>(
          get, get.getNameAttr());
      auto value = global ? dyn_cast_or_null<SplatElementsAttr>(
                                global.getInitialValueAttr())
                          : nullptr;
      if (!value || !global.getConstant())
        return;
      OpBuilder b(get);
      Location loc = get.getLoc();
      auto buffer = memref::AllocOp::create(b, loc, get.getType());
      Value scalar =
          arith::ConstantOp::create(b, loc, value.getSplatValue<TypedAttr>());
      linalg::FillOp::create(b, loc, scalar, buffer.getResult());
      get.replaceAllUsesWith(buffer.getResult());
      get.erase();
    });
    // Parallel loops first: a reduction over the leading dimensions (a
    // bias gradient's column sums) becomes a thread per output whose
    // neighbours read neighbouring elements, rather than one thread
    // running every output's loop.
    SmallVector<linalg::GenericOp> rowReductions, columnReductions;
    IRRewriter rewriter(func.getContext());
    for (Block &block : func.getFunctionBody())
      for (auto op :
           llvm::make_early_inc_range(block.getOps<linalg::GenericOp>())) {
        SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
        if (!llvm::is_contained(iterators, utils::IteratorType::reduction))
          continue;
        SmallVector<unsigned> order;
        for (auto kind :
             {utils::IteratorType::parallel, utils::IteratorType::reduction})
          for (unsigned d = 0; d < iterators.size(); ++d)
            if (iterators[d] == kind)
              order.push_back(d);
        bool innermostReduced =
            iterators.back() == utils::IteratorType::reduction;
        if (!llvm::equal(order, llvm::seq<unsigned>(0, iterators.size()))) {
          rewriter.setInsertionPoint(op);
          FailureOr<linalg::GenericOp> swapped =
              linalg::interchangeGenericOp(rewriter, op, order);
          if (failed(swapped))
            continue;
          op = *swapped;
        }
        // Only a reduction over the innermost, contiguous dimension is a
        // warp's: its lanes read neighbouring elements. One over leading
        // dimensions with many rows is split into chunks.
        if (innermostReduced)
          rowReductions.push_back(op);
        else
          columnReductions.push_back(op);
      }
    // Runs of row ops (a layer norm's sums and normalization, a loss's
    // log-sum-exp) become one warp-per-row nest each.
    // (A row nest's warps' partial column sums, ~1024 rows of them, are
    // cut into chunks of fewer rows than a tensor's: a thread per column
    // and chunk runs its rows one after another. Either is cut only from
    // 512 rows on.)
    SmallVector<linalg::GenericOp> partialSums;
    if (fuseRows)
      gpumap::fuseRowKernels(func, rowReductions, columnReductions, partialSums,
                             warpsPerBlock, rowLanes, rowRegisters);
    for (auto [list, rowsPerChunk] :
         {std::make_pair(&columnReductions, kRowsPerChunk),
          std::make_pair(&partialSums, kPartialRowsPerChunk)})
      for (linalg::GenericOp op : *list) {
        std::optional<Reduction> r = matchReduction(op);
        if (!r)
          continue;
        // The ranges in a local: a range-for over a view of the returned
        // vector would read it after it is destroyed.
        SmallVector<int64_t> ranges = op.getStaticLoopRanges();
        int64_t rows = 1;
        for (int64_t n : ArrayRef(ranges).drop_front(r->numParallel))
          rows *= n;
        int64_t chunks = std::min<int64_t>(kColumnChunks, rows / rowsPerChunk);
        if (chunks >= 2 && rows >= 2 * kRowsPerChunk)
          splitColumns(*r, chunks);
      }
    // A large reduction to a scalar (a tensor's sum of squares for the
    // gradient norm) is cut into strided partials first, again while the
    // partials are many: the launch below then reduces a few thousand.
    for (linalg::GenericOp &op : rowReductions) {
      while (std::optional<Reduction> r = matchReduction(op)) {
        if (r->numParallel != 0)
          break;
        int64_t count = 1;
        for (int64_t n : op.getStaticLoopRanges())
          count *= n;
        if (count < kScalarSplitAt)
          break;
        op = splitScalar(*r,
                         std::min(kScalarPartials, count / kScalarPerPartial));
      }
    }
    if (!launchReductions)
      return;
    SmallVector<Reduction> reductions;
    for (linalg::GenericOp op : rowReductions)
      if (std::optional<Reduction> r = matchReduction(op))
        reductions.push_back(*r);
    for (const Reduction &r : reductions)
      buildLaunch(r, warpsPerBlock);
  }
};

struct GptcGpuLowerReductionsPass final
    : mlir::gptc::impl::GptcGpuLowerReductionsPassBase<
          GptcGpuLowerReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateGpuAllReducePatterns(patterns);
    populateGpuLowerSubgroupReduceToShufflePatterns(patterns, kWarpSize);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
