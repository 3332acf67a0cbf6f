//===- Codegen.cpp - Kernels to a shared object for the CPU ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The lowering pipeline (kernel functions -> LLVM dialect) and the
// ahead-of-time compilation of its result: MLIR's LLVM IR export, LLVM's
// O3 pipeline for the host CPU (its loop vectorizer turns the kernels'
// innermost loops into AVX-512 where the CPU has it), an object file, and
// a shared object linked by the system's C compiler driver. The runtime
// loads that shared object; it links no MLIR or LLVM itself.
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CPU/Passes.h"

#include "gptc/Conversion/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// The lowering pipeline
//===----------------------------------------------------------------------===//

void mlir::gptc::buildKernelTensorStage(OpPassManager &pm, bool rowRange) {
  OpPassManager &tensors = pm.nest<func::FuncOp>();
  ConvertGptcToLinalgPassOptions full;
  full.full = true;
  tensors.addPass(createConvertGptcToLinalgPass(full));
  tensors.addPass(createGptcKernelFusePass());
  tensors.addPass(createCanonicalizerPass());
  GptcKernelAbiPassOptions abi;
  abi.rowRange = rowRange;
  tensors.addPass(createGptcKernelAbiPass(abi));
}

void mlir::gptc::buildKernelLoweringPipeline(OpPassManager &pm) {
  // 1. Tensors: gptc -> linalg, chains fused into one loop nest, then the
  //    runtime's calling convention.
  buildKernelTensorStage(pm, /*rowRange=*/true);
  // 2. Buffers: each result computed in the runtime's buffer for it.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createOneShotBufferizePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // 3. Loops over a row range.
  OpPassManager &loops = pm.nest<func::FuncOp>();
  loops.addPass(createConvertLinalgToLoopsPass());
  loops.addPass(createGptcKernelParallelRangePass());
  // 4. LLVM dialect, bare pointers, one entry point per kernel.
  pm.addPass(createSCFToControlFlowPass());
  // bf16 conversions as integer arithmetic (round to nearest even), which
  // vectorizes on every x86 CPU: without AVX512-BF16, LLVM would call
  // compiler-rt's __truncsfbf2, which the C compiler's runtime that links
  // the kernel library may lack (GCC 12's libgcc does).
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  // What has no LLVM intrinsic (erf in f64) calls libm.
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createGptcKernelEntryPass());
}

//===----------------------------------------------------------------------===//
// LLVM IR and machine code
//===----------------------------------------------------------------------===//

namespace {
/// The target machine for `options` (the host's CPU and features unless a
/// CPU is named).
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const CpuCodegenOptions &options, std::string &error) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpu = options.cpu;
  std::string features;
  if (cpu.empty()) {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures list;
    for (const auto &[name, on] : llvm::sys::getHostCPUFeatures())
      list.AddFeature(name, on);
    features = list.getString();
  }
  llvm::TargetOptions targetOptions;
  auto level = options.optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
               : options.optLevel == 2 ? llvm::CodeGenOptLevel::Default
               : options.optLevel == 1 ? llvm::CodeGenOptLevel::Less
                                       : llvm::CodeGenOptLevel::None;
  return std::unique_ptr<llvm::TargetMachine>(
      target->createTargetMachine(triple, cpu, features, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, level));
}

/// Translates `kernels` and runs LLVM's optimization pipeline on it.
std::unique_ptr<llvm::Module> optimize(ModuleOp kernels,
                                       llvm::LLVMContext &context,
                                       llvm::TargetMachine &machine,
                                       int optLevel) {
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  kernels.getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, context, "gptc_kernels");
  if (!module)
    return nullptr;
  module->setDataLayout(machine.createDataLayout());
  module->setTargetTriple(machine.getTargetTriple());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel >= 3   ? llvm::OptimizationLevel::O3
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                  : optLevel == 1 ? llvm::OptimizationLevel::O1
                                                  : llvm::OptimizationLevel::O0;
  llvm::ModulePassManager passes = builder.buildPerModuleDefaultPipeline(level);
  passes.run(*module, mam);
  return module;
}
} // namespace

FailureOr<std::string>
mlir::gptc::translateKernelsToLLVMIR(ModuleOp kernels,
                                     const CpuCodegenOptions &options) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  if (!machine)
    return emitError(kernels.getLoc()) << "no target for this CPU: " << error;
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      optimize(kernels, context, *machine, options.optLevel);
  if (!module)
    return emitError(kernels.getLoc()) << "cannot translate to LLVM IR";
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, nullptr);
  return text;
}

FailureOr<std::string>
mlir::gptc::compileKernelsToSharedObject(ModuleOp kernels,
                                         const CpuCodegenOptions &options) {
  auto fail = [&](const Twine &message) -> FailureOr<std::string> {
    return emitError(kernels.getLoc()) << message;
  };
  // 1. Optimized LLVM IR, then an object file in memory.
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  if (!machine)
    return fail("no target for this CPU: " + error);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      optimize(kernels, context, *machine, options.optLevel);
  if (!module)
    return fail("cannot translate the kernels to LLVM IR");
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager emit;
    if (machine->addPassesToEmitFile(emit, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return fail("the target cannot emit object files");
    emit.run(*module);
  }
  // 2. A shared object, linked by the C compiler driver.
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("gptc-kernels", dir))
    return fail("cannot create a temporary directory: " + ec.message());
  auto removeDir = [&] { llvm::sys::fs::remove_directories(dir); };
  llvm::scope_exit<decltype(removeDir)> cleanup(std::move(removeDir));
  llvm::SmallString<128> objectPath(dir), libraryPath(dir);
  llvm::sys::path::append(objectPath, "kernels.o");
  llvm::sys::path::append(libraryPath, "kernels.so");
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(objectPath, ec);
    if (ec)
      return fail("cannot write " + objectPath + ": " + ec.message());
    out.write(object.data(), object.size());
  }
  llvm::ErrorOr<std::string> driver = llvm::sys::findProgramByName("cc");
  if (!driver)
    driver = llvm::sys::findProgramByName("gcc");
  if (!driver)
    return fail("no C compiler driver (cc) to link the generated kernels "
                "with: install gcc, or run without generated kernels "
                "(gptc train --codegen=false)");
  llvm::SmallVector<llvm::StringRef> args = {*driver, "-shared", "-o",
                                             libraryPath, objectPath};
#ifdef GPTC_COMPILER_RT_BUILTINS
  // What the code calls for an instruction the CPU lacks (__truncsfbf2).
  if (llvm::sys::fs::exists(GPTC_COMPILER_RT_BUILTINS))
    args.push_back(GPTC_COMPILER_RT_BUILTINS);
#endif
  args.push_back("-lm");
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*driver, args, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0)
    return fail("linking the kernels failed (" + *driver + "): " +
                (message.empty() ? "exit " + std::to_string(rc) : message));
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> library =
      llvm::MemoryBuffer::getFile(libraryPath);
  if (!library)
    return fail("cannot read " + libraryPath);
  return (*library)->getBuffer().str();
}
