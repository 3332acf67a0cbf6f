//===- FuseGemmEpilogues.cpp - Elementwise work into GEMM calls -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Three local rewrites, each a chain of ops around one GEMM moved into a
// gptc.fused_gemm region in the order its verifier reads (the ops are
// cloned, so the region computes what the chain did). The values it
// yields are read from the fused op from then on; the chain's ops go once
// nothing reads them. The fused op goes where every operand is
// defined and before every outside use of what it yields: at the linear
// (gelu_aux), at the op that defined the gradient (dgelu: the bias sum
// that joins it comes later, but only the fused op reads its operand's
// chain), or at the earlier of product and sum (bgrad, when the other
// operand is defined by then).
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCFUSEGEMMEPILOGUESPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

/// The element types the GEMM libraries fuse epilogues for (f64 is the CPU
/// runtime's reference path and stays op by op).
static bool isFusible(Type type) {
  Type e = getElementTypeOrSelf(type);
  return e.isF32() || e.isBF16() || e.isF16();
}

/// The single user of `v`, if it has exactly one use.
static Operation *onlyUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// A cast of `v` to f32 among its users, in `block`.
static CastOp wideningCast(Value v, Block *block) {
  for (Operation *user : v.getUsers())
    if (auto c = dyn_cast<CastOp>(user))
      if (c->getBlock() == block && getElementTypeOrSelf(c.getType()).isF32())
        return c;
  return CastOp();
}

namespace {
/// A chain to fuse: the ops cloned into the region in order, the outer
/// operands (block arguments in order), what the region yields, and the
/// outer ops to erase once unused.
struct Chain {
  GemmEpilogue epilogue = GemmEpilogue::GeluAux;
  SmallVector<Operation *> body;
  SmallVector<Value> inputs, yields;
  Operation *insertBefore = nullptr;
};
} // namespace

/// Builds the fused op of `chain`, reroutes outside uses of the yielded
/// values and erases the chain's ops that nothing reads any more.
static void fuse(const Chain &chain) {
  OpBuilder b(chain.insertBefore);
  Location loc = b.getFusedLoc(llvm::map_to_vector(
      chain.body, [](Operation *op) { return op->getLoc(); }));
  auto fused = FusedGemmOp::create(b, loc, TypeRange(ValueRange(chain.yields)),
                                   chain.inputs, chain.epilogue);
  Block *block = new Block();
  fused.getBody().push_back(block);
  IRMapping map;
  for (Value input : chain.inputs)
    map.map(input, block->addArgument(input.getType(), input.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(block);
  for (Operation *op : chain.body)
    inner.clone(*op, map);
  YieldOp::create(inner, loc, llvm::map_to_vector(chain.yields, [&](Value v) {
                    return map.lookup(v);
                  }));
  // Every use, a surviving chain op's too (the region reads only its
  // clones): the widening cast of a GELU input that the backward pass
  // still reads then reads the fused op's copy.
  for (auto [value, result] : llvm::zip(chain.yields, fused.getResults()))
    Value(value).replaceAllUsesWith(result);
  // Outer ops in reverse order, each once nothing reads it.
  SmallVector<Operation *> order(chain.body.begin(), chain.body.end());
  llvm::sort(order,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : order)
    if (op->use_empty())
      op->erase();
}

/// gelu_aux: linear -> [cast f32] -> gelu -> [cast back].
static bool matchGeluAux(LinearOp linear, Chain &chain) {
  Value pre = linear.getResult();
  if (!isFusible(pre.getType()))
    return false;
  Type element = getElementTypeOrSelf(pre.getType());
  Block *block = linear->getBlock();
  SmallVector<Operation *> body = {linear};
  Value wide = pre;
  if (!element.isF32()) {
    CastOp widen = wideningCast(pre, block);
    if (!widen)
      return false;
    body.push_back(widen);
    wide = widen.getResult();
  }
  GeluOp gelu;
  for (Operation *user : wide.getUsers())
    if (auto g = dyn_cast<GeluOp>(user);
        g && g->getBlock() == block && !g.getExact()) {
      gelu = g;
      break;
    }
  if (!gelu)
    return false;
  body.push_back(gelu);
  Value act = gelu.getResult();
  if (!element.isF32()) {
    auto narrow = dyn_cast_or_null<CastOp>(onlyUser(act));
    if (!narrow || getElementTypeOrSelf(narrow.getType()) != element)
      return false;
    body.push_back(narrow);
    act = narrow.getResult();
  }
  chain.epilogue = GemmEpilogue::GeluAux;
  chain.body = std::move(body);
  chain.inputs.assign(linear->operand_begin(), linear->operand_end());
  chain.yields = {act, pre};
  chain.insertBefore = linear;
  return true;
}

/// dgelu[_bgrad]: matmul -> [reshape] -> [cast f32] -> gelu_grad(pre, .)
/// -> [cast back] (-> [reshape] -> reduce_sum).
static bool matchDgelu(GeluGradOp grad, Chain &chain) {
  Block *block = grad->getBlock();
  Value preWide = grad.getInput(), gWide = grad.getGrad();
  Type f32 = getElementTypeOrSelf(preWide.getType());
  if (!f32.isF32() || preWide == gWide || grad.getExact())
    return false;
  // Undo the exact widenings of 16-bit values (both or neither).
  auto castOp = [&](Value v) {
    auto c = v.getDefiningOp<CastOp>();
    return c && c->getBlock() == block ? c : CastOp();
  };
  Value pre = preWide, g = gWide;
  CastOp preCast = castOp(preWide), gCast = castOp(gWide);
  if (preCast && gCast &&
      getElementTypeOrSelf(preCast.getInput().getType()) ==
          getElementTypeOrSelf(gCast.getInput().getType()) &&
      !getElementTypeOrSelf(preCast.getInput().getType()).isF32()) {
    pre = preCast.getInput();
    g = gCast.getInput();
  } else {
    preCast = gCast = CastOp();
  }
  if (!isFusible(pre.getType()) || (gCast && !gCast->hasOneUse()))
    return false;
  Type element = getElementTypeOrSelf(pre.getType());
  ReshapeOp view = g.getDefiningOp<ReshapeOp>();
  Value product = view ? view.getInput() : g;
  auto matmul = product.getDefiningOp<MatmulOp>();
  if (!matmul || matmul->getBlock() != block || !matmul->hasOneUse() ||
      (view && (view->getBlock() != block || !view->hasOneUse())) ||
      matmul.getType().getRank() != 2 || g.getType() != pre.getType())
    return false;
  SmallVector<Operation *> body = {matmul};
  if (view)
    body.push_back(view);
  if (preCast)
    body.append({preCast, gCast});
  body.push_back(grad);
  Value d = grad.getResult();
  Operation *last = grad;
  if (!element.isF32()) {
    auto narrow = dyn_cast_or_null<CastOp>(onlyUser(d));
    if (!narrow || getElementTypeOrSelf(narrow.getType()) != element)
      return false;
    body.push_back(narrow);
    d = narrow.getResult();
    last = narrow;
  }
  // The bias gradient: a sum over every dimension but the last, of the
  // gradient or of one of its reshapes.
  auto rows = cast<RankedTensorType>(d.getType());
  ReshapeOp sumView;
  ReduceSumOp sum;
  auto isBiasSum = [&](Operation *user, Value of) {
    auto s = dyn_cast<ReduceSumOp>(user);
    auto type = cast<RankedTensorType>(of.getType());
    return s && s->getBlock() == block && type.getRank() >= 2 &&
                   type.getShape().back() == rows.getShape().back() &&
                   s.getDimensions() ==
                       ArrayRef(llvm::to_vector(
                           llvm::seq<int64_t>(0, type.getRank() - 1)))
               ? s
               : ReduceSumOp();
  };
  for (Operation *user : d.getUsers()) {
    if ((sum = isBiasSum(user, d)))
      break;
    if (auto r = dyn_cast<ReshapeOp>(user); r && r->getBlock() == block)
      for (Operation *u : r.getResult().getUsers())
        if ((sum = isBiasSum(u, r.getResult()))) {
          sumView = r;
          break;
        }
    if (sum)
      break;
  }
  chain.yields = {d};
  if (sum) {
    if (sumView)
      body.push_back(sumView);
    body.push_back(sum);
    chain.yields.push_back(sum.getResult());
  }
  chain.epilogue = sum ? GemmEpilogue::DGeluBGrad : GemmEpilogue::DGelu;
  chain.body = std::move(body);
  chain.inputs = {matmul.getLhs(), matmul.getRhs(), pre};
  chain.insertBefore = last;
  return true;
}

/// bgrad: dW = matmul(dY, X) transpose_lhs and db = reduce_sum(dY, [0]).
static bool matchBgrad(MatmulOp matmul, Chain &chain) {
  if (!matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
      matmul.getType().getRank() != 2 || !isFusible(matmul.getType()))
    return false;
  Block *block = matmul->getBlock();
  Value dy = matmul.getLhs();
  ReduceSumOp sum;
  for (Operation *user : dy.getUsers())
    if (auto s = dyn_cast<ReduceSumOp>(user);
        s && s->getBlock() == block &&
        s.getDimensions() == ArrayRef<int64_t>{0}) {
      sum = s;
      break;
    }
  if (!sum)
    return false;
  Operation *first =
      matmul->isBeforeInBlock(sum) ? matmul.getOperation() : sum.getOperation();
  // The other operand must be defined where the fused op goes.
  Operation *rhsDef = matmul.getRhs().getDefiningOp();
  if (first == sum && rhsDef && rhsDef->getBlock() == block &&
      !rhsDef->isBeforeInBlock(sum))
    return false;
  chain.epilogue = GemmEpilogue::BGrad;
  chain.body = {matmul, sum};
  chain.inputs = {matmul.getLhs(), matmul.getRhs()};
  chain.yields = {matmul.getResult(), sum.getResult()};
  chain.insertBefore = first;
  return true;
}

namespace {
struct GptcFuseGemmEpiloguesPass final
    : mlir::gptc::impl::GptcFuseGemmEpiloguesPassBase<
          GptcFuseGemmEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    if (func.isExternal())
      return;
    for (Block *block : getStepBlocks(func)) {
      // Each form over the whole block before the next: dgelu finds the
      // GELU inputs gelu_aux yields, bgrad the sums dgelu did not take.
      auto each = [&](auto match) {
        using OpTy = std::remove_pointer_t<
            typename llvm::function_traits<decltype(match)>::template arg_t<0>>;
        SmallVector<OpTy> ops;
        for (Operation &op : *block)
          if (auto o = dyn_cast<OpTy>(op))
            ops.push_back(o);
        for (OpTy op : ops) {
          Chain chain;
          if (match(op, chain))
            fuse(chain);
        }
      };
      each(+[](LinearOp op, Chain &c) { return matchGeluAux(op, c); });
      each(+[](GeluGradOp op, Chain &c) { return matchDgelu(op, c); });
      each(+[](MatmulOp op, Chain &c) { return matchBgrad(op, c); });
    }
  }
};
} // namespace
