//===- gptc.cpp - The gptc compiler driver ---------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
//   gptc MODEL.pbtxt --emit=summary|mlir|train|program|comm|kernels [-o OUT]
//   gptc MODEL.pbtxt --emit=cuda|ptx|cubin [--cuda-chip=sm_90] [-o OUT]
//   gptc train MODEL.pbtxt ...      (Train.cpp)
//   gptc sample CHECKPOINT ...
//
// Reads a model description, builds its forward graph, runs the frontend
// pipeline (the same C++ function that gptc-opt registers as
// `gptc-frontend-pipeline`) and prints the requested stage. MLIR's pass
// manager, timing and printing options work here as in gptc-opt
// (--mlir-print-ir-after-all, --mlir-timing, ...), and
// --split-input-file/--verify-diagnostics test frontend errors.
//
//===----------------------------------------------------------------------===//

#include "Onnx.h"
#include "Plan.h"
#include "Schedule.h"
#include "Summary.h"
#include "Train.h"

#include "gptc/Analysis/CommReport.h"
#include "gptc/Analysis/KernelReport.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/InitAll.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Target/CPU/CompileProgram.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Target/CUDA/CompileKernels.h"
#include "gptc/Target/ExportProgram.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <google/protobuf/text_format.h>

#include <functional>
#include <sstream>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::OptionCategory gptcCategory("gptc options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<model.pbtxt>"),
                                          cl::init("-"), cl::cat(gptcCategory));

static cl::opt<std::string> outputFilename("o", cl::desc("Output filename"),
                                           cl::value_desc("filename"),
                                           cl::init("-"),
                                           cl::cat(gptcCategory));

namespace {
enum class Emit {
  MLIR,
  Train,
  Program,
  Summary,
  Comm,
  Kernels,
  Cuda,
  Ptx,
  Cubin,
  Artifact,
  Schedule,
  Streams
};
} // namespace

static cl::opt<Emit> emitAction(
    "emit", cl::desc("What to produce"), cl::init(Emit::Summary),
    cl::values(
        clEnumValN(Emit::MLIR, "mlir", "The forward graph in the gptc dialect"),
        clEnumValN(Emit::Train, "train",
                   "The training step after gptc-train-pipeline (with "
                   "--device cuda: as the GPU compiles it)"),
        clEnumValN(Emit::Program, "program",
                   "The runtime artifact of the training step "
                   "(protobuf text)"),
        clEnumValN(Emit::Summary, "summary",
                   "Parameters, FLOPs and per-device model state"),
        clEnumValN(Emit::Comm, "comm",
                   "The training step's collectives: bytes and "
                   "volume sent per rank"),
        clEnumValN(Emit::Kernels, "kernels",
                   "The training step's generated kernels: the ops "
                   "each fuses, FLOPs and bytes"),
        clEnumValN(Emit::Cuda, "cuda",
                   "The training step's kernels for the GPU: the "
                   "launch sequence of each"),
        clEnumValN(Emit::Streams, "streams",
                   "The GPU runtime's host-side sequence of @forward and "
                   "@train_step: each step's stream, where collectives "
                   "overlap and are waited for"),
        clEnumValN(Emit::Ptx, "ptx", "The training step's GPU kernels as PTX"),
        clEnumValN(Emit::Cubin, "cubin",
                   "The training step's GPU kernels as a cubin "
                   "(needs the CUDA toolkit's ptxas)"),
        clEnumValN(Emit::Artifact, "artifact",
                   "The compiled program with its training settings "
                   "(binary protobuf) for gptc-runtime; --device picks "
                   "the CPU's or the GPU's code"),
        clEnumValN(Emit::Schedule, "schedule",
                   "The pipeline's stages and schedule: each stage's "
                   "program with its sends and receives, the bubble, the "
                   "activations in flight (--pipeline-schedule, "
                   "--schedule-svg, --schedule-trace)")),
    cl::cat(gptcCategory));

static cl::opt<std::string>
    cudaChipOpt("cuda-chip",
                cl::desc("GPU architecture of --emit=cuda|ptx|cubin and "
                         "--device cuda"),
                cl::init("sm_90"), cl::cat(gptcCategory));

static cl::opt<int64_t> cudaRowRegistersOpt(
    "cuda-row-registers",
    cl::desc("Columns a lane of a GPU row kernel (layer norm, its "
             "gradient) holds in registers, 0-128 (default 32: rows of up "
             "to 1024 read once); 0: each phase loops over the row again"),
    cl::init(32), cl::cat(gptcCategory));

static cl::opt<std::string> deviceOpt(
    "device",
    cl::desc("What runs the step: cpu (default), cuda (an NVIDIA GPU per "
             "process) or virtual-cuda (the GPU runtime on the virtual CUDA "
             "device: CPU stand-ins of CUDA, cuBLASLt and NCCL that check "
             "every access; for tests, slow); "
             "--emit=program prints the artifact for it"),
    cl::init("cpu"), cl::cat(gptcCategory));

FailureOr<DeviceChoice> mlir::gptc::getDeviceChoice() {
  if (deviceOpt != "cpu" && deviceOpt != "cuda" &&
      deviceOpt != "virtual-cuda") {
    llvm::errs()
        << "gptc: error: --device takes cpu, cuda or virtual-cuda, got '"
        << deviceOpt << "'\n";
    return failure();
  }
  if (cudaRowRegistersOpt < 0 || cudaRowRegistersOpt > 128) {
    llvm::errs() << "gptc: error: --cuda-row-registers takes 0 to 128, got "
                 << cudaRowRegistersOpt << "\n";
    return failure();
  }
  DeviceChoice choice;
  choice.cuda = deviceOpt == "cuda" || deviceOpt == "virtual-cuda";
  choice.virtualDevice = deviceOpt == "virtual-cuda";
  choice.chip = cudaChipOpt;
  choice.rowRegisters = cudaRowRegistersOpt;
  return choice;
}

static cl::OptionCategory parallelCategory(
    "gptc parallel options (replace the description's)");
static cl::opt<std::string>
    meshOpt("mesh",
            cl::desc("Device mesh, e.g. dp=2,tp=2 (axes dp, tp, pp); 1 for "
                     "one device; auto: gptc plan's choice (with "
                     "--hardware and --devices)"),
            cl::value_desc("axis=size,..."), cl::init(""),
            cl::cat(parallelCategory));
static cl::opt<int> zeroStageOpt("zero-stage",
                                 cl::desc("ZeRO stage 0-3 on the data axis"),
                                 cl::init(-1), cl::cat(parallelCategory));
static cl::opt<int64_t>
    gradAccumOpt("grad-accum",
                 cl::desc("Gradient accumulation steps (microbatches per "
                          "optimizer step)"),
                 cl::init(-1), cl::cat(parallelCategory));

static cl::opt<bool> sequenceParallelOpt(
    "sequence-parallel",
    cl::desc("Megatron sequence parallelism on the tensor axis"),
    cl::init(false), cl::cat(parallelCategory));

static cl::opt<std::string> recomputeOpt(
    "recompute",
    cl::desc("Activation recomputation: none, selective (norms and GELUs) "
             "or full (each layer's forward again in its backward)"),
    cl::value_desc("none|selective|full"), cl::init(""),
    cl::cat(parallelCategory));

static cl::opt<double> bucketMbOpt(
    "bucket-mb",
    cl::desc("Gradient buckets: consecutive all-reduces combined into "
             "collectives of up to this many MiB (gptc-bucket-all-reduces; "
             "PyTorch DDP's default 25); 0: one collective per tensor"),
    cl::init(25.0), cl::cat(parallelCategory));

static cl::opt<bool> gemmEpiloguesOpt(
    "gemm-epilogues",
    cl::desc("Fold GELU, its gradient and bias gradients into the GEMM "
             "calls next to them (gptc-fuse-gemm-epilogues): cuBLASLt's "
             "epilogues on the GPU, where it is the default; on the CPU "
             "(default off) the product, then the epilogue over it"),
    cl::init(false), cl::cat(gptcCategory));

namespace {
enum class ZeroReduce { Step, Microbatch };
} // namespace
static cl::opt<ZeroReduce> zeroReduceOpt(
    "zero-reduce",
    cl::desc("ZeRO 2 and 3 with gradient accumulation: when gradients are "
             "reduce-scattered"),
    cl::values(clEnumValN(ZeroReduce::Step, "step",
                          "once per step, of the microbatches' sum (each "
                          "rank holds whole gradients through the loop; "
                          "FSDP's no_sync; the default)"),
               clEnumValN(ZeroReduce::Microbatch, "microbatch",
                          "every microbatch's, inside the loop (each rank "
                          "holds its slice; DeepSpeed's and FSDP's "
                          "default; the bytes once per microbatch)")),
    cl::init(ZeroReduce::Step),
    cl::cat(parallelCategory));

/// Set by --mesh auto when its plan reduces every microbatch.
static bool planReducesEachMicrobatch = false;

void mlir::gptc::setPlanReducesEachMicrobatch(bool each) {
  planReducesEachMicrobatch = each;
}

bool mlir::gptc::zeroReduceEachMicrobatch() {
  return zeroReduceOpt == ZeroReduce::Microbatch || planReducesEachMicrobatch;
}

bool mlir::gptc::gemmEpilogues(bool cuda) {
  return gemmEpiloguesOpt.getNumOccurrences() ? gemmEpiloguesOpt : cuda;
}

FailureOr<int64_t> mlir::gptc::getBucketBytes() {
  if (!(bucketMbOpt >= 0) || bucketMbOpt > 1e6) {
    llvm::errs() << "gptc: error: --bucket-mb takes a size in MiB from 0 to "
                    "1000000, got "
                 << bucketMbOpt << "\n";
    return failure();
  }
  return static_cast<int64_t>(bucketMbOpt * 1024 * 1024);
}

bool mlir::gptc::isMeshAuto() { return meshOpt == "auto"; }

bool mlir::gptc::explicitParallelOptions() {
  return zeroStageOpt.getNumOccurrences() || gradAccumOpt.getNumOccurrences() ||
         sequenceParallelOpt.getNumOccurrences() ||
         recomputeOpt.getNumOccurrences() ||
         zeroReduceOpt.getNumOccurrences() || pipelineOptionsGiven();
}

FailureOr<ParallelOverrides> mlir::gptc::getParallelOverrides() {
  ParallelOverrides o;
  if (meshOpt.getNumOccurrences()) {
    std::string error;
    if (failed(o.parseMesh(meshOpt, error))) {
      llvm::errs() << "gptc: error: " << error << "\n";
      return failure();
    }
  }
  if (zeroStageOpt.getNumOccurrences())
    o.zeroStage = zeroStageOpt;
  if (gradAccumOpt.getNumOccurrences())
    o.accumulation = gradAccumOpt;
  if (sequenceParallelOpt.getNumOccurrences())
    o.sequenceParallel = sequenceParallelOpt;
  if (recomputeOpt.getNumOccurrences()) {
    if (recomputeOpt != "none" && recomputeOpt != "selective" &&
        recomputeOpt != "full") {
      llvm::errs() << "gptc: error: --recompute takes none, selective or "
                      "full, got '"
                   << recomputeOpt << "'\n";
      return failure();
    }
    o.recompute = recomputeOpt;
  }
  return o;
}

static cl::opt<std::string> splitInputFile(
    "split-input-file", cl::ValueOptional,
    cl::callback([](const std::string &value) {
      if (value.empty())
        splitInputFile = "# -----";
    }),
    cl::desc("Split the input at this marker (default '# -----') and "
             "compile each chunk on its own"),
    cl::init(""), cl::cat(gptcCategory));

static cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check that the emitted diagnostics match the "
             "expected-* lines in the input"),
    cl::init(false), cl::cat(gptcCategory));

/// @forward and @train_step with their kernels as an sm_XY cubin (or the
/// virtual device's host code).
static LogicalResult compileCudaArtifact(ModuleOp module,
                                         const DeviceChoice &device,
                                         ::gptc::program::Program &program) {
  GpuKernelLoweringPipelineOptions options;
  options.chip = device.chip;
  options.rowRegisters = device.rowRegisters;
  options.format = cudaImageFormat(device.virtualDevice);
  return compileProgramForCuda(module, {"forward", "train_step"}, program,
                               options);
}

/// --emit=cuda|ptx|cubin: `module`'s kernels for the GPU (--cuda-chip),
/// their launch plans or the image.
static LogicalResult emitCudaKernels(ModuleOp module, raw_ostream &os) {
  GpuKernelLoweringPipelineOptions options;
  options.chip = cudaChipOpt;
  options.rowRegisters = cudaRowRegistersOpt;
  options.format = emitAction == Emit::Cubin ? "bin" : "isa";
  FailureOr<CudaKernels> kernels = compileModuleKernelsForCuda(module, options);
  if (failed(kernels))
    return failure();
  if (emitAction == Emit::Cuda)
    printCudaLaunchPlans(*kernels, os);
  else
    os << kernels->image;
  return success();
}

/// --emit=streams: what the GPU runtime enqueues for each function (and
/// each accumulation's body).
static void printStreams(const ::gptc::program::Program &program,
                         raw_ostream &os) {
  std::ostringstream text;
  std::function<void(const ::gptc::program::Function &)> print =
      [&](const ::gptc::program::Function &f) {
        ::gptc::runtime::printDeviceSchedule(f, text);
        for (const ::gptc::program::Kernel &k : f.kernels())
          if (k.op() == ::gptc::program::ACCUMULATE)
            print(k.accumulate().body());
      };
  for (const ::gptc::program::Function &f : program.functions())
    print(f);
  os << text.str();
}

/// --emit=program --device=cuda prints the image's size, not its bytes
/// (--emit=cubin writes them).
static void summarizeImage(::gptc::program::Program &program) {
  size_t bytes = program.cuda().image().size();
  program.mutable_cuda()->set_image("<" + std::to_string(bytes) + " bytes of " +
                                    program.cuda().format() + ">");
}

/// The description's training settings an artifact carries for
/// gptc-runtime (what the compiled step does not hold).
static void setTrainSettings(const ModelDescription &desc, StringRef text,
                             ::gptc::program::Program &program) {
  const ModelConfig &m = desc.getConfig();
  ::gptc::program::TrainSettings &t = *program.mutable_train();
  t.set_description(text.str());
  t.set_micro_batch(m.microBatchSize);
  t.set_seq_len(m.seqLen);
  t.set_vocab(m.vocabSize);
  t.set_steps(m.steps);
  t.set_eval_interval(m.evalInterval);
  t.set_checkpoint_interval(m.checkpointInterval);
  t.set_keep_checkpoints(m.keepCheckpoints);
  t.set_init_seed(m.initSeed);
  t.set_data_seed(m.dataSeed);
}

/// The artifact's bytes to `os`.
static LogicalResult writeArtifact(const ::gptc::program::Program &program,
                                   Location loc, raw_ostream &os) {
  std::string bytes;
  if (!program.SerializeToString(&bytes))
    return emitError(loc, "the artifact does not serialize (over 2 GiB?)");
  os << bytes;
  return success();
}

/// The outputs of a pipeline mesh, from gptc train's compilation: the
/// chunks and each stage's program (train), the artifact (program), each
/// stage's communication (comm), the chunks' kernels (kernels) and, for
/// the GPU, their launch plans, PTX, cubin and stream schedules.
static LogicalResult compilePipelineOutput(const ModelDescription &desc,
                                           StringRef text,
                                           MLIRContext &context,
                                           raw_ostream &os) {
  int64_t p = desc.getConfig().pipelineParallel;
  FailureOr<DeviceChoice> device = getDeviceChoice();
  if (failed(device))
    return failure();
  bool gpu = emitAction == Emit::Cuda || emitAction == Emit::Ptx ||
             emitAction == Emit::Cubin || emitAction == Emit::Streams;
  if (gpu)
    device->cuda = true;
  OwningOpRef<ModuleOp> module = importModel(desc, &context);
  ::gptc::program::Program program;
  // The artifact's code (the GPU's image, the CPU's kernel library) only
  // where it is printed (--device cuda --emit=program) or written
  // (--emit=artifact, what `mpirun gptc-runtime` runs); --emit=cuda/ptx/
  // cubin compile the chunks below.
  bool image = (device->cuda && emitAction == Emit::Program) ||
               emitAction == Emit::Artifact;
  if (!module || failed(compilePipeline(desc, *module, /*codegen=*/true,
                                        program, /*kernelLibrary=*/image,
                                        *device)))
    return failure();
  switch (emitAction) {
  case Emit::Train:
    module->print(os, OpPrintingFlags().enableDebugInfo(
                          /*enable=*/true, /*prettyForm=*/false));
    os << "\n";
    return success();
  case Emit::Artifact:
    setTrainSettings(desc, text, program);
    return writeArtifact(program, module->getLoc(), os);
  case Emit::Program: {
    if (image)
      summarizeImage(program);
    std::string text;
    google::protobuf::TextFormat::PrintToString(program, &text);
    os << text;
    return success();
  }
  case Emit::Cuda:
  case Emit::Ptx:
  case Emit::Cubin: {
    // The chunks' kernels only (as the artifact's image holds them).
    for (auto func : llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
      if (!llvm::any_of(program.functions(),
                        [&](const ::gptc::program::Function &f) {
                          return f.name() == func.getName();
                        }))
        func.erase();
    return emitCudaKernels(*module, os);
  }
  case Emit::Streams:
    printStreams(program, os);
    return success();
  case Emit::Comm:
    for (int64_t s = 0; s < p; ++s)
      if (failed(printCommReport(
              module->lookupSymbol<func::FuncOp>("stage" + std::to_string(s)),
              os)))
        return failure();
    os << "then the update on every rank: two f64 all_reduces (gradient "
          "norm, loss)"
       << (desc.getConfig().zeroStage >= 1 && desc.getConfig().dataParallel > 1
               ? " and, with ZeRO-1 or 2, the all_gather of each sliced "
                 "parameter over the data axis"
               : "")
       << "\n";
    return success();
  case Emit::Kernels:
    for (int64_t c = 0;; ++c) {
      auto f = module->lookupSymbol<func::FuncOp>("chunk" + std::to_string(c));
      auto b = module->lookupSymbol<func::FuncOp>("chunk" + std::to_string(c) +
                                                  "_backward");
      if (!f || !b)
        break;
      printKernelReport(f, os);
      printKernelReport(b, os);
    }
    return success();
  default:
    llvm_unreachable("handled before compiling");
  }
}

/// Compiles the description in `sourceMgr`'s main buffer and prints the
/// requested stage to `os`.
static LogicalResult compile(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                             raw_ostream &os) {
  FailureOr<ModelDescription> desc = parseDescription(sourceMgr, context);
  if (failed(desc))
    return failure();
  if (!desc->getOnnxModelPath().empty())
    return emitError(desc->locate({{"onnx_model"}}))
           << "the --emit kinds compile gptc's own GPTs so far; a "
              "description of an ONNX model trains (gptc train), and its "
              "graph prints with gptc MODEL.onnx --emit=mlir";
  if (emitAction == Emit::Schedule)
    return printPipelineSchedule(*desc, os);
  if (desc->getConfig().pipelineParallel > 1 && emitAction != Emit::Summary &&
      emitAction != Emit::MLIR)
    return compilePipelineOutput(
        *desc,
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer(),
        context, os);
  OwningOpRef<ModuleOp> module = importModel(*desc, &context);
  if (!module)
    return failure();

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  FailureOr<DeviceChoice> device = getDeviceChoice();
  if (failed(device))
    return failure();
  bool training = emitAction != Emit::MLIR && emitAction != Emit::Summary;
  if (training) {
    // The GPU's kernels take every op its code generation maps.
    TrainPipelineOptions options;
    FailureOr<int64_t> bucketBytes = getBucketBytes();
    if (failed(bucketBytes))
      return failure();
    options.bucketBytes = *bucketBytes;
    options.zeroReduceEachMicrobatch = zeroReduceEachMicrobatch();
    if (emitAction == Emit::Cuda || emitAction == Emit::Ptx ||
        emitAction == Emit::Cubin || emitAction == Emit::Streams ||
        ((emitAction == Emit::Program || emitAction == Emit::Artifact ||
          emitAction == Emit::Train) &&
         device->cuda))
      options.kernelTarget = "cuda";
    options.gemmEpilogues = gemmEpilogues(options.kernelTarget == "cuda");
    buildTrainPipeline(pm, options);
  } else
    buildFrontendPipeline(pm, FrontendPipelineOptions());
  if (failed(pm.run(*module)))
    return failure();

  switch (emitAction) {
  case Emit::MLIR:
  case Emit::Train:
    module->print(os, OpPrintingFlags().enableDebugInfo(
                          /*enable=*/true, /*prettyForm=*/false));
    os << "\n";
    return success();
  case Emit::Program: {
    ::gptc::program::Program program;
    if (device->cuda) {
      // The artifact `gptc train --device cuda` runs; the image is
      // summarized (--emit=cubin writes it).
      if (failed(compileCudaArtifact(*module, *device, program)))
        return failure();
      summarizeImage(program);
    } else if (failed(exportProgram(*module, {"forward", "train_step"},
                                    program))) {
      return failure();
    }
    std::string text;
    google::protobuf::TextFormat::PrintToString(program, &text);
    os << text;
    return success();
  }
  case Emit::Artifact: {
    ::gptc::program::Program program;
    if (device->cuda) {
      if (failed(compileCudaArtifact(*module, *device, program)))
        return failure();
    } else if (failed(compileProgram(*module, {"forward", "train_step"},
                                     program))) {
      return failure();
    }
    setTrainSettings(
        *desc,
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer(),
        program);
    return writeArtifact(program, module->getLoc(), os);
  }
  case Emit::Schedule: // answered before compiling
  case Emit::Summary:
    return printSummary(*desc, *module, os);
  case Emit::Kernels: {
    for (StringRef name : {"forward", "train_step"})
      if (auto func = module->lookupSymbol<func::FuncOp>(name))
        printKernelReport(func, os);
    return success();
  }
  case Emit::Cuda:
  case Emit::Ptx:
  case Emit::Cubin:
    return emitCudaKernels(*module, os);
  case Emit::Streams: {
    ::gptc::program::Program program;
    if (failed(exportProgram(*module, {"forward", "train_step"}, program)))
      return failure();
    printStreams(program, os);
    return success();
  }
  case Emit::Comm: {
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return module->emitError("no @train_step to report on");
    return printCommReport(step, os);
  }
  }
  llvm_unreachable("unknown --emit value");
}

/// Sets up diagnostics for one buffer (or one split chunk) and compiles it.
static LogicalResult processBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                   const DialectRegistry &registry,
                                   raw_ostream &os) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  if (!verifyDiagnostics) {
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    return compile(sourceMgr, context, os);
  }
  SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
  // The result of compiling does not matter here: the diagnostics do.
  (void)compile(sourceMgr, context, os);
  return handler.verify();
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // `gptc train MODEL` and `gptc sample CHECKPOINT` are subcommands; the
  // rest of the command line is parsed as usual.
  std::string command;
  if (argc > 1 &&
      (StringRef(argv[1]) == "train" || StringRef(argv[1]) == "sample" ||
       StringRef(argv[1]) == "plan" || StringRef(argv[1]) == "calibrate")) {
    command = argv[1];
    for (int i = 1; i + 1 < argc; ++i)
      argv[i] = argv[i + 1];
    --argc;
  }
  // Register before parsing: --mlir-print-ir-after=<pass> needs the names.
  registerAllPasses();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  registerAsmPrinterCLOptions();
  hideUnrelatedCommandLineOptions(&gptcCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "gptc: GPT model compiler\n\n"
      "  gptc MODEL.pbtxt --emit=mlir|train|program|summary\n"
      "  gptc MODEL.onnx --emit=mlir [--onnx-dim NAME=N]\n"
      "  gptc train MODEL.pbtxt [--data FILE]   train on the CPU\n"
      "  gptc sample CHECKPOINT                 generate text\n"
      "  gptc plan MODEL.pbtxt --hardware h100-node --devices N\n"
      "                                         rank parallel plans\n"
      "  [mpirun -np N] gptc calibrate -o F     measure this machine for "
      "gptc plan\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  if (command == "train")
    return runTrain(inputFilename, registry);
  if (command == "sample")
    return runSample(inputFilename, registry);
  if (command == "plan")
    return runPlan(inputFilename, registry);
  if (command == "calibrate")
    return runCalibrate(outputFilename == "-" ? std::string()
                                              : outputFilename.getValue());

  if (StringRef(inputFilename).ends_with(".onnx"))
    return runOnnx(inputFilename, emitAction == Emit::MLIR, outputFilename,
                   registry);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "gptc: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "gptc: " << error << "\n";
    return 1;
  }

  auto chunkFn = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                     raw_ostream &os) {
    return processBuffer(std::move(chunk), registry, os);
  };
  if (failed(splitAndProcessBuffer(std::move(input), chunkFn, output->os(),
                                   splitInputFile, splitInputFile)))
    return 1;
  output->keep();
  return 0;
}
