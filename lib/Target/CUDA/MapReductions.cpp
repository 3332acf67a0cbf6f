//===- MapReductions.cpp - Reductions as warp and block reductions -*- C++
//-*-===//
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

namespace {
constexpr int64_t kWarpSize = 32;
constexpr int64_t kBlockReductionThreads = 1024;
/// A column reduction is cut into at most this many chunks of rows, each
/// at least kRowsPerChunk long.
constexpr int64_t kColumnChunks = 64;
constexpr int64_t kRowsPerChunk = 256;

/// How a linalg reduction combines: `out = combiner(out, value)`.
struct Reduction {
  linalg::GenericOp op;
  Operation *combiner;          // in the body
  Value value;                  // the combiner's other operand, in the body
  gpu::AllReduceOperation kind; // the combiner as a GPU reduction
  int64_t numParallel = 0;      // leading parallel loop dimensions
};

std::optional<gpu::AllReduceOperation> kindOf(Operation *op) {
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
std::optional<Reduction> matchReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
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
  // 2. Static loops; the output indexed by the parallel dimensions in
  //    order, a 32-bit scalar element.
  if (!llvm::all_of(op.getStaticLoopRanges(),
                    [](int64_t n) { return !ShapedType::isDynamic(n); }))
    return std::nullopt;
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  if (outMap.getNumResults() != numParallel)
    return std::nullopt;
  for (int64_t d = 0; d < numParallel; ++d)
    if (outMap.getResult(d) != getAffineDimExpr(d, op.getContext()))
      return std::nullopt;
  auto outType = dyn_cast<MemRefType>(init->get().getType());
  if (!outType || !outType.getLayout().isIdentity() ||
      !outType.getElementType().isIntOrFloat() ||
      (outType.getElementTypeBitWidth() != 32 &&
       outType.getElementTypeBitWidth() != 64))
    return std::nullopt;
  // 3. The body: out = combiner(out, value), out used only there.
  Block &body = op.getRegion().front();
  BlockArgument out = op.getMatchingBlockArgument(init);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combiner = yield.getOperand(0).getDefiningOp();
  if (!combiner || combiner->getBlock() != &body ||
      combiner->getNumOperands() != 2 || !out.hasOneUse() ||
      out.getUses().begin()->getOwner() != combiner)
    return std::nullopt;
  std::optional<gpu::AllReduceOperation> kind = kindOf(combiner);
  if (!kind || !arith::getNeutralElement(combiner))
    return std::nullopt;
  Value value = combiner->getOperand(0) == out ? combiner->getOperand(1)
                                               : combiner->getOperand(0);
  return Reduction{op, combiner, value, *kind, numParallel};
}

/// The body's value at loop indices `ivs`: each input loaded through its
/// indexing map, the body's ops cloned up to the combiner.
Value valueAt(OpBuilder &b, Location loc, const Reduction &r,
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
  for (Operation &inner : op.getRegion().front()) {
    if (&inner == r.combiner)
      break;
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  return map.lookupOrDefault(r.value);
}

/// Combines `a` and `b` as the reduction's combiner does.
Value combine(OpBuilder &b, const Reduction &r, Value acc, Value v) {
  IRMapping map;
  map.map(r.combiner->getOperand(0), acc);
  map.map(r.combiner->getOperand(1), v);
  return b.clone(*r.combiner, map)->getResult(0);
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
/// reduction dimensions at parallel indices `rowIvs`.
Value stridedPartial(OpBuilder &b, Location loc, const Reduction &r,
                     ArrayRef<int64_t> reduced, ArrayRef<Value> rowIvs,
                     Value start, int64_t stride) {
  int64_t count = 1;
  for (int64_t n : reduced)
    count *= n;
  Value identity =
      arith::ConstantOp::create(b, loc, *arith::getNeutralElement(r.combiner));
  auto loop = scf::ForOp::create(
      b, loc, start, arith::ConstantIndexOp::create(b, loc, count),
      arith::ConstantIndexOp::create(b, loc, stride), ValueRange{identity});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs(rowIvs);
  llvm::append_range(ivs, delinearize(b, loc, loop.getInductionVar(), reduced));
  Value v = valueAt(b, loc, r, ivs);
  scf::YieldOp::create(b, loc, combine(b, r, loop.getRegionIterArgs()[0], v));
  return loop.getResult(0);
}

/// out[rowIvs] = combiner(out[rowIvs], total), in the thread `leader`.
void writeOnce(OpBuilder &b, Location loc, const Reduction &r, Value leader,
               ArrayRef<Value> rowIvs, Value total) {
  linalg::GenericOp op = r.op;
  Value out = op.getDpsInitOperand(0)->get();
  auto ifLeader = scf::IfOp::create(b, loc, leader, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifLeader.thenBlock()->getTerminator());
  Value old = memref::LoadOp::create(b, loc, out, rowIvs);
  memref::StoreOp::create(b, loc, combine(b, r, old, total), out, rowIvs);
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
    Value partial =
        stridedPartial(b, loc, r, reduced, {}, tid, kBlockReductionThreads);
    Value total = gpu::AllReduceOp::create(
        b, loc, partial,
        gpu::AllReduceOperationAttr::get(b.getContext(), r.kind),
        /*uniform=*/true);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, c(0));
    writeOnce(b, loc, r, first, {}, total);
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
    Value partial = stridedPartial(b, loc, r, reduced, rowIvs, lane, kWarpSize);
    Value total = gpu::SubgroupReduceOp::create(b, loc, partial, r.kind,
                                                /*uniform=*/true);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c(0));
    writeOnce(b, loc, r, first, rowIvs, total);
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
  Value out = op.getDpsInitOperand(0)->get();
  Type element = cast<MemRefType>(out.getType()).getElementType();
  Value identity =
      arith::ConstantOp::create(b, loc, *arith::getNeutralElement(r.combiner));
  auto partials = memref::AllocOp::create(
      b, loc, MemRefType::get({chunks, columns}, element));
  // 1. partials[chunk, column]: the chunk's rows of the column.
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
        scf::ForOp::create(b, loc, begin, end, c(1), ValueRange{identity});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(rowLoop.getBody());
      SmallVector<Value> ivs = delinearize(b, loc, column, parallel);
      llvm::append_range(
          ivs, delinearize(b, loc, rowLoop.getInductionVar(), reduced));
      Value v = valueAt(b, loc, r, ivs);
      scf::YieldOp::create(b, loc,
                           combine(b, r, rowLoop.getRegionIterArgs()[0], v));
    }
    memref::StoreOp::create(b, loc, rowLoop.getResult(0), partials,
                            ValueRange{chunk, column});
  }
  // 2. out[column] = combiner(out[column], the column's partials).
  {
    auto loop = scf::ParallelOp::create(b, loc, c(0), c(columns), c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value column = loop.getInductionVars()[0];
    auto chunkLoop =
        scf::ForOp::create(b, loc, c(0), c(chunks), c(1), ValueRange{identity});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(chunkLoop.getBody());
      Value part = memref::LoadOp::create(
          b, loc, partials, ValueRange{chunkLoop.getInductionVar(), column});
      scf::YieldOp::create(
          b, loc, combine(b, r, chunkLoop.getRegionIterArgs()[0], part));
    }
    SmallVector<Value> ivs = delinearize(b, loc, column, parallel);
    Value old = memref::LoadOp::create(b, loc, out, ivs);
    memref::StoreOp::create(b, loc, combine(b, r, old, chunkLoop.getResult(0)),
                            out, ivs);
  }
  op.erase();
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
    // A copy bufferization left (a result computed in a temporary) is a
    // linalg op like the others, so that it maps onto threads.
    func.walk([](memref::CopyOp copy) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    });
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
    for (linalg::GenericOp op : columnReductions) {
      std::optional<Reduction> r = matchReduction(op);
      if (!r)
        continue;
      // The ranges in a local: a range-for over a view of the returned
      // vector would read it after it is destroyed.
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      int64_t rows = 1;
      for (int64_t n : ArrayRef(ranges).drop_front(r->numParallel))
        rows *= n;
      int64_t chunks = std::min<int64_t>(kColumnChunks, rows / kRowsPerChunk);
      if (chunks >= 2)
        splitColumns(*r, chunks);
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
