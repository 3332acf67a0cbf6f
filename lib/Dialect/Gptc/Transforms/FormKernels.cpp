//===- FormKernels.cpp - Group ops into gptc.kernel regions ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Greedy producer-consumer grouping in program order, as fusion passes of
// XLA and IREE start out: an op with a lowering joins the kernel of one of
// its producers when the kernel, placed where the op is, still precedes
// every outside use of the values it defines; otherwise it starts a
// kernel of its own. The kernels of its other producers merge into that
// one under the same condition.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"

#include "gptc/Conversion/Passes.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCFORMKERNELSPASS
#include "gptc/Dialect/Gptc/Transforms/Passes.h.inc"
} // namespace mlir::gptc

#define DEBUG_TYPE "gptc-form-kernels"

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// Utilities
//===----------------------------------------------------------------------===//

/// Whether every use of `group`'s results outside the group (and outside
/// `next`) comes after `next` in the block, so that a kernel placed at
/// `next` dominates them all.
static bool canAppend(ArrayRef<Operation *> group, Operation *next) {
  Block *block = next->getBlock();
  llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
  members.insert(next);
  for (Operation *op : group)
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers()) {
        Operation *at = block->findAncestorOpInBlock(*user);
        if (!at || members.contains(at))
          continue;
        if (!next->isBeforeInBlock(at))
          return false;
      }
  return true;
}

/// A value's bytes, 0 for one of unknown size.
static int64_t bytesOf(Value v) {
  return std::max<int64_t>(0, getTensorBytes(v.getType()));
}

/// Whether moving `group` to `op` (merged into the op's kernel) holds no
/// more bytes alive until the op: the group's inputs from outside, which
/// the op does not read itself, against the group's values the op reads.
static bool shrinksLiveBytes(ArrayRef<Operation *> group, Operation *op) {
  llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
  llvm::SmallPtrSet<Value, 8> inputs, read;
  int64_t kept = 0, freed = 0;
  for (Operation *member : group)
    for (Value operand : member->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((def && members.contains(def)) ||
          llvm::is_contained(op->getOperands(), operand))
        continue;
      if (inputs.insert(operand).second)
        kept += bytesOf(operand);
    }
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (def && members.contains(def) && read.insert(operand).second)
      freed += bytesOf(operand);
  }
  return kept <= freed;
}

/// Short name of a gptc op for kernel names: "gelu_grad" for gptc.gelu_grad.
static StringRef shortName(Operation *op) {
  return op->getName().stripDialect();
}

/// Replaces the ops of `group` (in block order) by one gptc.kernel named
/// `name` at the position of the last.
static void buildKernel(ArrayRef<Operation *> group, StringRef name) {
  Operation *last = group.back();
  llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
  // 1. Operands from outside the group, in order of first use, and results
  //    used outside it.
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : group) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !members.contains(def))
        inputs.insert(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            Operation *at = last->getBlock()->findAncestorOpInBlock(*user);
            return !at || !members.contains(at);
          }))
        outputs.push_back(result);
  }
  // 2. The kernel and its region, a copy of the group.
  OpBuilder b(last);
  Location loc = b.getFusedLoc(
      llvm::map_to_vector(group, [](Operation *op) { return op->getLoc(); }));
  auto kernel = KernelOp::create(b, loc, TypeRange(ValueRange(outputs)),
                                 inputs.getArrayRef(), name);
  Block *body = new Block();
  kernel.getBody().push_back(body);
  IRMapping map;
  for (Value input : inputs)
    map.map(input, body->addArgument(input.getType(), input.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  for (Operation *op : group)
    inner.clone(*op, map);
  YieldOp::create(inner, loc, llvm::map_to_vector(outputs, [&](Value v) {
                    return map.lookup(v);
                  }));
  // 3. Outside uses read the kernel's results; the group goes.
  for (auto [value, result] : llvm::zip(outputs, kernel.getResults()))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return use.getOwner() != kernel && !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(group))
    op->erase();
}

/// Whether the CUDA target generates `op`'s code: every op with a linalg
/// lowering on static shapes, except those a library or the runtime does
/// better (GEMMs: cuBLASLt; attention: cuDNN or a flash kernel; the
/// embedding gradient: a scatter-add with atomics; reshapes: views) and
/// those that are not computation (collectives, the rank's offset,
/// regions).
static bool hasGpuLowering(Operation *op) {
  if (!isa<GptcDialect>(op->getDialect()) ||
      isa<LinearOp, MatmulOp, CausalAttentionOp, CausalAttentionGradOp,
          AttentionBlockOp, AttentionBlockGradOp, AttentionMergeOp,
          AttentionMergeGradOp, EmbeddingGradOp, ReshapeOp, ShardOffsetOp,
          GradAllReduceOp, AccumulateOp, KernelOp, FusedGemmOp, YieldOp>(op))
    return false;
  auto isStatic = [](Type t) {
    auto shaped = dyn_cast<RankedTensorType>(t);
    return shaped && shaped.hasStaticShape();
  };
  return op->getNumResults() > 0 &&
         llvm::all_of(op->getOperandTypes(), isStatic) &&
         llvm::all_of(op->getResultTypes(), isStatic);
}

/// Forms the kernels of one block (not of nested regions); `counter`
/// numbers them across the function.
static void formKernels(Block &block, StringRef prefix, int64_t &counter,
                        bool gpu) {
  // 1. Group, in program order.
  SmallVector<SmallVector<Operation *>> groups;
  DenseMap<Operation *, int64_t> groupOf;
  for (Operation &op : block) {
    if (!(gpu ? hasGpuLowering(&op) : hasLinalgLowering(&op)))
      continue;
    int64_t chosen = -1;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? groupOf.find(def) : groupOf.end();
      if (it != groupOf.end() && canAppend(groups[it->second], &op)) {
        chosen = it->second;
        break;
      }
    }
    if (chosen < 0) {
      chosen = groups.size();
      groups.emplace_back();
    }
    // The kernels of the op's other producers join too where the merged
    // kernel, placed at the op, still precedes every outside use of their
    // values: the op then reads them in registers, not from memory (a sum
    // of three casts, the casts of gradients into the optimizer's update).
    // Only where that holds fewer bytes alive: a kernel that moves to the
    // op keeps its inputs alive until there, in place of the values the op
    // reads (a cast from 16 bits, yes; a column sum of a large gradient,
    // no).
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? groupOf.find(def) : groupOf.end();
      if (it == groupOf.end() || it->second == chosen)
        continue;
      SmallVector<Operation *> merged(groups[chosen]);
      llvm::append_range(merged, groups[it->second]);
      if (!canAppend(merged, &op) || !shrinksLiveBytes(groups[it->second], &op))
        continue;
      llvm::sort(merged, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      int64_t absorbed = it->second;
      for (Operation *member : groups[absorbed])
        groupOf[member] = chosen;
      groups[absorbed].clear();
      groups[chosen] = std::move(merged);
    }
    groups[chosen].push_back(&op);
    groupOf[&op] = chosen;
  }
  // 2. One kernel per group.
  for (SmallVector<Operation *> &group : groups) {
    if (group.empty())
      continue;
    std::string name = (prefix + "_k" + Twine(counter++)).str();
    for (Operation *op : ArrayRef(group).take_front(3))
      name += "_" + shortName(op).str();
    buildKernel(group, name);
  }
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct GptcFormKernelsPass final
    : mlir::gptc::impl::GptcFormKernelsPassBase<GptcFormKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    if (func.isExternal())
      return;
    // Never the blocks of kernels already formed or of GEMM calls with
    // their epilogues.
    SmallVector<Block *> blocks = getStepBlocks(func);
    int64_t counter = 0;
    for (Block *block : blocks)
      formKernels(*block, func.getName(), counter,
                  target == KernelTarget::Cuda);
  }
};
} // namespace
