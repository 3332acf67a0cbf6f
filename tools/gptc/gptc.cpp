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

#include "CompileFlags.h"
#include "Onnx.h"
#include "Plan.h"
#include "Schedule.h"
#include "Summary.h"
#include "Train.h"

#include "gptc/Analysis/CommReport.h"
#include "gptc/Analysis/KernelReport.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/InitAll.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Runtime/Preemption.h"
#include "gptc/Target/CUDA/CompileKernels.h"
#include "gptc/Target/CUDA/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <google/protobuf/text_format.h>

#include <functional>
#include <optional>
#include <sstream>
#include <unistd.h>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<model.pbtxt>"),
                                          cl::init("-"),
                                          cl::cat(gptcOptionCategory()));

static cl::opt<std::string> outputFilename("o", cl::desc("Output filename"),
                                           cl::value_desc("filename"),
                                           cl::init("-"),
                                           cl::cat(gptcOptionCategory()));

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

/// What one compilation hands an --emit kind's printer.
struct EmitInput {
  Emit kind;
  const ModelDescription &desc;
  /// The description's text (the artifact records it).
  StringRef text;
  ModuleOp module;
  const CompileOptions &options;
  /// The runtime's program (empty for the kinds that read the IR alone).
  ::gptc::program::Program &program;
  bool pipeline() const { return desc.getConfig().pipelineParallel > 1; }
};

/// What an --emit kind compiles before it prints.
enum class Needs {
  /// Nothing: it plans or compiles on its own.
  Nothing,
  /// The forward graph after gptc-frontend-pipeline.
  Frontend,
  /// The training step after the driver's compilation (one program or a
  /// pipeline's chunks), for the device --device names.
  Training,
  /// The same for the GPU, whatever --device names.
  TrainingForGpu,
};

/// An --emit kind: its name and help, what it needs and its printer.
struct EmitKind {
  Emit kind;
  const char *name, *help;
  Needs needs;
  LogicalResult (*print)(EmitInput &, raw_ostream &);
};
} // namespace

/// The IR after the last pipeline, with locations.
static LogicalResult printModule(EmitInput &in, raw_ostream &os) {
  in.module->print(os, OpPrintingFlags().enableDebugInfo(
                           /*enable=*/true, /*prettyForm=*/false));
  os << "\n";
  return success();
}

/// --emit=program --device=cuda prints the image's size, not its bytes
/// (--emit=cubin writes them).
static void summarizeImage(::gptc::program::Program &program) {
  size_t bytes = program.cuda().image().size();
  program.mutable_cuda()->set_image(
      "<" + std::to_string(bytes) + " bytes of " +
      ::gptc::program::CudaImageFormat_Name(program.cuda().format()) + ">");
}

static LogicalResult printProgramText(EmitInput &in, raw_ostream &os) {
  if (in.program.has_cuda())
    summarizeImage(in.program);
  std::string text;
  google::protobuf::TextFormat::PrintToString(in.program, &text);
  os << text;
  return success();
}

static LogicalResult printArtifact(EmitInput &in, raw_ostream &os) {
  setTrainSettings(in.desc, in.text, in.program);
  return writeArtifact(in.program, in.module.getLoc(), os);
}

static LogicalResult printSummaryKind(EmitInput &in, raw_ostream &os) {
  return printSummary(in.desc, in.module, in.options, os);
}

static LogicalResult printScheduleKind(EmitInput &in, raw_ostream &os) {
  return printPipelineSchedule(in.desc, in.options, os);
}

/// --emit=kernels: @forward's and @train_step's kernels, or each chunk's
/// and its backward's.
static LogicalResult printKernels(EmitInput &in, raw_ostream &os) {
  if (!in.pipeline()) {
    for (StringRef name : {"forward", "train_step"})
      if (auto func = in.module.lookupSymbol<func::FuncOp>(name))
        printKernelReport(func, os);
    return success();
  }
  // (A zero-bubble schedule's backward: its input and weight halves.)
  for (int64_t c = 0;; ++c) {
    std::string name = "chunk" + std::to_string(c);
    auto f = in.module.lookupSymbol<func::FuncOp>(name);
    SmallVector<func::FuncOp> backward;
    for (StringRef suffix :
         {"_backward", "_backward_input", "_backward_weight"})
      if (auto b = in.module.lookupSymbol<func::FuncOp>(name + suffix.str()))
        backward.push_back(b);
    if (!f || backward.empty())
      break;
    printKernelReport(f, os);
    for (func::FuncOp b : backward)
      printKernelReport(b, os);
  }
  return success();
}

/// --emit=cuda|ptx|cubin: the step's kernels for the GPU (--cuda-chip),
/// their launch plans or the image; a pipeline's, its chunks' (as the
/// artifact's image holds them).
static LogicalResult printCudaKernels(EmitInput &in, raw_ostream &os) {
  if (in.pipeline())
    for (auto func :
         llvm::make_early_inc_range(in.module.getOps<func::FuncOp>()))
      if (!llvm::any_of(in.program.functions(),
                        [&](const ::gptc::program::Function &f) {
                          return f.name() == func.getName();
                        }))
        func.erase();
  GpuKernelLoweringPipelineOptions options;
  in.options.fillGpuLowering(options);
  options.format = in.kind == Emit::Cubin ? "bin" : "isa";
  function_ref<LogicalResult(PassManager &)> configure;
  if (in.options.configurePassManager)
    configure = in.options.configurePassManager;
  FailureOr<CudaKernels> kernels =
      compileModuleKernelsForCuda(in.module, options, configure);
  if (failed(kernels))
    return failure();
  if (in.kind == Emit::Cuda)
    printCudaLaunchPlans(*kernels, os);
  else
    os << kernels->image;
  return success();
}

/// --emit=streams: what the GPU runtime enqueues for each function (and
/// each accumulation's body).
static LogicalResult printStreams(EmitInput &in, raw_ostream &os) {
  std::ostringstream text;
  std::function<void(const ::gptc::program::Function &)> print =
      [&](const ::gptc::program::Function &f) {
        ::gptc::runtime::printDeviceSchedule(f, text);
        for (const ::gptc::program::Kernel &k : f.kernels())
          if (k.op() == ::gptc::program::ACCUMULATE)
            print(k.accumulate().body());
      };
  for (const ::gptc::program::Function &f : in.program.functions())
    print(f);
  os << text.str();
  return success();
}

/// --emit=comm: @train_step's collectives, or each stage's and the
/// update's.
static LogicalResult printComm(EmitInput &in, raw_ostream &os) {
  if (!in.pipeline()) {
    auto step = in.module.lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return in.module.emitError("no @train_step to report on");
    return printCommReport(step, os);
  }
  const ModelConfig &m = in.desc.getConfig();
  for (int64_t s = 0; s < m.pipelineParallel; ++s)
    if (failed(printCommReport(
            in.module.lookupSymbol<func::FuncOp>("stage" + std::to_string(s)),
            os)))
      return failure();
  os << "then the update on every rank: two f64 all_reduces (gradient "
        "norm, loss)"
     << (m.zeroStage >= 3 && m.dataParallel > 1
             ? "; ZeRO-3 updates the slices the stages hold and gathers "
               "nothing after (the all_gathers above run before each "
               "chunk call; the runtime packs each call's into one)"
         : m.zeroStage >= 1 && m.dataParallel > 1
             ? " and, with ZeRO-1 or 2, the all_gather of each sliced "
               "parameter over the data axis"
             : "")
     << "\n";
  return success();
}

/// Every --emit kind, in --help's order.
static const EmitKind kEmitKinds[] = {
    {Emit::MLIR, "mlir", "The forward graph in the gptc dialect",
     Needs::Frontend, printModule},
    {Emit::Train, "train",
     "The training step after gptc-train-pipeline (with --device cuda: as "
     "the GPU compiles it)",
     Needs::Training, printModule},
    {Emit::Program, "program",
     "The runtime artifact of the training step (protobuf text)",
     Needs::Training, printProgramText},
    {Emit::Summary, "summary", "Parameters, FLOPs and per-device model state",
     Needs::Frontend, printSummaryKind},
    {Emit::Comm, "comm",
     "The training step's collectives: bytes and volume sent per rank",
     Needs::Training, printComm},
    {Emit::Kernels, "kernels",
     "The training step's generated kernels: the ops each fuses, FLOPs and "
     "bytes",
     Needs::Training, printKernels},
    {Emit::Cuda, "cuda",
     "The training step's kernels for the GPU: the launch sequence of each",
     Needs::TrainingForGpu, printCudaKernels},
    {Emit::Streams, "streams",
     "The GPU runtime's host-side sequence of @forward and @train_step: "
     "each step's stream, where collectives overlap and are waited for",
     Needs::TrainingForGpu, printStreams},
    {Emit::Ptx, "ptx", "The training step's GPU kernels as PTX",
     Needs::TrainingForGpu, printCudaKernels},
    {Emit::Cubin, "cubin",
     "The training step's GPU kernels as a cubin (needs the CUDA toolkit's "
     "ptxas)",
     Needs::TrainingForGpu, printCudaKernels},
    {Emit::Artifact, "artifact",
     "The compiled program with its training settings (binary protobuf) "
     "for gptc-runtime; --device picks the CPU's or the GPU's code",
     Needs::Training, printArtifact},
    {Emit::Schedule, "schedule",
     "The pipeline's stages and schedule: each stage's program with its "
     "sends and receives, the bubble, the activations in flight "
     "(--pipeline-schedule, --schedule-svg, --schedule-trace)",
     Needs::Nothing, printScheduleKind},
};

static const EmitKind &emitKind(Emit kind) {
  for (const EmitKind &k : kEmitKinds)
    if (k.kind == kind)
      return k;
  llvm_unreachable("every --emit kind is in kEmitKinds");
}

static cl::opt<Emit, false, NamedValueParser<Emit>>
    emitAction("emit", cl::desc("What to produce"), cl::init(Emit::Summary),
               cl::cat(gptcOptionCategory()));

static cl::opt<std::string> splitInputFile(
    "split-input-file", cl::ValueOptional,
    cl::callback([](const std::string &value) {
      if (value.empty())
        splitInputFile = "# -----";
    }),
    cl::desc("Split the input at this marker (default '# -----') and "
             "compile each chunk on its own"),
    cl::init(""), cl::cat(gptcOptionCategory()));

static cl::opt<bool>
    verifyDiagnostics("verify-diagnostics",
                      cl::desc("Check that the emitted diagnostics match the "
                               "expected-* lines in the input"),
                      cl::init(false), cl::cat(gptcOptionCategory()));

/// Compiles the description in `sourceMgr`'s main buffer as far as the
/// --emit kind needs (the driver's compileTraining for the training
/// step) and prints it to `os`.
static LogicalResult compile(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                             raw_ostream &os) {
  FailureOr<CompileOptions> options = getCompileOptions();
  if (failed(options))
    return failure();
  FailureOr<ModelDescription> desc =
      parseDescription(sourceMgr, context, *options);
  if (failed(desc))
    return failure();
  const EmitKind &emit = emitKind(emitAction);
  // An ONNX model (a description's onnx_model, or MODEL.onnx itself): the
  // graph prepared for training is the model, as gptc train compiles it.
  std::optional<OnnxImport> onnx;
  if (!desc->getOnnxModelPath().empty()) {
    OnnxImportOptions importOptions;
    OnnxTrainingShape shape;
    if (!getOnnxImportOptions(importOptions) ||
        failed(resolveOnnxModel(*desc, &context, importOptions, onnx, shape)))
      return failure();
    if (emit.kind == Emit::Summary && shape.numLayers == 0)
      return emitError(desc->locate({{"onnx_model"}}))
             << "cannot size this ONNX model: none of its layers was "
                "raised to gptc's transformer blocks (docs/Onnx.md, "
                "\"What training raises\")";
  }
  // The schedule's length is compiled into the step.
  if (std::optional<int64_t> steps = stepsFlag()) {
    if (*steps < 1) {
      llvm::errs() << "gptc: error: --steps takes a step count >= 1, got "
                   << *steps << "\n";
      return failure();
    }
    desc->setSteps(*steps);
  }
  const EmitKind &kind = emit;
  ::gptc::program::Program program;
  StringRef text =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  if (kind.needs == Needs::Nothing) {
    EmitInput in{kind.kind, *desc, text, ModuleOp(), *options, program};
    return kind.print(in, os);
  }
  std::map<std::string, std::string> initialValues;
  OwningOpRef<ModuleOp> module =
      onnx ? buildTrainingModule(*desc, &context, onnx, initialValues)
           : importModel(*desc, &context);
  if (!module)
    return failure();
  if (kind.needs == Needs::Frontend) {
    // (An ONNX model's graph is already in the training convention.)
    if (!onnx && desc->getOnnxModelPath().empty() &&
        failed(runPasses(*module, *options, [](OpPassManager &pm) {
          buildFrontendPipeline(pm, FrontendPipelineOptions());
        })))
      return failure();
  } else {
    // The GPU's kinds compile the GPU's kernels (epilogues, kernel
    // grouping) whatever --device says.
    if (kind.needs == Needs::TrainingForGpu && !options->cuda())
      options->device = DeviceKind::CUDA;
    // The code (the GPU's image, the CPU's kernel library) only where it
    // is printed (--device cuda --emit=program) or written
    // (--emit=artifact); the graph where the program is read; else none.
    ProgramCode code = ProgramCode::None;
    if (kind.kind == Emit::Artifact ||
        (kind.kind == Emit::Program && options->cuda()))
      code = ProgramCode::Compiled;
    else if (kind.kind == Emit::Program || kind.kind == Emit::Streams)
      code = ProgramCode::Exported;
    if (failed(compileTraining(*desc, *module, *options, code, program)))
      return failure();
  }
  EmitInput in{kind.kind, *desc, text, *module, *options, program};
  return kind.print(in, os);
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

static constexpr const char *kOverview =
    "gptc: GPT model compiler\n\n"
    "  gptc MODEL.pbtxt|MODEL.onnx [--emit=summary|mlir|train|program|comm|"
    "kernels|schedule|artifact|...]\n"
    "  gptc train MODEL [--data FILE] [--mesh dp=D,tp=T,pp=P]   train\n"
    "  gptc sample CHECKPOINT [--prompt TEXT] [--token-ids]     generate\n"
    "  gptc plan MODEL --hardware h100-node --devices N   rank parallel "
    "plans\n"
    "  [mpirun -np N] gptc calibrate -o FILE    measure this machine for "
    "gptc plan\n\n"
    "  (under mpirun: mpirun.mpich -np N gptc train MODEL --mesh ...; "
    "docs/Training.md)\n";

static constexpr const char *kCommands[] = {"train", "sample", "plan",
                                            "calibrate"};

/// Only training, sampling and calibration run the CPU runtime's thread
/// pool: the others need not start twice to bound its spinning
/// (tools/common/ThreadDefaults.cpp).
extern "C" bool gptcRunsThreadPool(int argc, char **argv) {
  if (argc < 2)
    return false;
  StringRef command(argv[1]);
  return command == "train" || command == "sample" || command == "calibrate";
}

/// `word` is meant as a subcommand when it is no file, no option and no
/// path: the nearest subcommand by edit distance (at most 2), or none.
static std::optional<std::string> misspeltCommand(StringRef word) {
  if (word.empty() || word.starts_with("-") || word.contains('/') ||
      word.contains('.') || llvm::sys::fs::exists(word))
    return std::nullopt;
  std::string best;
  unsigned bestDistance = 3;
  for (StringRef c : kCommands)
    if (unsigned d = word.edit_distance(c); d < bestDistance) {
      best = c.str();
      bestDistance = d;
    }
  return best;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // `gptc train MODEL` and `gptc sample CHECKPOINT` are subcommands; the
  // rest of the command line is parsed as usual.
  std::string command;
  if (argc > 1 && llvm::is_contained(kCommands, StringRef(argv[1]))) {
    command = argv[1];
    // Before any other thread exists: the stop signals go to a thread of
    // their own, never to a kernel's (gptc/Runtime/Preemption.h).
    if (command == "train")
      ::gptc::runtime::routeStopSignals();
    for (int i = 1; i + 1 < argc; ++i)
      argv[i] = argv[i + 1];
    --argc;
  } else if (argc > 1) {
    if (std::optional<std::string> near = misspeltCommand(argv[1])) {
      llvm::errs() << "gptc: error: '" << argv[1]
                   << "' is neither a command nor a file";
      if (!near->empty())
        llvm::errs() << "; did you mean 'gptc " << *near << "'?";
      llvm::errs() << " (commands: train, sample, plan, calibrate; "
                      "gptc --help)\n";
      return 1;
    }
  }
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "gptc " << GPTC_VERSION;
    if (*GPTC_GIT_COMMIT)
      os << " (commit " << GPTC_GIT_COMMIT << ")";
    os << "\n  built with MLIR/LLVM " << LLVM_VERSION_STRING
#ifdef GPTC_HAVE_CUDA
       << ", the CUDA runtime"
#endif
       << "\n";
  });
  // Register before parsing: --mlir-print-ir-after=<pass> needs the names.
  registerAllPasses();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  registerAsmPrinterCLOptions();
  hideUnrelatedCommandLineOptions(&gptcOptionCategory());
  // MLIR's debugging options (--mlir-print-ir-after-all, ...) are behind
  // --help-hidden: gptc's own come first.
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.first.starts_with("mlir-"))
      entry.second->setHiddenFlag(cl::Hidden);
  // A diagnostic names its op by location, not by printing the function
  // around it (--mlir-print-op-on-diagnostic brings that back).
  if (cl::Option *opt =
          cl::getRegisteredOptions().lookup("mlir-print-op-on-diagnostic"))
    static_cast<cl::opt<bool> *>(opt)->setInitialValue(false);
  for (const EmitKind &kind : kEmitKinds)
    emitAction.getParser().addLiteralOption(kind.name, kind.kind, kind.help);
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  // No model: the overview, not a wait on standard input (a pipe is read).
  if (command != "calibrate" && inputFilename == "-" && isatty(0)) {
    llvm::errs() << kOverview << "\ngptc: error: no "
                 << (command == "sample" ? "checkpoint" : "model")
                 << " given (gptc --help lists the options)\n";
    return 1;
  }

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

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (StringRef(inputFilename).ends_with(".onnx")) {
    if (emitAction == Emit::MLIR)
      return runOnnx(inputFilename, outputFilename, registry);
    // The other kinds compile the graph as gptc train does: a description
    // naming it, with gptc's default training settings and the flags.
    MLIRContext context(registry);
    llvm::SourceMgr sourceMgr;
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    // Its warnings come when the model is compiled (a second import).
    context.getDiagEngine().registerHandler([](Diagnostic &d) {
      return success(d.getSeverity() == DiagnosticSeverity::Warning);
    });
    OnnxTrainingShape shape;
    FailureOr<DescriptionOverrides> overrides = getOnnxDescriptionOverrides();
    if (failed(overrides) ||
        failed(importOnnxForTraining(inputFilename, context, shape)))
      return 1;
    FailureOr<std::string> text =
        onnxTrainingDescription(inputFilename, shape, *overrides, error);
    if (failed(text)) {
      llvm::errs() << "gptc: " << error << "\n";
      return 1;
    }
    input = llvm::MemoryBuffer::getMemBufferCopy(
        *text, inputFilename + " (training settings)");
  } else {
    input = openBoundedInput(inputFilename, kMaxDescriptionBytes,
                             "model description", error);
    if (!input) {
      llvm::errs() << "gptc: error: " << error << "\n";
      return 1;
    }
  }
  std::unique_ptr<OutputFile> output = OutputFile::open(outputFilename, error);
  if (!output) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }

  auto chunkFn = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                     raw_ostream &os) {
    return processBuffer(std::move(chunk), registry, os);
  };
  if (failed(splitAndProcessBuffer(std::move(input), chunkFn, output->os(),
                                   splitInputFile, splitInputFile)))
    return 1;
  if (!output->finish(error)) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  return 0;
}
