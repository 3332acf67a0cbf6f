//===- KernelReport.cpp - The generated kernels of a step ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/KernelReport.h"

#include "gptc/Analysis/KernelSharing.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::gptc;

/// A value's bytes, 0 for one of unknown size.
static int64_t tensorBytes(Type type) {
  return std::max<int64_t>(0, getTensorBytes(type));
}

std::string mlir::gptc::describeLocation(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string out;
    for (Location part : fused.getLocations())
      out += (out.empty() ? "" : " + ") + describeLocation(part);
    return out;
  }
  std::string name;
  if (auto named = dyn_cast<NameLoc>(loc)) {
    name = named.getName().str();
    loc = named.getChildLoc();
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else if (name.empty())
    loc.print(os);
  if (!name.empty())
    os << (out.empty() ? "" : " ") << "(" << name << ")";
  return out;
}

/// The block index in a `h.<i>.` location name, or -1.
static int64_t layerOf(Location loc) {
  int64_t layer = -1;
  loc->walk([&](Location l) {
    if (auto named = dyn_cast<NameLoc>(l)) {
      StringRef n = named.getName().getValue();
      if (n.consume_front("h.")) {
        int64_t i;
        if (!n.consumeInteger(10, i))
          layer = i;
      }
    }
    return layer >= 0 ? WalkResult::interrupt() : WalkResult::advance();
  });
  return layer;
}

std::vector<KernelInfo> mlir::gptc::collectKernels(func::FuncOp func) {
  std::vector<KernelInfo> out;
  func.walk([&](KernelOp kernel) {
    KernelInfo k;
    k.name = kernel.getName().str();
    k.flops = kernel.getFlopCount();
    for (Value v : kernel.getInputs())
      k.bytes += tensorBytes(v.getType());
    for (Value v : kernel.getResults())
      k.bytes += tensorBytes(v.getType());
    Block &body = kernel.getBody().front();
    for (Operation &op : body.without_terminator()) {
      k.ops.push_back(op.getName().stripDialect().str() + " @ " +
                      describeLocation(op.getLoc()));
      if (k.layer < 0)
        k.layer = layerOf(op.getLoc());
      // A value that never leaves the kernel.
      for (Value r : op.getResults())
        if (llvm::none_of(r.getUsers(),
                          [](Operation *u) { return isa<YieldOp>(u); }))
          k.internalBytes += tensorBytes(r.getType());
    }
    out.push_back(std::move(k));
  });
  return out;
}

namespace {
/// The runtime's library kernels of one op kind in a function.
struct LibraryKind {
  int64_t kernels = 0, flops = 0, bytes = 0, tensors = 0;
};
} // namespace

/// Every op the runtime runs as a library call (not generated code): the
/// ops of the function and of its accumulation bodies, outside
/// gptc.kernel regions; reshapes are views and run nothing.
static llvm::MapVector<StringRef, LibraryKind> libraryKernels(func::FuncOp f) {
  llvm::MapVector<StringRef, LibraryKind> kinds;
  f.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<KernelOp>(op))
      return WalkResult::skip();
    if (op == f.getOperation() || isa<AccumulateOp, ReshapeOp, YieldOp>(op) ||
        op->hasTrait<OpTrait::IsTerminator>())
      return WalkResult::advance();
    // A GEMM with its epilogue is one call, by its form; its region's ops
    // run inside it.
    auto fused = dyn_cast<FusedGemmOp>(op);
    StringRef name =
        fused ? StringAttr::get(op->getContext(),
                                "gptc.fused_gemm " +
                                    stringifyGemmEpilogue(fused.getEpilogue()))
                    .getValue()
              : op->getName().getStringRef();
    LibraryKind &k = kinds[name];
    ++k.kernels;
    if (auto cost = dyn_cast<CostModelOpInterface>(op))
      k.flops += cost.getFlopCount();
    for (Value v : op->getOperands())
      k.bytes += tensorBytes(v.getType());
    for (Value v : op->getResults())
      k.bytes += tensorBytes(v.getType());
    if (auto multi = dyn_cast<MultiAdamWOp>(op))
      k.tensors += multi.getNumParams();
    return fused ? WalkResult::skip() : WalkResult::advance();
  });
  return kinds;
}

void mlir::gptc::printKernelReport(func::FuncOp func, raw_ostream &os) {
  std::vector<KernelInfo> kernels = collectKernels(func);
  os << "@" << func.getSymName() << ": " << kernels.size()
     << " generated kernels\n";
  // The targets compile one function per distinct body (KernelSharing.h).
  llvm::StringMap<std::string> functions;
  if (auto module = func->getParentOfType<ModuleOp>())
    functions = kernelFunctionNames(module);
  llvm::StringSet<> compiled;
  int64_t ops = 0, bytes = 0, internal = 0;
  llvm::MapVector<int64_t, int64_t> perLayer;
  for (const KernelInfo &k : kernels) {
    os << "  " << k.name << ": " << k.ops.size() << " ops, " << k.flops
       << " FLOPs, " << k.bytes << " bytes moved";
    if (k.internalBytes)
      os << ", " << k.internalBytes << " bytes kept in registers";
    auto shared = functions.find(k.name);
    std::string code =
        shared != functions.end() ? shared->second : std::string(k.name);
    compiled.insert(code);
    if (code != k.name)
      os << "; the code of " << code;
    os << "\n";
    for (const std::string &op : k.ops)
      os << "    " << op << "\n";
    ops += k.ops.size();
    bytes += k.bytes;
    internal += k.internalBytes;
    ++perLayer[k.layer];
  }
  os << "  total: " << ops << " ops in " << kernels.size() << " kernels, "
     << bytes << " bytes moved, " << internal
     << " bytes of intermediate values never stored\n";
  os << "  compiled: " << compiled.size() << " distinct kernels for these "
     << kernels.size() << " (the same body, shapes and types compiled once "
     << "for the whole program)\n";
  for (auto [layer, n] : perLayer)
    if (layer >= 0)
      os << "  block " << layer << ": " << n << " kernels\n";

  // The rest of the step: GEMMs, row reductions, attention, the optimizer
  // and the collectives, by op.
  llvm::MapVector<StringRef, LibraryKind> kinds = libraryKernels(func);
  int64_t library = 0;
  for (auto &[name, k] : kinds)
    library += k.kernels;
  os << "@" << func.getSymName() << ": " << library
     << " library kernels (the runtime's own, by op)\n";
  for (auto &[name, k] : kinds) {
    os << "  " << name << ": " << k.kernels
       << (k.kernels == 1 ? " kernel" : " kernels");
    if (k.tensors)
      os << " over " << k.tensors << " tensors";
    os << ", " << k.flops << " FLOPs, " << k.bytes << " bytes moved\n";
  }
}
