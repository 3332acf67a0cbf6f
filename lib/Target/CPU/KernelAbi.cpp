//===- KernelAbi.cpp - The runtime's kernel calling convention -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Three passes that give a kernel function the shape the runtime calls:
// destination-passing buffers (gptc-kernel-abi), a row range
// (gptc-kernel-parallel-range) and one C entry point per kernel
// (gptc-kernel-entry). See include/gptc/Target/CPU/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCKERNELFUSEPASS
#define GEN_PASS_DEF_GPTCKERNELABIPASS
#define GEN_PASS_DEF_GPTCKERNELPARALLELRANGEPASS
#define GEN_PASS_DEF_GPTCKERNELENTRYPASS
#include "gptc/Target/CPU/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

static constexpr StringLiteral kExtentAttr = "gptc.extent";

//===----------------------------------------------------------------------===//
// gptc-kernel-fuse
//===----------------------------------------------------------------------===//

namespace {
/// Whether `a` and `b` are one tensor value, or fills of one scalar into
/// new tensors of one type (the zeros two reductions start from).
bool sameStart(Value a, Value b) {
  if (a == b)
    return true;
  auto fa = a.getDefiningOp<linalg::FillOp>();
  auto fb = b.getDefiningOp<linalg::FillOp>();
  return fa && fb && a.getType() == b.getType() &&
         fa.getDpsInputOperand(0)->get() == fb.getDpsInputOperand(0)->get() &&
         fa.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>() &&
         fb.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>();
}

/// Whether `b` computes what `a` does: the same inputs, indexing maps,
/// iterators and body, its outputs starting from the same values.
bool computesSame(linalg::GenericOp a, linalg::GenericOp b) {
  if (!a.hasPureTensorSemantics() || !b.hasPureTensorSemantics() ||
      a.getNumDpsInits() != b.getNumDpsInits() ||
      !llvm::equal(a.getInputs(), b.getInputs()) ||
      a.getIndexingMapsArray() != b.getIndexingMapsArray() ||
      a.getIteratorTypesArray() != b.getIteratorTypesArray())
    return false;
  for (auto [x, y] : llvm::zip(a.getOutputs(), b.getOutputs()))
    if (!sameStart(x, y))
      return false;
  return OperationEquivalence::isRegionEquivalentTo(
      &a.getRegion(), &b.getRegion(),
      OperationEquivalence::Flags::IgnoreLocations);
}

struct GptcKernelFusePass final
    : mlir::gptc::impl::GptcKernelFusePassBase<GptcKernelFusePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Fuse every elementwise producer into its consumers, whatever its
    // number of users; the producer survives only while some user is not
    // fused yet.
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *) { return true; });
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // A computation done twice is done once: the loss's gradient finds the
    // same row maxima as the loss (each op's lowering has its own). Not
    // CSE, which would also share the two reductions' zero-filled starts
    // and make bufferization copy them.
    SmallVector<linalg::GenericOp> seen;
    getOperation()->walk([&](linalg::GenericOp op) {
      for (linalg::GenericOp earlier : seen)
        if (earlier->getBlock() == op->getBlock() &&
            computesSame(earlier, op)) {
          op->replaceAllUsesWith(earlier);
          op->erase();
          return WalkResult::skip();
        }
      seen.push_back(op);
      return WalkResult::advance();
    });
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// gptc-kernel-abi
//===----------------------------------------------------------------------===//

namespace {
struct GptcKernelAbiPass final
    : mlir::gptc::impl::GptcKernelAbiPassBase<GptcKernelAbiPass> {
  using Base::Base;

  void runOnOperation() override {
    auto func = dyn_cast<func::FuncOp>(getOperation().getOperation());
    if (!func || func.isExternal() || func->hasAttr(kExtentAttr))
      return;
    if (!llvm::hasSingleElement(func.getBody())) {
      func.emitOpError("a kernel has one block");
      return signalPassFailure();
    }
    Block &entry = func.getBody().front();
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    // 1. The parallel dimension: dimension 0 of every result (only static
    //    shapes without a row range).
    int64_t extent = -1;
    for (Value v : ret.getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!rowRange && t && t.hasStaticShape()) {
        extent = 0;
        continue;
      }
      if (!t || !t.hasStaticShape() || t.getRank() == 0 ||
          (extent >= 0 && t.getDimSize(0) != extent)) {
        func.emitOpError(rowRange ? "a kernel's results need dimension 0 of "
                                    "one static extent, got "
                                  : "a kernel's results need static shapes, "
                                    "got ")
            << v.getType();
        return signalPassFailure();
      }
      extent = t.getDimSize(0);
    }
    if (extent < 0) {
      func.emitOpError("a kernel has results");
      return signalPassFailure();
    }
    // 2. Buffers for the inputs, then the results, then begin and end
    //    (when the runtime splits rows).
    auto bufferOf = [](Type type) {
      auto t = cast<RankedTensorType>(type);
      return MemRefType::get(t.getShape(), t.getElementType());
    };
    Location loc = func.getLoc();
    unsigned numInputs = entry.getNumArguments();
    for (unsigned i = 0; i < numInputs; ++i) {
      BlockArgument old = entry.getArgument(i);
      if (!isa<RankedTensorType>(old.getType())) {
        func.emitOpError("kernel arguments are tensors");
        return signalPassFailure();
      }
    }
    SmallVector<Value> inBuffers, outBuffers;
    for (unsigned i = 0; i < numInputs; ++i)
      inBuffers.push_back(
          entry.addArgument(bufferOf(entry.getArgument(i).getType()), loc));
    for (Value v : ret.getOperands())
      outBuffers.push_back(entry.addArgument(bufferOf(v.getType()), loc));
    OpBuilder b(func.getContext());
    if (rowRange) {
      IndexType index = b.getIndexType();
      entry.addArgument(index, loc);
      entry.addArgument(index, loc);
    }
    // 3. Inputs read through to_tensor (restrict: nothing else in the
    //    kernel writes them).
    b.setInsertionPointToStart(&entry);
    for (unsigned i = 0; i < numInputs; ++i) {
      BlockArgument old = entry.getArgument(i);
      Value t = bufferization::ToTensorOp::create(
          b, loc, old.getType(), inBuffers[i], /*restrict=*/true,
          /*writable=*/false);
      old.replaceAllUsesWith(t);
    }
    // 4. Results materialized in their buffers.
    b.setInsertionPoint(ret);
    for (auto [v, buffer] : llvm::zip(ret.getOperands(), outBuffers))
      bufferization::MaterializeInDestinationOp::create(
          b, loc, TypeRange{}, v, buffer, /*restrict=*/true,
          /*writable=*/true);
    func::ReturnOp::create(b, ret.getLoc());
    ret.erase();
    entry.eraseArguments(0, numInputs);
    func.setFunctionType(
        b.getFunctionType(entry.getArgumentTypes(), TypeRange{}));
    if (rowRange)
      func->setAttr(kExtentAttr, b.getI64IntegerAttr(extent));
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// gptc-kernel-parallel-range
//===----------------------------------------------------------------------===//

namespace {
struct GptcKernelParallelRangePass final
    : mlir::gptc::impl::GptcKernelParallelRangePassBase<
          GptcKernelParallelRangePass> {
  using Base::Base;

  void runOnOperation() override {
    auto func = dyn_cast<func::FuncOp>(getOperation().getOperation());
    if (!func || func.isExternal())
      return;
    auto extent = func->getAttrOfType<IntegerAttr>(kExtentAttr);
    if (!extent) {
      func.emitOpError("expects ") << kExtentAttr << " (run gptc-kernel-abi)";
      return signalPassFailure();
    }
    Block &entry = func.getBody().front();
    unsigned n = entry.getNumArguments();
    if (n < 2 || !entry.getArgument(n - 1).getType().isIndex()) {
      func.emitOpError("expects begin and end as the last arguments");
      return signalPassFailure();
    }
    Value begin = entry.getArgument(n - 2), end = entry.getArgument(n - 1);
    for (Operation &op : entry.without_terminator()) {
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        std::optional<int64_t> lo = getConstantIntValue(loop.getLowerBound());
        std::optional<int64_t> hi = getConstantIntValue(loop.getUpperBound());
        std::optional<int64_t> step = getConstantIntValue(loop.getStep());
        if (lo != 0 || hi != extent.getInt() || step != 1) {
          loop.emitOpError("is not a loop over the kernel's parallel "
                           "dimension [0, ")
              << extent.getInt() << ")";
          return signalPassFailure();
        }
        loop.getLowerBoundMutable().assign(begin);
        loop.getUpperBoundMutable().assign(end);
        continue;
      }
      if (isMemoryEffectFree(&op))
        continue;
      op.emitOpError("runs outside the kernel's parallel loops; a kernel "
                     "would repeat it in every row block");
      return signalPassFailure();
    }
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// gptc-kernel-entry
//===----------------------------------------------------------------------===//

namespace {
struct GptcKernelEntryPass final
    : mlir::gptc::impl::GptcKernelEntryPassBase<GptcKernelEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    SmallVector<LLVM::LLVMFuncOp> kernels;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (!func.isExternal() && func.getLinkage() == LLVM::Linkage::External)
        kernels.push_back(func);
    for (LLVM::LLVMFuncOp body : kernels) {
      // 1. The kernel's own signature: buffer pointers, then begin, end.
      LLVM::LLVMFunctionType type = body.getFunctionType();
      ArrayRef<Type> params = type.getParams();
      unsigned n = params.size();
      if (n < 2 || params[n - 1] != i64 || params[n - 2] != i64 ||
          !llvm::all_of(
              params.drop_back(2), [&](Type t) { return t == ptr; })) {
        body.emitOpError("is not a kernel of (ptr..., i64, i64): ") << type;
        return signalPassFailure();
      }
      std::string name = body.getName().str();
      body.setName(name + ".body");
      body.setLinkage(LLVM::Linkage::Internal);
      // 2. @name(ptr buffers, i64 begin, i64 end): load each buffer.
      OpBuilder b(body);
      auto entryType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                   {ptr, i64, i64});
      auto entry = LLVM::LLVMFuncOp::create(b, body.getLoc(), name, entryType);
      Block *block = entry.addEntryBlock(b);
      b.setInsertionPointToStart(block);
      Location loc = body.getLoc();
      SmallVector<Value> args;
      for (unsigned i = 0; i + 2 < n; ++i) {
        Value slot = LLVM::GEPOp::create(
            b, loc, ptr, ptr, block->getArgument(0),
            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        args.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
      }
      args.push_back(block->getArgument(1));
      args.push_back(block->getArgument(2));
      LLVM::CallOp::create(b, loc, body, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});
    }
  }
};
} // namespace
