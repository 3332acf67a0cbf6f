//===- MapKernel.cpp - Kernel loops onto GPU blocks and threads -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-gpu-map-kernel and gptc-gpu-merge-modules; see
// include/gptc/Target/CUDA/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/Passes.h"

#include "Indexing.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCGPUMAPKERNELPASS
#define GEN_PASS_DEF_GPTCGPUMERGEMODULESPASS
#define GEN_PASS_DEF_GPTCGPUKERNELARGATTRSPASS
#include "gptc/Target/CUDA/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// gptc-gpu-map-kernel
//===----------------------------------------------------------------------===//

namespace {
struct GptcGpuMapKernelPass final
    : mlir::gptc::impl::GptcGpuMapKernelPassBase<GptcGpuMapKernelPass> {
  using Base::Base;

  /// One loop nest as a grid of blocks of threads: thread t of block b
  /// runs iteration b * tile + t of the nest's iteration space, linearized
  /// row-major (the innermost dimension varies fastest, so that adjacent
  /// threads touch adjacent elements).
  LogicalResult map(scf::ParallelOp loop) {
    // 1. A static iteration space from 0 in steps of 1.
    SmallVector<int64_t> extents;
    int64_t total = 1;
    for (auto [lo, hi, step] : llvm::zip(
             loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
      std::optional<int64_t> l = getConstantIntValue(lo),
                             h = getConstantIntValue(hi),
                             s = getConstantIntValue(step);
      if (l != 0 || s != 1 || !h)
        return loop.emitOpError("has no static iteration space from 0 in "
                                "steps of 1 to map onto GPU threads");
      extents.push_back(*h);
      total *= *h;
    }
    // A large elementwise nest: `per` iterations a thread, strided by a
    // `total / per`-th of the space (each load still coalesced across a
    // warp), their loads issued before any arithmetic (coarsen()).
    int64_t per = 1;
    if (elementsPerThread > 1 && total >= coarsenMinElements &&
        total % (elementsPerThread * blockSize) == 0 && isStraightLine(loop))
      per = elementsPerThread;
    int64_t threadsNeeded = total / per;
    int64_t tile =
        std::max<int64_t>(1, std::min<int64_t>(blockSize, threadsNeeded));
    int64_t numBlocks = (threadsNeeded + tile - 1) / tile;
    // 2. Blocks, then threads; out-of-range threads of the last block idle.
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    Value zero = index(0), one = index(1);
    auto blocks = scf::ParallelOp::create(b, loc, zero, index(numBlocks), one);
    b.setInsertionPointToStart(blocks.getBody());
    auto threads = scf::ParallelOp::create(b, loc, zero, index(tile), one);
    b.setInsertionPointToStart(threads.getBody());
    Value linear = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, blocks.getInductionVars()[0],
                              index(tile)),
        threads.getInductionVars()[0]);
    if (per > 1) {
      // Every thread is in range: total is a multiple of per * tile.
      coarsen(b, loop, linear, extents, per, threadsNeeded);
      loop.erase();
      return setBlockThreadMapping(blocks, threads);
    }
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          linear, index(total));
    auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    // 3. The nest's indices and its body in the guard.
    SmallVector<Value> ivs = delinearize(b, loc, linear, extents);
    Block *body = loop.getBody();
    body->getTerminator()->erase();
    IRRewriter rewriter(b);
    rewriter.inlineBlockBefore(body, guard.thenBlock()->getTerminator(), ivs);
    loop.erase();
    return setBlockThreadMapping(blocks, threads);
  }

  /// Whether `loop`'s body is straight-line elementwise code: loads,
  /// stores and ops without memory effects or regions, no reduction, and
  /// no buffer both read and written (so that every iteration's loads may
  /// run before any iteration's stores: a kernel's results never share
  /// memory with its operands, gptc-plan-buffers keeping both alive).
  static bool isStraightLine(scf::ParallelOp loop) {
    if (loop.getNumResults() != 0)
      return false;
    llvm::SmallPtrSet<Value, 8> read, written;
    for (Operation &op : loop.getBody()->without_terminator()) {
      if (auto load = dyn_cast<memref::LoadOp>(op))
        read.insert(load.getMemRef());
      else if (auto store = dyn_cast<memref::StoreOp>(op))
        written.insert(store.getMemRef());
      else if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
        return false;
    }
    for (Value m : written)
      if (read.contains(m))
        return false;
    return !written.empty();
  }

  /// The body of `loop` for `per` iterations of one thread, `linear`,
  /// `linear + stride`, ..., at `b`: first every iteration's index
  /// arithmetic and the loads it feeds, then the arithmetic on loaded
  /// values, then the stores. The loads of all `per` iterations are in
  /// flight together (straight-line code, no store between them), which
  /// a thread per element cannot keep enough of to fill the memory's
  /// bandwidth on 16-bit data.
  static void coarsen(OpBuilder &b, scf::ParallelOp loop, Value linear,
                      ArrayRef<int64_t> extents, int64_t per, int64_t stride) {
    Location loc = loop.getLoc();
    Block *body = loop.getBody();
    // Ops that use a loaded value, directly or not.
    llvm::SmallPtrSet<Operation *, 32> afterLoads;
    for (Operation &op : body->without_terminator())
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def->getBlock() == body &&
              (isa<memref::LoadOp>(def) || afterLoads.contains(def)))
            afterLoads.insert(&op);
    // Iteration v's indices. When the stride is a whole number of
    // dimension 0's slices (a batch of rows), only that index moves.
    int64_t slice = 1;
    for (int64_t e : extents.drop_front())
      slice *= e;
    SmallVector<Value> first = delinearize(b, loc, linear, extents);
    SmallVector<IRMapping> maps(per);
    for (int64_t v = 0; v < per; ++v) {
      SmallVector<Value> ivs = first;
      if (v > 0 && stride % slice == 0) {
        ivs[0] = arith::AddIOp::create(
            b, loc, first[0],
            arith::ConstantIndexOp::create(b, loc, v * (stride / slice)));
      } else if (v > 0) {
        Value at = arith::AddIOp::create(
            b, loc, linear, arith::ConstantIndexOp::create(b, loc, v * stride));
        ivs = delinearize(b, loc, at, extents);
      }
      maps[v].map(loop.getInductionVars(), ivs);
    }
    auto phase = [&](llvm::function_ref<bool(Operation &)> pick) {
      for (int64_t v = 0; v < per; ++v)
        for (Operation &op : body->without_terminator())
          if (pick(op))
            b.clone(op, maps[v]);
    };
    phase([&](Operation &op) {
      return !isa<memref::StoreOp>(op) && !afterLoads.contains(&op);
    });
    phase([&](Operation &op) {
      return !isa<memref::StoreOp>(op) && afterLoads.contains(&op);
    });
    phase([](Operation &op) { return isa<memref::StoreOp>(op); });
  }

  /// The longest scalar computation the nests after it recompute in each
  /// thread rather than load from a temporary.
  static constexpr int64_t kRecomputedScalarOps = 16;

  /// Whether a scalar of `type` can go through a 0-d temporary.
  static bool isStorableScalar(Type type) {
    return isa<FloatType>(type) ||
           (isa<IntegerType>(type) && type.getIntOrFloatBitWidth() >= 8);
  }

  /// How many of `candidates` a thread recomputes for `op`'s value: `op`
  /// and what it uses among them, each once (up to one past the limit).
  static int64_t
  recomputedOps(Operation *op,
                const llvm::SmallPtrSetImpl<Operation *> &candidates) {
    llvm::SmallPtrSet<Operation *, 32> seen;
    SmallVector<Operation *> work{op};
    while (!work.empty() &&
           static_cast<int64_t>(seen.size()) <= kRecomputedScalarOps) {
      Operation *at = work.pop_back_val();
      if (!seen.insert(at).second)
        continue;
      for (Value operand : at->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && candidates.contains(def))
          work.push_back(def);
    }
    return seen.size();
  }

  /// Scalar code between the loop nests (a loaded scalar, the arithmetic
  /// on it, a store to a scalar) is placed where the GPU can run it:
  /// allocations first; then, last to first, each load or side-effect-free
  /// op is cloned into the later loop nests that use it (every thread
  /// recomputes the scalar) and moves down to its first use at the top, if
  /// any; a load only where nothing on the way writes its buffer. A value
  /// whose computation is longer than kRecomputedScalarOps is not
  /// recomputed: one thread stores it to a scalar temporary that the
  /// nests load (the gradient norm's clipping scale, a sum over every
  /// tensor's partial, read by each tensor's update). What is left forms
  /// runs that one thread executes.
  static void placeScalarCode(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block))
      if (isa<memref::AllocOp>(op) && op.getNumOperands() == 0)
        op.moveBefore(&block.front());
    SmallVector<Operation *> candidates;
    for (Operation &op : block) {
      bool pure = isMemoryEffectFree(&op) && op.getNumRegions() == 0;
      if ((pure || isa<memref::LoadOp>(op)) && op.getNumResults() == 1 &&
          !op.hasTrait<OpTrait::ConstantLike>())
        candidates.push_back(&op);
    }
    llvm::SmallPtrSet<Operation *, 32> isCandidate(candidates.begin(),
                                                   candidates.end());
    for (Operation *op : llvm::reverse(candidates)) {
      Value result = op->getResult(0);
      if (result.use_empty())
        continue;
      bool usedInNest = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return block.findAncestorOpInBlock(*user) != user;
      });
      if (usedInNest && isStorableScalar(result.getType()) &&
          recomputedOps(op, isCandidate) > kRecomputedScalarOps) {
        OpBuilder top(&block.front());
        Value slot = memref::AllocOp::create(
            top, op->getLoc(), MemRefType::get({}, result.getType()));
        // Every later use loads it: one in a nest as each thread's copy,
        // one at the top in the run it is part of.
        for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
          OpBuilder b(use.getOwner());
          use.set(memref::LoadOp::create(b, op->getLoc(), slot));
        }
        OpBuilder after(op->getBlock(), std::next(op->getIterator()));
        memref::StoreOp::create(after, op->getLoc(), result, slot);
      }
      // Nothing between a load and where its value is used may write the
      // buffer it reads.
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        bool clear = true;
        for (Operation *user : result.getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          for (Operation *at = op->getNextNode(); at && at != top;
               at = at->getNextNode())
            for (Operation *other : load.getMemRef().getUsers())
              clear &= isa<memref::LoadOp>(other) || !at->isAncestor(other);
        }
        if (!clear)
          continue;
      }
      // Uses inside later nests read a copy computed by each thread; the
      // op itself moves down to its first use at the top, if any, and a
      // later use at the top reads a copy made there (a launch may lie
      // between the two).
      SmallVector<OpOperand *> topUses;
      llvm::SmallPtrSet<Operation *, 4> topUsers;
      for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
        Operation *top = block.findAncestorOpInBlock(*use.getOwner());
        if (top != use.getOwner()) {
          OpBuilder b(use.getOwner());
          use.set(b.clone(*op)->getResult(0));
          continue;
        }
        topUses.push_back(&use);
        topUsers.insert(top);
      }
      // The first top use, walking down from the op (not isBeforeInBlock:
      // the clones above invalidate the block's order, and recomputing it
      // for every op of a kernel of thousands of launches is quadratic).
      Operation *firstTop = nullptr;
      for (Operation *at = op->getNextNode();
           at && !topUsers.empty() && !firstTop; at = at->getNextNode())
        if (topUsers.contains(at))
          firstTop = at;
      for (OpOperand *use : topUses)
        if (use->getOwner() != firstTop) {
          OpBuilder b(use->getOwner());
          use->set(b.clone(*op)->getResult(0));
        }
      if (firstTop)
        op->moveBefore(firstTop);
      else
        op->erase();
    }
  }

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    if (func.isExternal())
      return;
    if (blockSize < 1 || blockSize > 1024) {
      func.emitOpError("block-size must be in [1, 1024], got ")
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (!llvm::hasSingleElement(func.getFunctionBody())) {
      func.emitOpError("a kernel has one block");
      return signalPassFailure();
    }
    Block &block = func.getFunctionBody().front();
    placeScalarCode(block);
    // Each loop nest on blocks and threads; each run of scalar code (what
    // remains of a kernel's scalar arithmetic: loads, stores, a loop nest
    // with no parallel dimension) in one thread of one block.
    SmallVector<scf::ParallelOp> loops;
    SmallVector<SmallVector<Operation *>> runs;
    bool inRun = false;
    for (Operation &op : block) {
      if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
        // A row kernel gptc-gpu-map-reductions built is mapped already.
        if (!loop->hasAttr(gpu::getMappingAttrName()))
          loops.push_back(loop);
        inRun = false;
        continue;
      }
      if (op.hasTrait<OpTrait::IsTerminator>() ||
          isa<memref::AllocOp, gpu::LaunchOp>(op)) {
        inRun = false;
        continue;
      }
      bool pure = isMemoryEffectFree(&op) && op.getNumRegions() == 0;
      if (pure && !inRun)
        continue;
      if (!pure && !isa<scf::ForOp, memref::StoreOp, memref::LoadOp>(op)) {
        op.emitOpError("runs outside the kernel's parallel loops; it has no "
                       "GPU mapping");
        return signalPassFailure();
      }
      if (!inRun)
        runs.emplace_back();
      inRun = true;
      runs.back().push_back(&op);
    }
    for (ArrayRef<Operation *> run : runs) {
      // A value of the run used after it would have to leave the device.
      for (Operation *op : run)
        for (Operation *user : op->getUsers())
          if (!llvm::is_contained(run, block.findAncestorOpInBlock(*user))) {
            user->emitOpError("uses a scalar computed in a GPU launch before "
                              "it; it has no GPU mapping");
            return signalPassFailure();
          }
      OpBuilder b(run.front());
      Location loc = run.front()->getLoc();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto once = scf::ParallelOp::create(b, loc, zero, one, one);
      for (Operation *op : run)
        op->moveBefore(once.getBody()->getTerminator());
      loops.push_back(once);
    }
    for (scf::ParallelOp loop : loops)
      if (failed(map(loop)))
        return signalPassFailure();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// gptc-gpu-merge-modules
//===----------------------------------------------------------------------===//

namespace {
struct GptcGpuMergeModulesPass final
    : mlir::gptc::impl::GptcGpuMergeModulesPassBase<GptcGpuMergeModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    OpBuilder b(modules.front());
    auto merged =
        gpu::GPUModuleOp::create(b, modules.front().getLoc(), "gptc_merged");
    SymbolTable symbols(merged);
    // (old module, old name) -> the name in the merged module. The
    // outliner names each launch's kernel after its host function, so a
    // function of several launches gives several kernels of one name, each
    // in its own module; the symbol table renames all but the first.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp from : modules) {
      for (Operation &op :
           llvm::make_early_inc_range(from.getBody()->getOperations())) {
        if (op.hasTrait<OpTrait::IsTerminator>())
          continue;
        StringAttr old = SymbolTable::getSymbolName(&op);
        op.remove();
        renamed[{from.getNameAttr(), old}] = symbols.insert(&op);
      }
      from.erase();
    }
    merged.setName(kGpuKernelModuleName);
    StringAttr root = b.getStringAttr(kGpuKernelModuleName);
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          renamed.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == renamed.end()) {
        launch.emitOpError("launches a kernel outside the outlined modules");
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(
          SymbolRefAttr::get(root, {FlatSymbolRefAttr::get(it->second)}));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// gptc-gpu-kernel-arg-attrs
//===----------------------------------------------------------------------===//

namespace {
struct GptcGpuKernelArgAttrsPass final
    : mlir::gptc::impl::GptcGpuKernelArgAttrsPassBase<
          GptcGpuKernelArgAttrsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<gpu::GPUFuncOp>()) {
      if (!func.isKernel())
        continue;
      Block &entry = func.getBody().front();
      // The argument `v` views, if any.
      auto argumentOf = [&](Value v) -> std::optional<unsigned> {
        auto arg = dyn_cast<BlockArgument>(viewSource(v));
        // (Workgroup and private attributions follow the arguments.)
        if (arg && arg.getOwner() == &entry &&
            arg.getArgNumber() < func.getNumArguments())
          return arg.getArgNumber();
        return std::nullopt;
      };
      llvm::SmallBitVector written(func.getNumArguments());
      func.walk([&](Operation *op) {
        auto effects = dyn_cast<MemoryEffectOpInterface>(op);
        if (!effects) {
          // Views, ops whose effects are their regions' and a barrier
          // (it orders the block's accesses, it makes none) describe
          // nothing of their own; anything else may write any buffer.
          if (op == func || isa<ViewLikeOpInterface, gpu::BarrierOp>(op) ||
              op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
            return;
          written.set();
          return;
        }
        SmallVector<MemoryEffects::EffectInstance> instances;
        effects.getEffects(instances);
        for (const MemoryEffects::EffectInstance &e : instances) {
          if (!isa<MemoryEffects::Write>(e.getEffect()))
            continue;
          Value v = e.getValue();
          if (!v) {
            written.set();
            continue;
          }
          if (std::optional<unsigned> i = argumentOf(v))
            written.set(*i);
        }
      });
      Builder b(func.getContext());
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        if (!isa<MemRefType>(func.getArgument(i).getType()))
          continue;
        func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                        b.getUnitAttr());
        if (!written.test(i))
          func.setArgAttr(i, LLVM::LLVMDialect::getReadonlyAttrName(),
                          b.getUnitAttr());
      }
    }
  }
};
} // namespace
