//===- EmulateOnHost.cpp - NVVM kernels as host code, for tests -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc-gpu-emulate-on-host; see include/gptc/Target/CUDA/Passes.td. The
// functions it calls are lib/Runtime/VirtualCuda/NvvmEmulation.cpp's.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::gptc {
#define GEN_PASS_DEF_GPTCGPUEMULATEONHOSTPASS
#include "gptc/Target/CUDA/Passes.h.inc"
} // namespace mlir::gptc

using namespace mlir;
using namespace mlir::gptc;

namespace {

/// The emulation library's number for an NVVM special register, as
/// `gptc_emu_sreg` takes it; -1 for one it does not know.
int specialRegister(StringRef opName) {
  if (!opName.consume_front("nvvm.read.ptx.sreg."))
    return -1;
  return llvm::StringSwitch<int>(opName)
      .Case("tid.x", 0)
      .Case("tid.y", 1)
      .Case("tid.z", 2)
      .Case("ntid.x", 3)
      .Case("ntid.y", 4)
      .Case("ntid.z", 5)
      .Case("ctaid.x", 6)
      .Case("ctaid.y", 7)
      .Case("ctaid.z", 8)
      .Case("nctaid.x", 9)
      .Case("nctaid.y", 10)
      .Case("nctaid.z", 11)
      .Case("laneid", 12)
      .Case("warpsize", 13)
      .Default(-1);
}

/// A kernel moved into the host module.
struct EmulatedKernel {
  LLVM::LLVMFuncOp func;
  /// It, called with CUDA's kernel-parameter array.
  LLVM::LLVMFuncOp thunk;
  /// Whether a thread may wait for others (a barrier or a shuffle, in it or
  /// in a function it calls); one that cannot runs without a fiber.
  bool synchronizes = true;
  /// Its name in the gpu.module, its `nvvm.maxntid` (threads a block; 0:
  /// none), and per parameter the bytes its launches pass (the largest;
  /// -1: a scalar; 0: not static).
  std::string name;
  int64_t maxThreads = 0;
  /// The bytes of shared memory (address space 3) it declares.
  int64_t sharedBytes = 0;
  SmallVector<int64_t> paramBytes;
};

/// A function the gpu.module declares (libdevice's): it keeps its name.
bool isDeclaration(Operation *op) {
  auto func = dyn_cast<LLVM::LLVMFuncOp>(op);
  return func && func.isExternal();
}

struct GptcGpuEmulateOnHostPass final
    : mlir::gptc::impl::GptcGpuEmulateOnHostPassBase<GptcGpuEmulateOnHostPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// The declaration of the library function `name` of `type` in the host
  /// module, created on first use.
  LLVM::LLVMFuncOp libraryFunction(StringRef name, LLVM::LLVMFunctionType type);
  LogicalResult rewriteNvvm(LLVM::LLVMFuncOp func);
  LLVM::LLVMFuncOp buildThunk(LLVM::LLVMFuncOp kernel);
  bool synchronizes(LLVM::LLVMFuncOp kernel);
  LogicalResult rewriteLaunch(gpu::LaunchFuncOp launch, EmulatedKernel &kernel);
  /// export-kernels: the thunk renamed gptc_kernel_<name> and the
  /// description gptc_kernel_info_<name>.
  void exportKernel(EmulatedKernel &kernel);

  ModuleOp module;
  /// The shared-memory globals moved out of the gpu.modules, and their
  /// bytes.
  llvm::StringMap<int64_t> sharedGlobals;
};

/// The bytes of an LLVM global of `type` (arrays, structs without padding,
/// scalars).
int64_t typeBytes(Type type) {
  if (auto array = dyn_cast<LLVM::LLVMArrayType>(type))
    return static_cast<int64_t>(array.getNumElements()) *
           typeBytes(array.getElementType());
  if (auto structure = dyn_cast<LLVM::LLVMStructType>(type)) {
    int64_t bytes = 0;
    for (Type t : structure.getBody())
      bytes += typeBytes(t);
    return bytes;
  }
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.getNumElements() * typeBytes(vector.getElementType());
  if (type.isIntOrFloat())
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  return 8;
}

LLVM::LLVMFuncOp
GptcGpuEmulateOnHostPass::libraryFunction(StringRef name,
                                          LLVM::LLVMFunctionType type) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return existing;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
}

LogicalResult GptcGpuEmulateOnHostPass::rewriteNvvm(LLVM::LLVMFuncOp func) {
  MLIRContext *ctx = &getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  Type voidType = LLVM::LLVMVoidType::get(ctx);
  SmallVector<Operation *> nvvmOps;
  func.walk([&](Operation *op) {
    if (isa<NVVM::NVVMDialect>(op->getDialect()))
      nvvmOps.push_back(op);
  });
  for (Operation *op : nvvmOps) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto constant = [&](Type type, int64_t v) -> Value {
      return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
    };
    if (int reg = specialRegister(op->getName().getStringRef()); reg >= 0) {
      auto sreg = libraryFunction("gptc_emu_sreg",
                                  LLVM::LLVMFunctionType::get(i32, {i32}));
      Value v =
          LLVM::CallOp::create(b, loc, sreg, ValueRange{constant(i32, reg)})
              .getResult();
      auto type = dyn_cast<IntegerType>(op->getResult(0).getType());
      if (!type)
        return op->emitOpError("has a result the emulation cannot give");
      if (type.getWidth() > 32)
        v = LLVM::ZExtOp::create(b, loc, type, v);
      else if (type.getWidth() < 32)
        v = LLVM::TruncOp::create(b, loc, type, v);
      op->getResult(0).replaceAllUsesWith(v);
      op->erase();
      continue;
    }
    if (isa<NVVM::Barrier0Op>(op)) {
      auto barrier = libraryFunction("gptc_emu_barrier0",
                                     LLVM::LLVMFunctionType::get(voidType, {}));
      LLVM::CallOp::create(b, loc, barrier, ValueRange{});
      op->erase();
      continue;
    }
    if (auto shfl = dyn_cast<NVVM::ShflOp>(op)) {
      // gptc_emu_shfl(kind, mask, value bits, offset, mask and clamp):
      // the source lane's bits in the low word, whether the source lane
      // was in range in bit 32.
      Value value = shfl.getVal();
      Type valueType = value.getType();
      if (valueType != i32 && !valueType.isF32())
        return op->emitOpError("shuffles a ")
               << valueType << "; the emulation shuffles i32 and f32";
      if (valueType.isF32())
        value = LLVM::BitcastOp::create(b, loc, i32, value);
      auto function = libraryFunction(
          "gptc_emu_shfl",
          LLVM::LLVMFunctionType::get(i64, {i32, i32, i32, i32, i32}));
      Value packed =
          LLVM::CallOp::create(
              b, loc, function,
              ValueRange{constant(i32, static_cast<int64_t>(shfl.getKind())),
                         shfl.getThreadMask(), value, shfl.getOffset(),
                         shfl.getMaskAndClamp()})
              .getResult();
      Value bits = LLVM::TruncOp::create(b, loc, i32, packed);
      Value result = bits;
      if (valueType.isF32())
        result = LLVM::BitcastOp::create(b, loc, valueType, bits);
      if (shfl.getReturnValueAndIsValid()) {
        Value high = LLVM::LShrOp::create(b, loc, packed, constant(i64, 32));
        Value valid =
            LLVM::TruncOp::create(b, loc, IntegerType::get(ctx, 1), high);
        Type structType = shfl.getType();
        Value s = LLVM::PoisonOp::create(b, loc, structType);
        s = LLVM::InsertValueOp::create(b, loc, s, result,
                                        ArrayRef<int64_t>{0});
        result =
            LLVM::InsertValueOp::create(b, loc, s, valid, ArrayRef<int64_t>{1});
      }
      shfl.getResult().replaceAllUsesWith(result);
      op->erase();
      continue;
    }
    return op->emitOpError("has no host emulation (gptc-gpu-emulate-on-host "
                           "knows NVVM's special registers, barrier0 and "
                           "shfl.sync)");
  }
  return success();
}

LLVM::LLVMFuncOp GptcGpuEmulateOnHostPass::buildThunk(LLVM::LLVMFuncOp kernel) {
  MLIRContext *ctx = &getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64 = IntegerType::get(ctx, 64);
  OpBuilder b(kernel);
  b.setInsertionPointAfter(kernel);
  Location loc = kernel.getLoc();
  auto thunk = LLVM::LLVMFuncOp::create(
      b, loc, (kernel.getName() + "_thunk").str(),
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
  Block *body = thunk.addEntryBlock(b);
  b.setInsertionPointToStart(body);
  Value params = body->getArgument(0);
  SmallVector<Value> args;
  for (auto [i, type] : llvm::enumerate(kernel.getFunctionType().getParams())) {
    Value index = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(i));
    Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, params, index);
    Value address = LLVM::LoadOp::create(b, loc, ptr, slot);
    args.push_back(LLVM::LoadOp::create(b, loc, type, address));
  }
  LLVM::CallOp::create(b, loc, kernel, args);
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return thunk;
}

bool GptcGpuEmulateOnHostPass::synchronizes(LLVM::LLVMFuncOp kernel) {
  bool result = false;
  kernel.walk([&](LLVM::CallOp call) {
    std::optional<StringRef> callee = call.getCallee();
    auto target =
        callee ? module.lookupSymbol<LLVM::LLVMFuncOp>(*callee) : nullptr;
    if (!target || !target.isExternal() || *callee == "gptc_emu_barrier0" ||
        *callee == "gptc_emu_shfl")
      result = true;
  });
  return result;
}

LogicalResult GptcGpuEmulateOnHostPass::rewriteLaunch(gpu::LaunchFuncOp launch,
                                                      EmulatedKernel &kernel) {
  MLIRContext *ctx = &getContext();
  if (!launch.getAsyncDependencies().empty() || launch.getAsyncToken() ||
      launch.getDynamicSharedMemorySize() || launch.hasClusterSize())
    return launch.emitOpError("is asynchronous, clustered or takes dynamic "
                              "shared memory; the emulation runs plain "
                              "launches");
  ArrayRef<Type> params = kernel.func.getFunctionType().getParams();
  if (params.size() != launch.getNumKernelOperands())
    return launch.emitOpError("passes ")
           << launch.getNumKernelOperands() << " arguments to a kernel of "
           << params.size() << " (bare pointers expected)";
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64 = IntegerType::get(ctx, 64);
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  auto toI64 = [&](Value v) -> Value {
    return arith::IndexCastOp::create(b, loc, i64, v);
  };
  Value one = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(1));
  SmallVector<Value> cells;
  kernel.paramBytes.resize(params.size(), -1);
  for (auto [i, arg, param] :
       llvm::enumerate(launch.getKernelOperands(), params)) {
    Value v = arg;
    if (auto type = dyn_cast<MemRefType>(arg.getType())) {
      // The bytes from the aligned pointer to the view's last element.
      int64_t bytes = 0;
      SmallVector<int64_t> strides;
      int64_t offset;
      if (type.hasStaticShape() && type.getElementType().isIntOrFloat() &&
          succeeded(type.getStridesAndOffset(strides, offset)) &&
          !ShapedType::isDynamic(offset) &&
          llvm::none_of(strides, ShapedType::isDynamic)) {
        int64_t last = offset;
        for (auto [size, stride] : llvm::zip(type.getShape(), strides))
          last += (size - 1) * stride;
        bytes = type.getNumElements() == 0
                    ? 0
                    : (last + 1) * static_cast<int64_t>(
                                       (type.getElementTypeBitWidth() + 7) / 8);
      }
      int64_t &known = kernel.paramBytes[i];
      known = known < 0
                  ? bytes
                  : (known == 0 || bytes == 0 ? 0 : std::max(known, bytes));
      Value address =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arg);
      v = LLVM::IntToPtrOp::create(b, loc, ptr, toI64(address));
    } else if (arg.getType().isIndex()) {
      v = toI64(arg);
    }
    if (v.getType() != param)
      return launch.emitOpError("passes ")
             << arg.getType() << " where the kernel takes " << param;
    Value cell = LLVM::AllocaOp::create(b, loc, ptr, param, one);
    LLVM::StoreOp::create(b, loc, v, cell);
    cells.push_back(cell);
  }
  Value count =
      LLVM::ConstantOp::create(b, loc, i64,
                               b.getI64IntegerAttr(std::max<int64_t>(
                                   1, static_cast<int64_t>(cells.size()))));
  Value array = LLVM::AllocaOp::create(b, loc, ptr, ptr, count);
  for (auto [i, cell] : llvm::enumerate(cells)) {
    Value index = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(i));
    Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, array, index);
    LLVM::StoreOp::create(b, loc, cell, slot);
  }
  Value function =
      LLVM::AddressOfOp::create(b, loc, ptr, kernel.thunk.getName());
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  Value flag = LLVM::ConstantOp::create(
      b, loc, b.getI32Type(), b.getI32IntegerAttr(kernel.synchronizes));
  SmallVector<Value> operands{function,       toI64(grid.x),  toI64(grid.y),
                              toI64(grid.z),  toI64(block.x), toI64(block.y),
                              toI64(block.z), array,          flag};
  StringRef name = "gptc_emu_launch";
  if (!module.lookupSymbol<func::FuncOp>(name)) {
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    auto declaration = func::FuncOp::create(
        top, module.getLoc(), name,
        FunctionType::get(ctx, ValueRange(operands).getTypes(), {}));
    declaration.setPrivate();
  }
  func::CallOp::create(b, loc, name, TypeRange{}, operands);
  launch.erase();
  return success();
}

void GptcGpuEmulateOnHostPass::exportKernel(EmulatedKernel &kernel) {
  MLIRContext *ctx = &getContext();
  Type i64 = IntegerType::get(ctx, 64);
  kernel.thunk.setName(("gptc_kernel_" + kernel.name).c_str());
  SmallVector<int64_t> info{kernel.synchronizes, kernel.maxThreads,
                            kernel.sharedBytes, kernel.func.getNumArguments()};
  for (unsigned i = 0; i < kernel.func.getNumArguments(); ++i) {
    int64_t bytes = i < kernel.paramBytes.size() ? kernel.paramBytes[i] : 0;
    Type param = kernel.func.getArgument(i).getType();
    bool pointer = isa<LLVM::LLVMPointerType>(param);
    // A scalar: minus its bytes (the runtime copies its value).
    int64_t scalar =
        param.isIntOrFloat()
            ? -static_cast<int64_t>((param.getIntOrFloatBitWidth() + 7) / 8)
            : -8;
    info.push_back(pointer ? std::max<int64_t>(bytes, 0) : scalar);
    info.push_back(pointer && !kernel.func.getArgAttr(
                                  i, LLVM::LLVMDialect::getReadonlyAttrName()));
  }
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto type = LLVM::LLVMArrayType::get(i64, info.size());
  auto value = DenseElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(info.size())}, i64),
      ArrayRef<int64_t>(info));
  LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                         LLVM::Linkage::External,
                         "gptc_kernel_info_" + kernel.name, value);
}

void GptcGpuEmulateOnHostPass::runOnOperation() {
  module = getOperation();
  MLIRContext *ctx = &getContext();
  SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
  // (module, kernel) -> the kernel in the host module and its thunk.
  DenseMap<std::pair<StringAttr, StringAttr>, EmulatedKernel> kernels;
  SmallVector<LLVM::LLVMFuncOp> moved;
  for (gpu::GPUModuleOp gpuModule : gpuModules) {
    // Definitions renamed inside the gpu.module first, so that the
    // references between them follow.
    for (Operation &op : gpuModule.getBody()->without_terminator()) {
      auto symbol = dyn_cast<SymbolOpInterface>(op);
      if (!symbol || !isa<LLVM::LLVMFuncOp, LLVM::GlobalOp>(op)) {
        op.emitOpError("has no host emulation (gptc-gpu-emulate-on-host "
                       "moves LLVM functions and globals)");
        return signalPassFailure();
      }
      if (isDeclaration(&op))
        continue;
      auto renamed = StringAttr::get(ctx, "__emu_" + gpuModule.getName() + "_" +
                                              symbol.getName());
      if (failed(SymbolTable::replaceAllSymbolUses(&op, renamed, gpuModule)))
        return signalPassFailure();
      symbol.setName(renamed);
    }
    for (Operation &op : llvm::make_early_inc_range(
             gpuModule.getBody()->without_terminator())) {
      auto symbol = cast<SymbolOpInterface>(op);
      if (isDeclaration(&op) && module.lookupSymbol(symbol.getNameAttr())) {
        op.erase(); // declared by another gpu.module already
        continue;
      }
      if (module.lookupSymbol(symbol.getNameAttr())) {
        op.emitOpError("clashes with a host symbol of the same name");
        return signalPassFailure();
      }
      op.moveBefore(gpuModule);
      if (auto global = dyn_cast<LLVM::GlobalOp>(op)) {
        if (global.getAddrSpace() == 3)
          sharedGlobals[global.getSymName()] =
              typeBytes(global.getGlobalType());
        global.setAddrSpace(0);
      }
      auto func = dyn_cast<LLVM::LLVMFuncOp>(op);
      if (!func || func.isExternal())
        continue;
      moved.push_back(func);
      if (!func->hasAttr(gpu::GPUDialect::getKernelFuncAttrName()))
        continue;
      StringRef name = func.getName();
      name.consume_front(("__emu_" + gpuModule.getName() + "_").str());
      EmulatedKernel kernel{func, LLVM::LLVMFuncOp()};
      kernel.name = name.str();
      if (auto maxntid =
              func->getAttrOfType<DenseI32ArrayAttr>("nvvm.maxntid")) {
        kernel.maxThreads = 1;
        for (int32_t d : maxntid.asArrayRef())
          kernel.maxThreads *= d;
      }
      kernels[{gpuModule.getNameAttr(), StringAttr::get(ctx, name)}] =
          std::move(kernel);
    }
  }
  // Shared memory is ordinary memory on the host; casts between address
  // spaces become no-ops.
  AttrTypeReplacer flatten;
  flatten.addReplacement(
      [&](LLVM::LLVMPointerType type) -> std::optional<Type> {
        if (type.getAddressSpace() == 0)
          return std::nullopt;
        return LLVM::LLVMPointerType::get(ctx);
      });
  for (LLVM::LLVMFuncOp func : moved) {
    flatten.recursivelyReplaceElementsIn(func, /*replaceAttrs=*/true,
                                         /*replaceLocs=*/false,
                                         /*replaceTypes=*/true);
    func.walk([](LLVM::AddrSpaceCastOp cast) {
      cast.getResult().replaceAllUsesWith(cast.getArg());
      cast.erase();
    });
    if (failed(rewriteNvvm(func)))
      return signalPassFailure();
    // NVVM's and the gpu dialect's function attributes mean a device
    // entry point to LLVM's translation; on the host it is a function.
    for (NamedAttribute attr : llvm::to_vector(func->getDiscardableAttrs()))
      if (attr.getName().strref().starts_with("nvvm.") ||
          attr.getName().strref().starts_with("gpu."))
        func->removeAttr(attr.getName());
  }
  for (auto &entry : kernels) {
    entry.second.thunk = buildThunk(entry.second.func);
    entry.second.synchronizes = synchronizes(entry.second.func);
    llvm::StringSet<> used;
    entry.second.func.walk([&](LLVM::AddressOfOp address) {
      auto it = sharedGlobals.find(address.getGlobalName());
      if (it != sharedGlobals.end() && used.insert(it->first()).second)
        entry.second.sharedBytes += it->second;
    });
  }
  WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
    auto it =
        kernels.find({launch.getKernelModuleName(), launch.getKernelName()});
    if (it == kernels.end()) {
      launch.emitOpError("launches a kernel that is not in the module");
      return WalkResult::interrupt();
    }
    if (failed(rewriteLaunch(launch, it->second)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return signalPassFailure();
  for (gpu::GPUModuleOp gpuModule : gpuModules)
    gpuModule.erase();
  module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  if (!exportKernels)
    return;
  llvm::StringSet<> names;
  for (auto &entry : kernels) {
    if (!names.insert(entry.second.name).second) {
      module.emitError("two gpu.modules have a kernel named '")
          << entry.second.name << "'; the virtual device's image has one";
      return signalPassFailure();
    }
    exportKernel(entry.second);
  }
  // The host functions and what only they use (constants as globals).
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (isa<func::FuncOp>(op))
      op.erase();
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (isa<memref::GlobalOp>(op))
      op.erase();
}

} // namespace
