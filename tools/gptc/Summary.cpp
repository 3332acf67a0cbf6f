//===- Summary.cpp - gptc --emit=summary -----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One `key: value` line per figure, exact integers first and a readable form
// in parentheses, so that both people and FileCheck can read it.
//
//===----------------------------------------------------------------------===//

#include "Summary.h"

#include "CompileFlags.h"

#include "gptc/Analysis/CommReport.h"
#include "gptc/Analysis/KernelReport.h"
#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/ModelStats.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Frontend/ModelSpec.h"

#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/PipelineTrainer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace mlir::gptc;

/// 124439808 -> "124.44M".
static std::string human(double value, StringRef unit = "") {
  const char *suffixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(value) >= 1000 && i < 6) {
    value /= 1000;
    ++i;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format(i ? "%.2f" : "%.0f", value) << suffixes[i] << unit;
  return out;
}

/// 1073741824 -> "1.00 GiB".
static std::string bytes(int64_t value) {
  const char *suffixes[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(value);
  int i = 0;
  while (v >= 1024 && i < 6) {
    v /= 1024;
    ++i;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format(i ? "%.2f " : "%.0f ", v) << suffixes[i];
  return out;
}

/// The matrix products the CPU runtime runs for `func`'s linear and matmul
/// ops, as its GEMM library sees them: bf16 products in bf16, fp16 ones
/// widened to fp32, double ones (plain loops) not at all. Attention's own
/// products (its path on CPUs without AVX-512) are not among them.
static std::vector<::gptc::cpu::GemmProblem> gemmProblems(func::FuncOp func) {
  std::vector<::gptc::cpu::GemmProblem> problems;
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  func.walk([&](Operation *op) {
    if (!isa<LinearOp, MatmulOp>(op))
      return;
    auto result = cast<RankedTensorType>(op->getResult(0).getType());
    if (result.getElementType().isF64())
      return;
    ::gptc::cpu::GemmProblem p;
    if (auto linear = dyn_cast<LinearOp>(op)) {
      ArrayRef<int64_t> x = shapeOf(linear.getInput()),
                        w = shapeOf(linear.getWeight());
      int64_t rows = 1;
      for (int64_t d : x.drop_back())
        rows *= d;
      p = ::gptc::cpu::linearProblem(rows, w[0], x.back(),
                                     static_cast<bool>(linear.getBias()));
    } else {
      auto matmul = cast<MatmulOp>(op);
      ArrayRef<int64_t> a = shapeOf(matmul.getLhs()),
                        b = shapeOf(matmul.getRhs());
      size_t r = a.size();
      bool ta = matmul.getTransposeLhs(), tb = matmul.getTransposeRhs();
      int64_t m = ta ? a[r - 1] : a[r - 2], k = ta ? a[r - 2] : a[r - 1];
      int64_t n = tb ? b[r - 2] : b[r - 1], batch = 1;
      for (int64_t d : a.drop_back(2))
        batch *= d;
      p = ::gptc::cpu::matmulProblem(batch, m, n, k, ta, tb);
    }
    p.bf16 = result.getElementType().isBF16();
    problems.push_back(p);
  });
  return problems;
}

static int64_t tensorBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

/// A pipeline's figures per stage, from its compilation (gptc train's):
/// what one rank of each stage holds as PipelineTrainer runs it.
static LogicalResult printPipelineStages(const ModelDescription &desc,
                                         ModuleOp module,
                                         const CompileOptions &options,
                                         raw_ostream &os) {
  const ModelConfig &m = desc.getConfig();
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  ::gptc::program::Program program;
  // For --device cuda, the GPU's chunks (their kernels and epilogues plan
  // other buffers).
  if (failed(compilePipeline(desc, *copy, options, ProgramCode::Exported,
                             program)))
    return failure();
  FailureOr<std::vector<std::vector<PipelineOp>>> programs =
      readPipelinePrograms(*copy);
  if (failed(programs))
    return failure();
  const ::gptc::program::PipelinePlan &plan = program.pipeline();
  int64_t p = plan.stages(), micro = plan.microbatches();
  std::string error;
  std::optional<PipelineTimeline> timeline = simulatePipeline(
      *programs,
      std::vector<double>(plan.stages() * plan.virtual_stages(), 1.0),
      plan.virtual_stages(), error);
  if (!timeline)
    return copy->emitError(error);
  os << "pipeline: " << p << " stages"
     << (plan.virtual_stages() > 1
             ? " x " + std::to_string(plan.virtual_stages()) + " virtual stages"
             : std::string())
     << ", " << ::gptc::runtime::scheduleName(plan.schedule()) << ", " << micro
     << " microbatches (gptc train runs it; --emit=schedule shows the "
        "timeline)\n";
  os << "per stage, on each of its ranks (fp32 parameters, gradients and "
        "AdamW moments"
     << (m.zeroStage >= 3 && m.dataParallel > 1
             ? ", parameters and moments sliced over the data axis (ZeRO-3: "
               "each chunk's parameters gathered whole for each run, into "
               "a flat buffer of their slices first), gradients whole until "
               "reduce-scattered after the last microbatch"
         : m.zeroStage >= 1 && m.dataParallel > 1
             ? ", moments sliced over the data axis (ZeRO-" +
                   std::to_string(m.zeroStage) + ")"
             : std::string())
     << "; each chunk's forward and backward with its own buffers; the "
        "boundary tensors: activations received and held for the "
        "backward, gradients received, messages sent and kept until their "
        "receiver takes them, timed with equal chunks"
     << (plan.schedule() == ::gptc::program::SCHEDULE_ZB_H1
             ? "; zb-h1: each backward in two halves, the values the input "
               "half saves for the weight half held until it runs"
             : "")
     << "):\n";
  // The functions a chunk's backward runs (a zero-bubble schedule: its
  // input and weight halves).
  bool split = plan.schedule() == ::gptc::program::SCHEDULE_ZB_H1;
  auto backwardNames = [&](int64_t c) {
    std::string name = "chunk" + std::to_string(c) + "_backward";
    return split ? SmallVector<std::string>{name + "_input", name + "_weight"}
                 : SmallVector<std::string>{name};
  };
  // Each parameter's f32 bytes and how many stages hold it (a tied one,
  // several: on a device the stages between them add zeros to its sum).
  llvm::StringMap<int64_t> paramBytes, holders;
  for (int64_t s = 0; s < p; ++s) {
    auto stage = copy->lookupSymbol<func::FuncOp>("stage" + std::to_string(s));
    for (unsigned i = 0; i < stage.getNumArguments(); ++i)
      if (auto name = stage.getArgAttrOfType<StringAttr>(i, kParamAttrName)) {
        auto t = cast<RankedTensorType>(stage.getArgument(i).getType());
        paramBytes[name.getValue()] = 4 * t.getNumElements();
        ++holders[name.getValue()];
      }
  }
  for (int64_t s = 0; s < p; ++s) {
    auto stage = copy->lookupSymbol<func::FuncOp>("stage" + std::to_string(s));
    // Parameters (ZeRO-3: held as slices), gradients (whole) and moments.
    int64_t params = 0, weights = 0, held = 0, moments = 0;
    auto slicedOver = [&](RankedTensorType t) {
      return m.zeroStage >= 1 && m.dataParallel > 1 && t.getRank() > 0 &&
                     t.getDimSize(0) % m.dataParallel == 0
                 ? m.dataParallel
                 : int64_t(1);
    };
    for (unsigned i = 0; i < stage.getNumArguments(); ++i) {
      if (!stage.getArgAttr(i, kParamAttrName))
        continue;
      auto t = cast<RankedTensorType>(stage.getArgument(i).getType());
      params += t.getNumElements();
      weights += 4 * t.getNumElements();
      int64_t slices = slicedOver(t);
      moments += 8 * t.getNumElements() / slices;
      held += 4 * t.getNumElements() / (m.zeroStage >= 3 ? slices : 1);
    }
    // ZeRO-3: the most a chunk's run gathers at once: its sliced
    // parameters whole, and the flat buffer they were gathered in.
    int64_t gathered = 0;
    for (int64_t c = s;
         m.zeroStage >= 3 && c < plan.stages() * plan.virtual_stages();
         c += p) {
      for (const std::string &name : backwardNames(c)) {
        auto f = copy->lookupSymbol<func::FuncOp>(name);
        int64_t bytes = 0;
        for (unsigned i = 0; f && i < f.getNumArguments(); ++i)
          if (f.getArgAttr(i, kParamAttrName) &&
              !f.getArgAttr(i, kPipelineInAttrName)) {
            auto t = cast<RankedTensorType>(f.getArgument(i).getType());
            if (slicedOver(t) > 1)
              bytes += 2 * 4 * t.getNumElements();
          }
        gathered = std::max(gathered, bytes);
      }
    }
    int64_t state = held + weights + moments;
    // Each chunk function's arena (its runner keeps it between calls), and
    // how many backward runs a step writes each parameter's gradient in.
    int64_t buffers = 0;
    std::string chunks;
    llvm::StringMap<int64_t> gradWrites;
    for (int64_t c = s; c < plan.stages() * plan.virtual_stages(); c += p)
      for (const std::string &name : llvm::concat<std::string>(
               SmallVector<std::string>{"chunk" + std::to_string(c)},
               backwardNames(c))) {
        auto f = copy->lookupSymbol<func::FuncOp>(name);
        if (!f)
          continue;
        if (auto a = f->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
          buffers += a.getInt();
        for (unsigned r = 0; r < f.getNumResults(); ++r)
          if (auto g = f.getResultAttrOfType<StringAttr>(r, kGradAttrName))
            gradWrites[g.getValue()] += micro;
        chunks += (chunks.empty() ? "@" : ", @") + name;
      }
    // The boundary tensors the program holds, at its peak.
    auto inBytes = [&](int64_t c) {
      auto f = copy->lookupSymbol<func::FuncOp>("chunk" + std::to_string(c));
      int64_t b = 0;
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (f.getArgAttr(i, kPipelineInAttrName))
          b += tensorBytes(f.getArgument(i).getType());
      return b;
    };
    auto outBytes = [&](int64_t c) {
      auto f = copy->lookupSymbol<func::FuncOp>("chunk" + std::to_string(c));
      int64_t b = 0;
      for (Type t : f.getResultTypes())
        b += tensorBytes(t);
      return b;
    };
    auto messageBytes = [&](const PipelineOp &op) {
      return op.gradient ? outBytes(op.chunk) : inBytes(op.chunk);
    };
    // A split backward's saved values, from its input half to its weight
    // half.
    auto savedBytes = [&](int64_t c) {
      auto f = copy->lookupSymbol<func::FuncOp>("chunk" + std::to_string(c) +
                                                "_backward_weight");
      int64_t b = 0;
      for (unsigned i = 0; f && i < f.getNumArguments(); ++i)
        if (auto in = f.getArgAttrOfType<InputAttr>(i, kInputAttrName);
            in && in.getKind() == InputKind::Saved)
          b += tensorBytes(f.getArgument(i).getType());
      return b;
    };
    int64_t inFlight = 0, peakHeld = 0, savedNow = 0, peakSaved = 0;
    std::map<std::pair<int64_t, int64_t>, int64_t> live;
    for (const PipelineOp &op : (*programs)[s]) {
      if (op.kind == PipelineOp::Recv) {
        int64_t b = messageBytes(op);
        live[{op.microbatch, op.chunk}] += b;
        inFlight += b;
      } else if (op.kind == PipelineOp::Backward ||
                 op.kind == PipelineOp::BackwardWeight) {
        // (The weight half may read the chunk's input and cotangent: both
        // are held until it runs.)
        inFlight -= live[{op.microbatch, op.chunk}];
        live.erase({op.microbatch, op.chunk});
      }
      if (op.kind == PipelineOp::BackwardInput)
        savedNow += savedBytes(op.chunk);
      if (op.kind == PipelineOp::BackwardWeight)
        savedNow -= savedBytes(op.chunk);
      peakHeld = std::max(peakHeld, inFlight);
      peakSaved = std::max(peakSaved, savedNow);
    }
    // (The two may peak at different ops; the sum of their peaks bounds
    // what the stage holds at once.)
    peakHeld += peakSaved;
    // A sent message is kept until its receiver takes it: the most bytes
    // outstanding at once in the simulated timeline (a receive at the
    // instant of the send takes it at once).
    std::vector<std::pair<double, int64_t>> events;
    for (const PipelineTimeline::Message &msg : timeline->messages)
      if (msg.from == s) {
        events.push_back({msg.sent, messageBytes(msg.op)});
        events.push_back({msg.received, -messageBytes(msg.op)});
      }
    llvm::sort(events);
    int64_t sent = 0, outstanding = 0;
    for (auto [time, b] : events) {
      outstanding += b;
      sent = std::max(sent, outstanding);
    }
    int64_t total = state + gathered + buffers + peakHeld + sent;
    os << "stage " << s << ": " << params << " parameters (" << human(params)
       << "), model state " << state << " bytes (" << bytes(state) << ")\n";
    if (gathered)
      os << "  gathered for a chunk's run (ZeRO-3): " << gathered << " bytes ("
         << bytes(gathered) << ")\n";
    os << "  buffers of " << chunks << ": " << buffers << " bytes ("
       << bytes(buffers) << ")\n";
    os << "  boundary tensors: " << peakHeld - peakSaved
       << " bytes received and held (" << bytes(peakHeld - peakSaved) << ") + "
       << sent << " bytes sent, not yet received (" << bytes(sent) << ")\n";
    if (split)
      os << "  saved for the weight halves: " << peakSaved << " bytes ("
         << bytes(peakSaved) << ", at most)\n";
    os << "  stage memory: " << total << " bytes (" << bytes(total)
       << "; kernel scratch and the GEMM library's state not counted)\n";
    // On the GPU the model state, the buffers later gradients are added
    // from, the zeros of tied parameters held elsewhere and the chunks'
    // arenas are device memory (PipelineTrainer keepStateResident).
    if (options.cuda()) {
      int64_t second = 0, zeros = 0;
      for (const auto &w : gradWrites)
        if (w.getValue() >= 2)
          second += paramBytes.lookup(w.getKey());
      auto own = [&](StringRef name) {
        for (unsigned i = 0; i < stage.getNumArguments(); ++i)
          if (auto n = stage.getArgAttrOfType<StringAttr>(i, kParamAttrName))
            if (n.getValue() == name)
              return true;
        return false;
      };
      for (const auto &h : holders)
        if (h.getValue() >= 2 && !own(h.getKey()))
          zeros += paramBytes.lookup(h.getKey());
      int64_t onDevice = state + gathered + second + zeros + buffers;
      os << "  device memory (--device cuda): " << onDevice << " bytes ("
         << bytes(onDevice) << ": the model state, " << second
         << " bytes that later microbatches' gradients are added from, "
         << zeros << " bytes of zeros for tied parameters held by other "
         << "stages, and the chunks' buffers; the inputs' staging buffers, "
            "the ZeRO collectives' block, kernel scratch and cuBLASLt's "
            "workspace not counted); the host keeps the messages and a copy "
            "of the state for checkpoints\n";
    }
  }
  return success();
}

/// The offset gptc-plan-buffers gave `v`, or -1 (not planned, or an
/// argument).
static int64_t plannedOffset(Value v) {
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return -1;
  auto offsets =
      result.getOwner()->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttrName);
  if (!offsets ||
      static_cast<int64_t>(result.getResultNumber()) >= offsets.size())
    return -1;
  return offsets[result.getResultNumber()];
}

/// What the CPU runtime packs `op`'s tensors into for one MPI call
/// (lib/Runtime/CPU/Collectives.cpp): a ZeRO bucket's blocks below
/// cpu::kBucketPackBelowBytes, one rank's row and every rank's; a gradient
/// bucket whose buffers the plan did not lay out as one span, all of it.
static int64_t bucketPackingBytes(Operation *op) {
  if (isa<BucketAllGatherOp, BucketReduceScatterOp>(op)) {
    bool gather = isa<BucketAllGatherOp>(op);
    int64_t row = 0, ranks = 1;
    for (auto [in, out] : llvm::zip(op->getOperands(), op->getResults())) {
      auto whole =
          cast<RankedTensorType>(gather ? out.getType() : in.getType());
      auto part = cast<RankedTensorType>(gather ? in.getType() : out.getType());
      if (part.getDimSize(0) > 0)
        ranks = whole.getDimSize(0) / part.getDimSize(0);
      int64_t block = tensorBytes(part);
      if (block < ::gptc::cpu::kBucketPackBelowBytes)
        row += block;
    }
    return row ? row * (ranks + 1) : 0;
  }
  if (auto bucket = dyn_cast<BucketAllReduceOp>(op)) {
    int64_t end = -1, total = 0;
    bool span = true;
    for (auto [in, out] :
         llvm::zip(bucket->getOperands(), bucket->getResults())) {
      int64_t x = plannedOffset(in), y = plannedOffset(out);
      int64_t n = tensorBytes(out.getType());
      total += n;
      if (y < 0 || x != y || (end >= 0 && (y < end || y - end >= 64)))
        span = false;
      end = y + n;
    }
    return span ? 0 : total;
  }
  return 0;
}

LogicalResult mlir::gptc::printSummary(const ModelDescription &desc,
                                       ModuleOp module,
                                       const CompileOptions &options,
                                       raw_ostream &os) {
  // The figures describe what gptc runs. bf16 and fp16 mixed precision
  // keep fp32 master weights, gradients and AdamW state (their 16-bit
  // weight copies and activations are step buffers), so the state is sized
  // as fp32's.
  ModelConfig m = desc.getConfig();
  Precision requested = m.precision;
  m.precision = Precision::FP32;
  std::optional<ModelSize> size = computeModelSize(m);
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!size || !forward)
    return emitError(module.getLoc()) << "cannot size this model";
  ModelStats ir = computeModelStats(forward);
  // An ONNX model is sized as the GPT its raised blocks describe: only
  // where that GPT's parameters are the graph's.
  if (!desc.getOnnxModelPath().empty() && size->totalParams != ir.numParams)
    return emitError(module.getLoc())
           << "cannot size this ONNX model as a GPT: its raised blocks ("
           << m.numLayers << " layers, width " << m.modelDim
           << ") make a GPT-2 of " << size->totalParams
           << " parameters, and the graph holds " << ir.numParams;

  os << "model: " << desc.getName() << "\n";
  if (!desc.getOnnxModelPath().empty())
    os << "onnx model: " << desc.getOnnxModelPath()
       << " (the architecture read from its raised graph)\n";
  os << "architecture: " << m.numLayers << " layers, " << m.numHeads
     << " heads, width " << m.modelDim << ", MLP " << m.mlpDim << ", context "
     << m.contextLength << ", vocab " << m.vocabSize << ", "
     << (m.tiedEmbeddings ? "tied" : "untied") << " embeddings"
     << (m.bias ? "" : ", no biases") << "\n";
  os << "parameters: " << size->totalParams << " (" << human(size->totalParams)
     << ")\n";
  os << "  embeddings: " << size->embeddingParams << " (wte + wpe)\n";
  os << "  per block: " << size->layerParams << " x " << m.numLayers << "\n";
  os << "  final norm: " << size->finalNormParams << "\n";
  os << "  lm head: "
     << (m.tiedEmbeddings ? std::string("tied to wte")
                          : std::to_string(size->headParams))
     << "\n";
  os << "parameters in the IR: " << ir.numParams << " in " << ir.numParamTensors
     << " tensors";
  // Tensor parallelism pads the vocabulary to a multiple of its size.
  int64_t t = std::max<int64_t>(m.tensorParallel, 1);
  int64_t padRows = (m.vocabSize + t - 1) / t * t - m.vocabSize;
  if (padRows > 0)
    os << " (with " << padRows * m.modelDim * (m.tiedEmbeddings ? 1 : 2)
       << " of vocabulary padding: " << m.vocabSize << " rounded up to "
       << m.vocabSize + padRows << " for tensor parallel " << t << ")";
  os << "\n";
  os << "training FLOPs per token: " << size->flopsPerToken << " ("
     << human(size->flopsPerToken, "FLOP") << "; 6N + 12 L T C)\n";
  if (ir.tokens > 0)
    os << "training FLOPs per token in the IR: "
       << 3 * (ir.forwardFlops / ir.tokens) << " ("
       << human(3.0 * ir.forwardFlops / ir.tokens, "FLOP")
       << "; 3 x counted forward FLOPs, embedding lookups free)\n";
  os << "tokens per step: " << size->tokensPerStep << " (batch " << m.batchSize
     << " x seq " << m.seqLen << ")\n";
  os << "training FLOPs per step: "
     << human(static_cast<double>(size->flopsPerToken) * size->tokensPerStep,
              "FLOP")
     << "\n";
  os << "learning rate: " << describeLearningRate(m) << "\n";

  // The parallel layout.
  int64_t devices = 1;
  for (const MeshAxis &axis : desc.getMeshAxes())
    devices *= axis.size;
  os << "devices: " << devices;
  if (desc.getMeshAxes().empty())
    os << " (no mesh)";
  for (auto [i, axis] : llvm::enumerate(desc.getMeshAxes()))
    os << (i ? " x " : " = ") << axis.name << " " << axis.size << " ("
       << (axis.kind == MeshAxis::Kind::Data      ? "data"
           : axis.kind == MeshAxis::Kind::Tensor  ? "tensor"
           : axis.kind == MeshAxis::Kind::Context ? "context"
                                                  : "pipeline")
       << ")";
  os << "\n";
  os << "parallel: data " << m.dataParallel << ", tensor " << m.tensorParallel
     << (m.sequenceParallel ? " (sequence parallel)" : "") << ", pipeline "
     << m.pipelineParallel;
  if (m.contextParallel > 1)
    os << ", context " << m.contextParallel
       << (m.contextAllGather ? " (all-gather attention)"
                              : " (ring attention)");
  os << ", ZeRO stage " << m.zeroStage << "\n";
  os << "micro-batch per device: " << m.microBatchSize
     << " sequences, gradient accumulation " << m.gradAccumSteps;
  if (m.dataParallel > 1 && m.zeroStage >= 2 && m.gradAccumSteps > 1 &&
      m.pipelineParallel == 1)
    os << (options.zeroReduceEachMicrobatch
               ? " (gradients reduce-scattered every microbatch)"
               : " (gradients summed whole, reduce-scattered once per step)");
  os << "\n";
  if (size->paddedVocabSize != m.vocabSize)
    os << "vocabulary padded to: " << size->paddedVocabSize
       << " rows for tensor parallelism\n";
  if (m.pipelineParallel > 1)
    return printPipelineStages(desc, module, options, os);

  // Model state.
  if (requested == Precision::BF16)
    os << "precision: bf16 mixed (GEMMs and attention in bf16 with fp32 "
          "accumulation; "
          "AdamW: 4 master param + 4 grad + 4 m + 4 v = "
       << size->bytesPerParam << " bytes/param in fp32)\n";
  else if (requested == Precision::FP16)
    os << "precision: fp16 mixed (GEMMs and attention in fp16 with fp32 "
          "accumulation; "
          "dynamic loss scaling from "
       << llvm::format("%g", m.initialLossScale) << ", doubled after "
       << m.lossScaleGrowthInterval
       << " good steps; AdamW: 4 master param + 4 grad + 4 m + 4 v = "
       << size->bytesPerParam << " bytes/param in fp32)\n";
  else
    os << "precision: fp32 (AdamW: 4 param + 4 grad + 4 m + 4 v = "
       << size->bytesPerParam << " bytes/param)\n";
  os << "parameters per device: " << size->paramsPerDevice << " ("
     << human(size->paramsPerDevice) << ")\n";
  os << "model state per device: " << size->stateBytesPerDevice << " bytes ("
     << bytes(size->stateBytesPerDevice) << ")\n";
  os << "  weights: " << size->weightBytes << " bytes ("
     << bytes(size->weightBytes) << ")\n";
  os << "  gradients: " << size->gradBytes << " bytes ("
     << bytes(size->gradBytes) << ")\n";
  os << "  optimizer: " << size->optimizerBytes << " bytes ("
     << bytes(size->optimizerBytes) << ")\n";

  // What one microbatch holds from its forward to its backward under each
  // recomputation mode: the differentiated step, rewritten by
  // gptc-recompute on a copy per mode.
  {
    OwningOpRef<ModuleOp> differentiated(cast<ModuleOp>(module->clone()));
    PassManager front(module.getContext());
    buildDifferentiationPipeline(front);
    // As the step does: one cast of an activation, not one per reader.
    OpPassManager &funcs = front.nest<func::FuncOp>();
    funcs.addPass(createCanonicalizerPass());
    funcs.addPass(createCSEPass());
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    auto fb =
        succeeded(front.run(*differentiated))
            ? differentiated->lookupSymbol<func::FuncOp>("forward_backward")
            : func::FuncOp();
    if (fb) {
      os << "activations kept for the backward, one microbatch:";
      for (Recompute mode :
           {Recompute::None, Recompute::Selective, Recompute::Full}) {
        auto copy = cast<func::FuncOp>(fb->clone());
        int64_t kept = succeeded(recomputeActivations(copy, mode))
                           ? savedActivationBytes(copy)
                           : -1;
        copy->erase();
        bool none = mode == Recompute::None;
        os << (none ? " " : ", ") << bytes(kept) << " ("
           << (none ? "recompute none" : stringifyRecompute(mode)) << ")";
      }
      os << "; this run: " << stringifyRecompute(m.recompute) << "\n";
    }
  }

  // The training step's intermediate buffers after gptc-plan-buffers, for
  // one micro-batch on one device.
  OwningOpRef<ModuleOp> step(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext());
  // (On the CPU, whatever --device says.)
  TrainPipelineOptions stepOptions;
  CompileOptions cpu = options;
  cpu.device = DeviceKind::CPU;
  cpu.codegen = true;
  cpu.fillTrainPipeline(stepOptions);
  buildTrainPipeline(pm, stepOptions);
  // Diagnostics of this internal compile would duplicate the real one's.
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  if (succeeded(pm.run(*step))) {
    if (auto train = step->lookupSymbol<func::FuncOp>("train_step")) {
      int64_t values = 0;
      Operation *ret = train.getBody().front().getTerminator();
      train.walk<WalkOrder::PreOrder>([&](Operation *op) {
        // A reshape is a view of its operand's buffer, not a new value; the
        // step's results (the new state) are computed in the caller's
        // buffers.
        if (isa<ReshapeOp>(op))
          return WalkResult::advance();
        for (Value v : op->getResults())
          if (auto tensor = dyn_cast<RankedTensorType>(v.getType());
              tensor && !llvm::is_contained(ret->getOperands(), v))
            values += tensor.getNumElements() *
                      ((tensor.getElementTypeBitWidth() + 7) / 8);
        // The values inside a generated kernel never reach memory.
        return isa<KernelOp>(op) ? WalkResult::skip() : WalkResult::advance();
      });
      auto arena = train->getAttrOfType<IntegerAttr>(kArenaBytesAttrName);
      if (arena && values > 0)
        os << "training step buffers: " << arena.getInt() << " bytes ("
           << bytes(arena.getInt()) << ") for " << values
           << " bytes of intermediate values, reused by liveness ("
           << llvm::format("%.1f", double(values) / arena.getInt()) << "x)\n";
      // The microbatch loop's body has an arena of its own, live next to
      // the step's (the runtime allocates both).
      int64_t loopArena = 0;
      train.walk([&](AccumulateOp loop) {
        if (auto a = loop->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
          loopArena += a.getInt();
      });
      if (loopArena > 0)
        os << "microbatch loop buffers: " << loopArena << " bytes ("
           << bytes(loopArena)
           << ": the accumulation body's own arena, one microbatch's "
              "activations)\n";
      // The generated kernels (gptc --emit=kernels lists them).
      std::vector<KernelInfo> kernels = collectKernels(train);
      if (!kernels.empty()) {
        int64_t ops = 0, inLayer0 = 0;
        for (const KernelInfo &k : kernels) {
          ops += static_cast<int64_t>(k.ops.size());
          inLayer0 += k.layer == 0;
        }
        os << "generated kernels: " << kernels.size() << " in the training "
           << "step (" << ops << " ops)";
        // (An ONNX graph's ops are located at its nodes, not at gptc's
        // layer names: no per-block count.)
        if (desc.getOnnxModelPath().empty())
          os << ", " << inLayer0 << " per transformer block";
        os << "\n";
      }
      // What gptc train adds to the process at its peak: the parameters
      // and moments it keeps between steps (updated in place), the step's
      // buffers, which hold the gradients, and the largest scratch a
      // runtime kernel takes (attention's score blocks; an fp16 GEMM's
      // fp32 copies). The compiler and the libraries come on top (gptc
      // train reports both).
      int64_t scratch = 0;
      train.walk([&](Operation *op) {
        if (auto grad = dyn_cast<CausalAttentionGradOp>(op)) {
          auto q = cast<RankedTensorType>(grad.getQuery().getType());
          if (q.getRank() == 3)
            scratch = std::max<int64_t>(
                scratch, 2 * 4 *
                             ::gptc::cpu::causalAttentionScratch(
                                 q.getDimSize(0), q.getDimSize(1),
                                 q.getDimSize(2), grad.getNumHeads()));
        } else if (isa<LinearOp, MatmulOp>(op) &&
                   cast<RankedTensorType>(op->getResult(0).getType())
                       .getElementType()
                       .isF16()) {
          int64_t elements = 0;
          for (Value v :
               llvm::concat<Value>(op->getOperands(), op->getResults()))
            elements += cast<RankedTensorType>(v.getType()).getNumElements();
          scratch = std::max<int64_t>(scratch, 4 * elements);
        }
      });
      // The CPU runtime's packing buffer for bucketed collectives
      // (Executor::runBlocksBucket, runBucket): each function and each
      // microbatch body keeps one, as large as its largest packed bucket.
      int64_t packing = 0;
      train.walk([&](Block *block) {
        if (isa<KernelOp>(block->getParentOp()))
          return;
        int64_t most = 0;
        for (Operation &op : *block)
          most = std::max(most, bucketPackingBytes(&op));
        packing += most;
      });
      // Evaluation (eval_interval > 0) runs @forward in its own arena, which
      // the first validation pass makes resident.
      int64_t evaluation = 0;
      auto forward = step->lookupSymbol<func::FuncOp>("forward");
      if (m.evalInterval > 0 && forward)
        if (auto a = forward->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
          evaluation = a.getInt();
      // MPI's reduction buffer: MPICH all-reduces a large message by
      // reduce-scatter then all-gather into a temporary the message's size,
      // of which each rank receives (and so touches) all but its own 1/N;
      // it reduce-scatters one by exchanging blocks in pairs through a
      // temporary of one block (1/N). The largest of the step sets it; one
      // runs at a time. Gathers receive in place.
      int64_t mpiBuffer = 0;
      if (FailureOr<std::vector<Collective>> all = collectCollectives(train);
          succeeded(all))
        for (const Collective &c : *all) {
          if (c.ranks < 2)
            continue;
          if (c.kind == "all_reduce")
            mpiBuffer = std::max(mpiBuffer, c.bytes / c.ranks * (c.ranks - 1));
          else if (c.kind == "reduce_scatter")
            mpiBuffer = std::max(mpiBuffer, c.bytes / c.ranks);
        }
      // The GEMM library's state: oneDNN keeps a primitive (its kernels'
      // descriptors and scratchpad) for each distinct product the step
      // runs, which the runtime builds on first use; here they are built
      // the same way and their memory measured.
      std::vector<::gptc::cpu::GemmProblem> problems = gemmProblems(train);
      if (evaluation)
        llvm::append_range(problems, gemmProblems(forward));
      int64_t gemmState = ::gptc::cpu::gemmPrimitiveBytes(problems);
      if (arena) {
        int64_t peak = size->weightBytes + size->optimizerBytes +
                       arena.getInt() + loopArena + scratch + evaluation +
                       gemmState + packing + mpiBuffer;
        os << "training memory per device: " << peak << " bytes ("
           << bytes(peak) << ": parameters and moments + step buffers"
           << (loopArena ? " + microbatch loop buffers" : "")
           << " + kernel scratch" << (evaluation ? " + evaluation buffers" : "")
           << (packing ? " + collective packing buffers" : "")
           << (mpiBuffer >= 4096 ? " + MPI's reduction buffer" : "")
           << " + GEMM library state)\n";
      }
    }
  }
  return success();
}
