//===- CompileFlags.cpp - gptc's flags for the compiler driver ------------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The command-line flags that configure a compilation (the device, the
// mesh and the parallel settings, the pipeline's schedule, code generation
// switches), read into the driver's typed CompileOptions in one place, for
// every subcommand of gptc that compiles.
//
//===----------------------------------------------------------------------===//

#include "CompileFlags.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;

cl::OptionCategory &mlir::gptc::gptcOptionCategory() {
  static cl::OptionCategory category("gptc options");
  return category;
}

cl::OptionCategory &mlir::gptc::trainOptionCategory() {
  static cl::OptionCategory category("gptc train options");
  return category;
}

cl::OptionCategory &mlir::gptc::pipelineOptionCategory() {
  static cl::OptionCategory category(
      "gptc pipeline options (meshes with a pp axis: gptc train, --emit=*)");
  return category;
}

static cl::opt<std::string>
    cudaChipOpt("cuda-chip",
                cl::desc("GPU architecture of --emit=cuda|ptx|cubin and "
                         "--device cuda"),
                cl::init("sm_90"), cl::cat(gptcOptionCategory()));

static cl::opt<int64_t> cudaRowRegistersOpt(
    "cuda-row-registers",
    cl::desc("Columns a lane of a GPU row kernel (layer norm, its "
             "gradient) holds in registers, 0-128 (default 32: rows of up "
             "to 1024 read once); 0: each phase loops over the row again"),
    cl::init(32), cl::cat(gptcOptionCategory()));

static cl::opt<std::string> deviceOpt(
    "device",
    cl::desc("What runs the step: cpu (default), cuda (an NVIDIA GPU per "
             "process) or virtual-cuda (the GPU runtime on the virtual CUDA "
             "device: CPU stand-ins of CUDA, cuBLASLt and NCCL that check "
             "every access; for tests, slow); "
             "--emit=program prints the artifact for it"),
    cl::init("cpu"), cl::cat(gptcOptionCategory()));

static cl::opt<std::string> scheduleOpt(
    "pipeline-schedule",
    cl::desc("Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1 (zero "
             "bubble; default: the description's pipeline_schedule, else "
             "1f1b)"),
    cl::init("1f1b"), cl::cat(pipelineOptionCategory()));
static cl::opt<int64_t> virtualStagesOpt(
    "virtual-stages",
    cl::desc("Chunks per stage for the interleaved schedule (default: the "
             "description's virtual_stages, else 2 there, 1 otherwise)"),
    cl::init(0), cl::cat(pipelineOptionCategory()));
static cl::list<int64_t> layersOpt(
    "pipeline-layers",
    cl::desc("Layers of each chunk in order, e.g. 4,4,3,1 (default: the "
             "description's pipeline_layers, else balanced by FLOPs)"),
    cl::CommaSeparated, cl::cat(pipelineOptionCategory()));

static cl::opt<int64_t>
    stepsOpt("steps",
             cl::desc("Optimizer steps, which the learning-rate schedule spans "
                      "(default: training.steps; gptc train, --emit=artifact)"),
             cl::init(-1), cl::cat(trainOptionCategory()));

static cl::opt<double>
    lrOpt("lr",
          cl::desc("Peak learning rate (default: training.optimizer.lr; "
                   "with a reference_batch_size, the reference batch's, "
                   "scaled as the description says)"),
          cl::init(0), cl::cat(trainOptionCategory()));
static cl::opt<int64_t> warmupStepsOpt(
    "warmup-steps",
    cl::desc("Steps of linear warm-up to the peak learning rate (default: "
             "training.lr_schedule.warmup_steps)"),
    cl::init(0), cl::cat(trainOptionCategory()));
static cl::opt<std::string> lrDecayOpt(
    "lr-decay",
    cl::desc("The learning rate's decay after warm-up, over the remaining "
             "steps (default: training.lr_schedule.decay)"),
    cl::value_desc("cosine|linear|constant"), cl::init(""),
    cl::cat(trainOptionCategory()));
static cl::opt<double> minLrRatioOpt(
    "min-lr-ratio",
    cl::desc("The last step's learning rate over the peak's (default: "
             "training.lr_schedule.min_lr_ratio)"),
    cl::init(0), cl::cat(trainOptionCategory()));

LogicalResult mlir::gptc::addScheduleFlags(DescriptionOverrides &overrides) {
  if (lrOpt.getNumOccurrences())
    overrides.lr = lrOpt;
  if (warmupStepsOpt.getNumOccurrences())
    overrides.warmupSteps = warmupStepsOpt;
  if (minLrRatioOpt.getNumOccurrences())
    overrides.minLrRatio = minLrRatioOpt;
  if (lrDecayOpt.getNumOccurrences()) {
    overrides.lrDecay = symbolizeLrDecay(lrDecayOpt);
    if (!overrides.lrDecay) {
      llvm::errs() << "gptc: error: --lr-decay takes cosine, linear or "
                      "constant, got '"
                   << lrDecayOpt << "'\n";
      return failure();
    }
  }
  return success();
}

std::optional<int64_t> mlir::gptc::stepsFlag() {
  if (!stepsOpt.getNumOccurrences())
    return std::nullopt;
  return stepsOpt.getValue();
}

static cl::OptionCategory
    parallelCategory("gptc parallel options (replace the description's)");
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

namespace {
enum class ContextAttention { Ring, AllGather };
} // namespace
static cl::opt<ContextAttention, false, NamedValueParser<ContextAttention>>
    contextAttentionOpt(
        "context-attention",
        cl::desc("Context parallelism's attention (a cp mesh axis)"),
        cl::values(clEnumValN(ContextAttention::Ring, "ring",
                              "key and value blocks passed around the axis, "
                              "each block's attention merged by online softmax "
                              "(the default)"),
                   clEnumValN(ContextAttention::AllGather, "all-gather",
                              "the whole sequence's keys and values gathered "
                              "first (Llama 3's context parallelism)")),
        cl::init(ContextAttention::Ring), cl::cat(parallelCategory));

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
    cl::init(false), cl::cat(gptcOptionCategory()));

namespace {
enum class ZeroReduce { Step, Microbatch };
} // namespace
static cl::opt<ZeroReduce, false, NamedValueParser<ZeroReduce>> zeroReduceOpt(
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
    cl::init(ZeroReduce::Step), cl::cat(parallelCategory));

bool mlir::gptc::isMeshAuto() { return meshOpt == "auto"; }

bool mlir::gptc::isMeshGiven() {
  return meshOpt.getNumOccurrences() && !isMeshAuto();
}

bool mlir::gptc::explicitParallelOptions() {
  return zeroStageOpt.getNumOccurrences() || gradAccumOpt.getNumOccurrences() ||
         sequenceParallelOpt.getNumOccurrences() ||
         contextAttentionOpt.getNumOccurrences() ||
         recomputeOpt.getNumOccurrences() ||
         zeroReduceOpt.getNumOccurrences() || scheduleOpt.getNumOccurrences() ||
         virtualStagesOpt.getNumOccurrences() || layersOpt.getNumOccurrences();
}

FailureOr<DescriptionOverrides> mlir::gptc::getDescriptionOverrides() {
  DescriptionOverrides o;
  if (meshOpt.getNumOccurrences()) {
    std::string error;
    if (failed(o.parseMesh(meshOpt.getValue(), error))) {
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
  if (contextAttentionOpt.getNumOccurrences())
    o.contextAllGather = contextAttentionOpt == ContextAttention::AllGather;
  if (recomputeOpt.getNumOccurrences()) {
    std::optional<Recompute> recompute = symbolizeRecompute(recomputeOpt);
    if (!recompute) {
      llvm::errs() << "gptc: error: --recompute takes none, selective or "
                      "full, got '"
                   << recomputeOpt << "'\n";
      return failure();
    }
    o.recompute = *recompute;
  }
  if (failed(addScheduleFlags(o)))
    return failure();
  return o;
}
static void printError(const llvm::Twine &message) {
  llvm::errs() << "gptc: error: " << message << "\n";
}

FailureOr<CompileOptions> mlir::gptc::getCompileOptions() {
  CompileOptions options;
  options.optionError = printError;
  // MLIR's pass manager flags (--mlir-print-ir-after-all, --mlir-timing,
  // crash reproducers) on every compilation.
  options.configurePassManager = [](PassManager &pm) -> LogicalResult {
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    applyDefaultTimingPassManagerCLOptions(pm);
    return success();
  };
  std::optional<DeviceKind> device = parseDeviceKind(deviceOpt);
  if (!device) {
    printError("--device takes cpu, cuda or virtual-cuda, got '" + deviceOpt +
               "'");
    return failure();
  }
  options.device = *device;
  options.chip = cudaChipOpt;
  options.rowRegisters = cudaRowRegistersOpt;
  if (!(bucketMbOpt >= 0) || bucketMbOpt > 1e6) {
    llvm::errs() << "gptc: error: --bucket-mb takes a size in MiB from 0 to "
                    "1000000, got "
                 << bucketMbOpt << "\n";
    return failure();
  }
  options.bucketBytes = static_cast<int64_t>(bucketMbOpt * 1024 * 1024);
  if (gemmEpiloguesOpt.getNumOccurrences())
    options.gemmEpilogues = gemmEpiloguesOpt;
  // (--mesh auto's plan may set it too: parseDescription.)
  options.zeroReduceEachMicrobatch = zeroReduceOpt == ZeroReduce::Microbatch;
  if (scheduleOpt.getNumOccurrences()) {
    options.pipeline.schedule = parsePipelineSchedule(scheduleOpt);
    if (!options.pipeline.schedule) {
      printError(
          "--pipeline-schedule takes gpipe, 1f1b, interleaved or zb-h1, got '" +
          scheduleOpt + "'");
      return failure();
    }
  }
  if (virtualStagesOpt.getNumOccurrences())
    options.pipeline.virtualStages = virtualStagesOpt;
  if (layersOpt.getNumOccurrences())
    options.pipeline.layers =
        std::vector<int64_t>(layersOpt.begin(), layersOpt.end());
  std::string error;
  if (failed(options.verify(error))) {
    printError(error);
    return failure();
  }
  return options;
}
