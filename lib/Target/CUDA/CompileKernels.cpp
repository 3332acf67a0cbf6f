//===- CompileKernels.cpp - A module's kernels for NVIDIA GPUs --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Target/CUDA/CompileKernels.h"

#include "Indexing.h"

#include "gptc/Analysis/KernelSharing.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Target/CPU/Passes.h"
#include "gptc/Target/ExportProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::gptc;

/// A host function's buffers as the launch plans number them: its
/// arguments, then its allocations in order.
static DenseMap<Value, int64_t> bufferIndices(func::FuncOp func) {
  DenseMap<Value, int64_t> index;
  for (BlockArgument arg : func.getArguments())
    index[arg] = arg.getArgNumber();
  int64_t next = func.getNumArguments();
  for (auto alloc : func.getBody().front().getOps<memref::AllocOp>())
    index[alloc] = next++;
  return index;
}

/// Per host function, per launch in order: how many times the launch's
/// body sweeps each buffer (by bufferIndices), read from the mapped loops
/// (before canonicalization folds a loop of one iteration away).
using LaunchPasses = llvm::StringMap<std::vector<DenseMap<int64_t, int64_t>>>;

static LaunchPasses countLaunchPasses(ModuleOp module) {
  LaunchPasses result;
  for (auto func : module.getOps<func::FuncOp>()) {
    DenseMap<Value, int64_t> index = bufferIndices(func);
    std::vector<DenseMap<int64_t, int64_t>> &launches = result[func.getName()];
    for (Operation &launch : func.getBody().front()) {
      // A launch: one gptc-gpu-map-reductions built, or a nest mapped onto
      // blocks and threads (a launch once converted).
      if (!isa<gpu::LaunchOp>(launch) &&
          !(isa<scf::ParallelOp>(launch) &&
            launch.hasAttr(gpu::getMappingAttrName())))
        continue;
      // Each access's site: the outermost sequential loop of the body
      // around it, or none (the body itself). A buffer's passes are its
      // sites.
      DenseMap<int64_t, llvm::SmallPtrSet<Operation *, 4>> sites;
      launch.getRegion(0).walk([&](Operation *op) {
        Value m;
        if (auto load = dyn_cast<memref::LoadOp>(op))
          m = load.getMemRef();
        else if (auto store = dyn_cast<memref::StoreOp>(op))
          m = store.getMemRef();
        else
          return;
        auto it = index.find(viewSource(m));
        if (it == index.end())
          return;
        Operation *site = nullptr;
        for (Operation *p = op->getParentOp(); p != &launch;
             p = p->getParentOp())
          if (isa<scf::ForOp>(p))
            site = p;
        sites[it->second].insert(site);
      });
      DenseMap<int64_t, int64_t> passes;
      for (auto &[buffer, where] : sites)
        passes[buffer] = static_cast<int64_t>(where.size());
      launches.push_back(std::move(passes));
    }
  }
  return result;
}

StringRef mlir::gptc::stringifyCudaImageFormat(CudaImageFormat format) {
  switch (format) {
  case CudaImageFormat::Assembly:
    return "assembly";
  case CudaImageFormat::Binary:
    return "bin";
  case CudaImageFormat::Fatbin:
    return "fatbin";
  case CudaImageFormat::Host:
    return "host";
  }
  llvm_unreachable("a CUDA image format");
}

std::optional<CudaImageFormat> mlir::gptc::cudaImageFormatOf(StringRef option) {
  return llvm::StringSwitch<std::optional<CudaImageFormat>>(option)
      .Case("isa", CudaImageFormat::Assembly)
      .Case("bin", CudaImageFormat::Binary)
      .Case("fatbin", CudaImageFormat::Fatbin)
      .Case("host", CudaImageFormat::Host)
      .Default(std::nullopt);
}

FailureOr<CudaKernels> mlir::gptc::readCudaLaunchPlans(ModuleOp lowered) {
  CudaKernels result;
  for (auto binary : lowered.getOps<gpu::BinaryOp>()) {
    if (!result.image.empty() || binary.getObjects().size() != 1)
      return binary.emitOpError("expected one object for one GPU");
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    result.image = object.getObject().getValue().str();
    switch (object.getFormat()) {
    case gpu::CompilationTarget::Assembly:
      result.format = CudaImageFormat::Assembly;
      break;
    case gpu::CompilationTarget::Binary:
      result.format = CudaImageFormat::Binary;
      break;
    case gpu::CompilationTarget::Fatbin:
      result.format = CudaImageFormat::Fatbin;
      break;
    case gpu::CompilationTarget::Offload:
      return binary.emitOpError("holds LLVM IR for offloading, not an image "
                                "the CUDA runtime loads");
    }
  }
  for (auto func : lowered.getOps<func::FuncOp>()) {
    CudaKernelPlan plan;
    plan.name = func.getName().str();
    plan.numOperands = func.getNumArguments();
    // Buffers: the function's arguments (operands, then results, as the
    // kernel ABI orders them), then each allocation.
    DenseMap<Value, int64_t> bufferIndex = bufferIndices(func);
    auto constant = [](Value v) -> std::optional<int64_t> {
      if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
        return c.value();
      return std::nullopt;
    };
    for (Operation &op : func.getBody().front()) {
      if (isa<arith::ConstantOp, func::ReturnOp>(op))
        continue;
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        MemRefType type = alloc.getType();
        if (!type.hasStaticShape() || !type.getLayout().isIdentity())
          return alloc.emitOpError("is not a dense static temporary");
        plan.temporaryBytes.push_back(
            type.getNumElements() *
            static_cast<int64_t>(type.getElementTypeBitWidth() / 8));
        continue;
      }
      auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
      if (!launch)
        return op.emitOpError("has no place in a GPU launch sequence");
      CudaLaunch l;
      l.function = launch.getKernelName().str();
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      Value dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
      for (int i = 0; i < 6; ++i) {
        std::optional<int64_t> v = constant(dims[i]);
        if (!v)
          return launch.emitOpError("has a launch size that is not constant");
        (i < 3 ? l.grid[i] : l.block[i - 3]) = *v;
      }
      for (Value arg : launch.getKernelOperands()) {
        auto it = bufferIndex.find(arg);
        if (it == bufferIndex.end())
          return launch.emitOpError("passes a value that is not a kernel "
                                    "buffer or temporary");
        l.args.push_back(it->second);
      }
      plan.launches.push_back(std::move(l));
    }
    result.kernels.push_back(std::move(plan));
  }
  return result;
}

FailureOr<CudaKernels> mlir::gptc::compileModuleKernelsForCuda(
    ModuleOp module, const GpuKernelLoweringPipelineOptions &requested,
    function_ref<LogicalResult(PassManager &)> configure) {
  auto run = [&](PassManager &pm, ModuleOp on) -> LogicalResult {
    if (configure && failed(configure(pm)))
      return failure();
    return pm.run(on);
  };
  // The virtual device's image: the same kernels up to NVVM, then as host
  // code under the emulation (gptc-gpu-emulate-on-host{export-kernels}),
  // in a shared object for this CPU.
  std::optional<CudaImageFormat> format = cudaImageFormatOf(requested.format);
  if (!format)
    return emitError(module.getLoc())
           << "unknown CUDA image format '" << requested.format
           << "' (isa, bin, fatbin or host)";
  bool host = *format == CudaImageFormat::Host;
  GpuKernelLoweringPipelineOptions options;
  options.copyOptionValuesFrom(requested);
  if (host)
    options.format = "none";
  // MLIR's NVPTX serialization wants the toolkit (libdevice, and ptxas for
  // a cubin) even for PTX: say so before it fails on a path.
  if (options.format != "none" && options.toolkit.empty() &&
      defaultCudaToolkit().empty())
    return emitError(module.getLoc())
           << "the CUDA target needs the CUDA toolkit (nvvm/libdevice, and "
              "ptxas for a cubin): install it at /usr/local/cuda or set "
              "CUDA_HOME";
  // 1. The kernel functions, in a module of their own, with each kernel's
  //    operand and result counts (the host function has them all as
  //    arguments).
  FailureOr<OwningOpRef<ModuleOp>> outlined = outlineKernelModule(module);
  if (failed(outlined))
    return failure();
  OwningOpRef<ModuleOp> kernels = std::move(*outlined);
  if (kernels->getBody()->empty())
    return CudaKernels{*format, "", {}};
  llvm::StringMap<std::pair<int64_t, int64_t>> counts;
  llvm::StringMap<std::vector<int64_t>> sizes;
  for (auto func : kernels->getOps<func::FuncOp>()) {
    counts[func.getName()] = {func.getNumArguments(), func.getNumResults()};
    std::vector<int64_t> &bytes = sizes[func.getName()];
    auto add = [&](Type t) {
      auto shaped = dyn_cast<ShapedType>(t);
      bytes.push_back(shaped && shaped.hasStaticShape() &&
                              shaped.getElementType().isIntOrFloat()
                          ? shaped.getNumElements() *
                                static_cast<int64_t>(
                                    (shaped.getElementTypeBitWidth() + 7) / 8)
                          : 0);
    };
    llvm::for_each(func.getArgumentTypes(), add);
    llvm::for_each(func.getResultTypes(), add);
  }
  // 2. Loops mapped onto blocks and threads, what each launch sweeps,
  //    then GPU functions and launch sequences.
  PassManager launches(module.getContext());
  buildGpuMappingStage(launches, options);
  if (failed(run(launches, *kernels)))
    return failure();
  LaunchPasses passes = countLaunchPasses(*kernels);
  PassManager lower(module.getContext());
  buildGpuOutlineStage(lower, options);
  if (failed(run(lower, *kernels)))
    return failure();
  FailureOr<CudaKernels> result = readCudaLaunchPlans(*kernels);
  if (failed(result))
    return failure();
  if (host) {
    PassManager emulate(module.getContext());
    GptcGpuEmulateOnHostPassOptions emulateOptions;
    emulateOptions.exportKernels = true;
    emulate.addPass(createGptcGpuEmulateOnHostPass(emulateOptions));
    if (failed(run(emulate, *kernels)))
      return failure();
    FailureOr<std::string> library =
        compileKernelsToSharedObject(*kernels, CpuCodegenOptions());
    if (failed(library))
      return failure();
    result->format = CudaImageFormat::Host;
    result->image = std::move(*library);
  }
  llvm::StringMap<std::vector<std::string>> users;
  for (const auto &[name, function] : kernelFunctionNames(module))
    users[function].push_back(name.str());
  for (CudaKernelPlan &plan : result->kernels) {
    // Itself first, then the others in name order (a StringMap's order is
    // not stable).
    std::vector<std::string> &who = users[plan.name];
    llvm::sort(who, [&](const std::string &a, const std::string &b) {
      return std::make_pair(a != plan.name, a) <
             std::make_pair(b != plan.name, b);
    });
    plan.users = who;
    const auto &counted = passes[plan.name];
    if (counted.size() != plan.launches.size())
      return emitError(module.getLoc())
             << "GPU kernel " << plan.name << " has " << plan.launches.size()
             << " launches after outlining, " << counted.size() << " before";
    for (auto [l, sweeps] : llvm::zip(plan.launches, counted))
      for (int64_t arg : l.args)
        l.passes.push_back(std::max<int64_t>(1, sweeps.lookup(arg)));
    auto [operands, results] = counts.lookup(plan.name);
    plan.numOperands = operands;
    plan.numResults = results;
    plan.bufferBytes = sizes.lookup(plan.name);
    // Every result is some launch's argument (a launch that only reads it
    // would be a bug the runtime could not see).
    for (int64_t r = operands; r < operands + results; ++r)
      if (llvm::none_of(plan.launches, [&](const CudaLaunch &l) {
            return llvm::is_contained(l.args, r);
          }))
        return emitError(module.getLoc())
               << "GPU kernel " << plan.name << " computes result "
               << r - operands << " in no launch";
  }
  return result;
}

/// The host function a kernel's name says it is in (`<function>_k<n>_`).
static StringRef functionOf(StringRef name) {
  for (size_t at = name.find("_k"); at != StringRef::npos;
       at = name.find("_k", at + 2)) {
    StringRef rest = name.drop_front(at + 2);
    size_t digits = rest.find_first_not_of("0123456789");
    if (digits > 0 && digits != StringRef::npos && rest[digits] == '_')
      return name.take_front(at);
  }
  return name;
}

/// How many of the module's kernels run `plan`'s code (1 where unknown).
static int64_t uses(const CudaKernelPlan &plan) {
  return std::max<int64_t>(1, static_cast<int64_t>(plan.users.size()));
}

/// The launches' bytes against the operands' (printCudaLaunchPlans), per
/// host function, each kernel that runs a plan counted (a plan shared by
/// kernels with the same body runs once for each).
static void printTraffic(const CudaKernels &kernels, raw_ostream &os) {
  struct Row {
    const CudaKernelPlan *plan;
    int64_t swept = 0, passed = 0, least = 0;
    /// The function's kernels that run it, and the first of them.
    int64_t runs = 1;
    StringRef shown;
  };
  llvm::MapVector<StringRef, std::vector<Row>> byFunction;
  // The functions in the order their first compiled kernels come.
  for (const CudaKernelPlan &plan : kernels.kernels)
    byFunction[functionOf(plan.name)];
  for (const CudaKernelPlan &plan : kernels.kernels) {
    int64_t buffers = plan.numOperands + plan.numResults;
    if (static_cast<int64_t>(plan.bufferBytes.size()) != buffers)
      return;
    Row r{&plan};
    for (int64_t b : plan.bufferBytes)
      r.least += b;
    for (const CudaLaunch &l : plan.launches)
      for (auto [k, i] : llvm::enumerate(l.args)) {
        int64_t bytes = i < buffers ? plan.bufferBytes[i]
                                    : plan.temporaryBytes[i - buffers];
        r.passed += bytes;
        r.swept += bytes * (k < l.passes.size() ? l.passes[k] : 1);
      }
    llvm::MapVector<StringRef, std::pair<int64_t, StringRef>> runs;
    for (const std::string &user : plan.users) {
      auto &[n, first] = runs[functionOf(user)];
      if (n++ == 0)
        first = user;
    }
    if (runs.empty())
      runs[functionOf(plan.name)] = {1, plan.name};
    for (auto &[function, run] : runs) {
      r.runs = run.first;
      r.shown = run.second;
      byFunction[function].push_back(r);
    }
  }
  auto mb = [](int64_t bytes) {
    return llvm::format("%.1f MB", static_cast<double>(bytes) / 1e6);
  };
  auto ratio = [](int64_t passed, int64_t least) {
    return llvm::format("%.2fx",
                        least ? static_cast<double>(passed) / least : 0.0);
  };
  for (auto &[function, rows] : byFunction) {
    int64_t swept = 0, passed = 0, least = 0;
    for (const Row &r : rows) {
      swept += r.swept * r.runs;
      passed += r.passed * r.runs;
      least += r.least * r.runs;
    }
    os << "traffic of @" << function << ": its launches sweep " << mb(swept)
       << " (each argument whole, each pass over it), " << ratio(swept, least)
       << "; " << mb(passed) << " if repeated passes hit in cache, "
       << ratio(passed, least) << "; for " << mb(least)
       << " of kernel operands and results once\n";
    std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) {
      return (a.swept - a.least) * a.runs > (b.swept - b.least) * b.runs;
    });
    for (size_t i = 0; i < std::min<size_t>(rows.size(), 5); ++i) {
      const Row &r = rows[i];
      if (r.swept <= r.least)
        break;
      os << "  " << r.shown << ": " << mb(r.swept) << ", "
         << ratio(r.swept, r.least) << " (" << mb(r.passed) << ", "
         << ratio(r.passed, r.least) << ") for " << mb(r.least) << " in "
         << r.plan->launches.size() << " launches";
      if (r.runs > 1)
        os << ", run by " << r.runs << " kernels";
      if (r.shown != r.plan->name)
        os << " (the code of " << r.plan->name << ")";
      os << "\n";
    }
  }
}

void mlir::gptc::printCudaLaunchPlans(const CudaKernels &kernels,
                                      raw_ostream &os) {
  // The step's kernels and launches (a plan shared by kernels with the
  // same body counted for each), then what is compiled.
  // GPU functions: those the image holds (gptc-gpu-share-functions keeps
  // one of each body, launched by every launch of that body).
  int64_t kernelCount = 0, launches = 0;
  llvm::StringSet<> functions;
  for (const CudaKernelPlan &plan : kernels.kernels) {
    kernelCount += uses(plan);
    launches += static_cast<int64_t>(plan.launches.size()) * uses(plan);
    for (const CudaLaunch &l : plan.launches)
      functions.insert(l.function);
  }
  os << kernelCount << " kernels, " << launches << " launches, one "
     << stringifyCudaImageFormat(kernels.format) << " image of "
     << kernels.image.size()
     << " bytes; compiled once each: " << kernels.kernels.size()
     << " distinct kernels, " << functions.size() << " GPU functions\n";
  for (const CudaKernelPlan &plan : kernels.kernels) {
    os << "kernel " << plan.name << " (" << plan.numOperands << " operands, "
       << plan.numResults << " results";
    if (!plan.temporaryBytes.empty()) {
      os << ", temporaries";
      for (int64_t bytes : plan.temporaryBytes)
        os << " " << bytes;
      os << " bytes";
    }
    os << ")";
    if (plan.users.size() > 1)
      os << ", also run by " << plan.users.size() - 1
         << (plan.users.size() == 2 ? " kernel" : " kernels")
         << " of the same body";
    os << "\n";
    int64_t buffers = plan.numOperands + plan.numResults;
    for (const CudaLaunch &l : plan.launches) {
      os << "  launch " << l.function << " grid (" << l.grid[0] << ", "
         << l.grid[1] << ", " << l.grid[2] << ") block (" << l.block[0] << ", "
         << l.block[1] << ", " << l.block[2] << ") args (";
      llvm::interleaveComma(l.args, os, [&](int64_t i) {
        if (i < plan.numOperands)
          os << "in" << i;
        else if (i < buffers)
          os << "out" << i - plan.numOperands;
        else
          os << "tmp" << i - buffers;
      });
      os << ")\n";
    }
  }
  printTraffic(kernels, os);
}

LogicalResult mlir::gptc::compileProgramForCuda(
    ModuleOp module, ArrayRef<StringRef> functions,
    ::gptc::program::Program &program,
    const GpuKernelLoweringPipelineOptions &options,
    function_ref<LogicalResult(PassManager &)> configure) {
  if (failed(exportProgram(module, functions, program)))
    return failure();
  // Only the exported functions' kernels go into the image.
  OwningOpRef<ModuleOp> exported = cloneExported(module, functions);
  FailureOr<CudaKernels> kernels =
      compileModuleKernelsForCuda(*exported, options, configure);
  if (failed(kernels))
    return failure();
  ::gptc::program::CudaModule &cuda = *program.mutable_cuda();
  cuda.set_chip(options.chip);
  switch (kernels->format) {
  case CudaImageFormat::Assembly:
    cuda.set_format(::gptc::program::CUDA_IMAGE_ASSEMBLY);
    break;
  case CudaImageFormat::Binary:
    cuda.set_format(::gptc::program::CUDA_IMAGE_BINARY);
    break;
  case CudaImageFormat::Fatbin:
    cuda.set_format(::gptc::program::CUDA_IMAGE_FATBIN);
    break;
  case CudaImageFormat::Host:
    cuda.set_format(::gptc::program::CUDA_IMAGE_HOST);
    break;
  }
  cuda.set_image(std::move(kernels->image));
  for (const CudaKernelPlan &plan : kernels->kernels) {
    ::gptc::program::CudaKernel &k = *cuda.add_kernels();
    k.set_symbol(plan.name);
    k.set_num_operands(plan.numOperands);
    k.set_num_results(plan.numResults);
    for (int64_t bytes : plan.temporaryBytes)
      k.add_temporary_bytes(bytes);
    for (const CudaLaunch &l : plan.launches) {
      ::gptc::program::CudaLaunch &out = *k.add_launches();
      out.set_function(l.function);
      for (int i = 0; i < 3; ++i) {
        out.add_grid(l.grid[i]);
        out.add_block(l.block[i]);
      }
      for (int64_t a : l.args)
        out.add_args(a);
    }
  }
  return success();
}
