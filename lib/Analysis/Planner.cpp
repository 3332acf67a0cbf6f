//===- Planner.cpp - Cost model and search of parallel plans ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every term is derived in docs/Planning.md; the comments here name them.
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/Planner.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mlir::gptc;

std::vector<ParallelPlan::Axis> ParallelPlan::axes() const {
  std::vector<Axis> out;
  auto add = [&](const char *name, int64_t n, MeshAxisKind kind) {
    if (n > 1)
      out.push_back({name, n, kind});
  };
  // Row-major, the innermost (consecutive ranks) last.
  if (dataOutermost) {
    add("dp", dp, MeshAxisKind::Data);
    add("pp", pp, MeshAxisKind::Pipeline);
  } else {
    add("pp", pp, MeshAxisKind::Pipeline);
    add("dp", dp, MeshAxisKind::Data);
  }
  add("cp", cp, MeshAxisKind::Context);
  add("tp", tp, MeshAxisKind::Tensor);
  return out;
}

std::string ParallelPlan::meshString() const {
  std::string s;
  for (const Axis &axis : axes())
    s += (s.empty() ? "" : ",") + std::string(axis.name) + "=" +
         std::to_string(axis.size);
  return s.empty() ? "1" : s;
}

namespace {
enum class Kind { AllReduce, ReduceScatter, AllGather, Send };

/// Alpha-beta cost of one run of a ring collective over `n` ranks of a
/// tensor of `g` bytes: the bytes this rank sends and the seconds.
std::pair<double, double> ringCost(Kind kind, int64_t n, double g,
                                   const LinkSpec &link) {
  if (kind == Kind::Send)
    return {g, link.latency + g / link.bandwidth};
  if (n < 2)
    return {0, 0};
  double steps = kind == Kind::AllReduce ? 2.0 * (n - 1) : double(n - 1);
  double sent = steps / n * g;
  return {sent, steps * link.latency + sent / link.bandwidth};
}

const char *kindName(Kind k) {
  switch (k) {
  case Kind::AllReduce:
    return "all_reduce";
  case Kind::ReduceScatter:
    return "reduce_scatter";
  case Kind::AllGather:
    return "all_gather";
  case Kind::Send:
    return "send";
  }
  return "?";
}
} // namespace

PlanCost mlir::gptc::evaluatePlan(const ModelConfig &m, const ModelSize &size,
                                  const ParallelPlan &plan,
                                  const HardwareSpec &hw) {
  PlanCost c;
  const double t = double(plan.tp), p = double(plan.pp), cp = double(plan.cp);
  // The data-parallel group: the data axis and the context axis together
  // (gptc-data-parallel sums gradients and shards ZeRO over both).
  const int64_t group = plan.dp * plan.cp;
  const double d = double(group);
  const double devices = t * p * d;
  // s: a rank's tokens of a sequence (context parallelism cuts it);
  // whole: the sequence.
  const double L = double(m.numLayers), h = double(m.modelDim),
               whole = double(m.seqLen), s = whole / cp,
               b = double(plan.microBatch), mb = double(plan.microbatches),
               v = double(plan.virtualStages);
  const int64_t vocab = (m.vocabSize + plan.tp - 1) / plan.tp * plan.tp;
  const bool mixed = m.precision != Precision::FP32;
  // Bytes of an activation element (16-bit activations in mixed
  // precision) and of the values gptc keeps in fp32 (stage boundaries,
  // logits, gradients, master weights).
  const double e = mixed ? 2.0 : 4.0;
  const double peak = hw.peakFlops[static_cast<int>(m.precision)];

  // Parameters per device on the most loaded stage: a layer's matrices
  // and their biases split over the tensor axis, its norms and output
  // biases replicated (6h); the embeddings on the first stage (wte split
  // over the vocabulary), the head (tied: another wte) on the last.
  double replicated = m.bias ? 6 * h : 4 * h;
  double layer = (double(size.layerParams) - replicated) / t + replicated;
  double wte = double(vocab) * h / t, wpe = double(m.contextLength) * h;
  double finalNorm = double(size.finalNormParams);
  double firstLayers = std::ceil(L / p), lastLayers = std::floor(L / p);
  double params;
  if (plan.pp == 1) {
    params = L * layer + wte + wpe + finalNorm + (m.tiedEmbeddings ? 0 : wte);
  } else {
    double first = firstLayers * layer + wte + wpe;
    double last = std::max(1.0, lastLayers) * layer + wte + finalNorm;
    params = std::max(first, last);
  }
  c.paramsPerDevice = int64_t(params);

  // State: fp32 master weights, gradients and AdamW moments, and the
  // 16-bit copies of the weights the GEMMs read in mixed precision. ZeRO
  // slices the moments (1), the reduced gradients (2; a pipeline stage
  // still accumulates whole ones), the weights (3) over the replicas, each
  // tensor only where its dimension 0 divides by them (as
  // gptc-data-parallel and the pipeline runtime do): a vocabulary or
  // context that does not divide keeps its embedding whole.
  double unsliced = 0;
  bool wteWhole = group > 1 && (vocab / plan.tp) % group;
  bool wpeWhole = group > 1 && m.contextLength % group;
  bool layersWhole =
      group > 1 && (m.modelDim % group || (m.modelDim / plan.tp) % group ||
                    (m.mlpDim / plan.tp) % group);
  if (group > 1) {
    if (wteWhole)
      unsliced += wte;
    if (wpeWhole)
      unsliced += wpe;
    if (layersWhole)
      unsliced += firstLayers * layer;
    unsliced = std::min(unsliced, params);
  }
  auto zero = [&](bool sliced) {
    return sliced ? (params - unsliced) / d + unsliced : params;
  };
  c.weightBytes =
      int64_t(zero(plan.zeroStage >= 3) * (4.0 + (mixed ? 2.0 : 0.0)));
  // A pipeline stage under ZeRO-3 gathers a chunk's fp32 weights whole
  // for each run, through a flat buffer of the same size.
  if (plan.pp > 1 && plan.zeroStage >= 3 && plan.dp > 1)
    c.weightBytes += int64_t(2.0 * 4.0 * (params - unsliced) / v);
  c.gradBytes =
      int64_t(4.0 * zero(plan.zeroStage >= 2 && plan.pp == 1 &&
                         !(plan.microbatches > 1 && plan.reduceOncePerStep)));
  c.optimizerBytes = int64_t(8.0 * zero(plan.zeroStage >= 1));

  // Activations a layer keeps for its backward, per microbatch, in units
  // of b s h elements: the norms' inputs and outputs (4), the q, k, v and
  // attention outputs (4), GELU's input and output (8); attention keeps
  // no probabilities (its backward recomputes them). Tensor parallelism
  // splits all but the norms' four; sequence parallelism those too.
  double perLayerUnits = plan.tp == 1            ? 16.0
                         : plan.sequenceParallel ? 16.0 / t
                                                 : 4.0 + 12.0 / t;
  double perLayer = perLayerUnits * b * s * h * e;
  // Context parallelism: attention's keys and values of the whole
  // sequence (this rank's heads), gathered and kept for the backward.
  double gathered = plan.cp > 1 ? 2.0 * b * whole * h * e / t : 0.0;
  perLayer += gathered;
  double boundary = b * s * h * 4.0 / (plan.sequenceParallel ? t : 1.0);
  if (plan.pp == 1) {
    // One microbatch's activations (accumulation frees them between
    // microbatches). gptc-recompute: selective drops the norms' outputs
    // (2 units, split with sequence parallelism) and GELU's output (4 / t);
    // full keeps each layer's input, the last layer's activations and one
    // recomputed layer's at a time.
    double selectiveUnits = (plan.sequenceParallel ? 2.0 / t : 2.0) + 4.0 / t;
    c.activationBytes = int64_t(
        plan.recompute == Recompute::Full ? L * b * s * h * e + 2.0 * perLayer
        : plan.recompute == Recompute::Selective
            ? L * ((perLayerUnits - selectiveUnits) * b * s * h * e + gathered)
            : L * perLayer);
  } else {
    // gptc's stages keep each in-flight microbatch's chunk input and
    // recompute the chunk in its backward: the first stage holds the most
    // (1F1B: p microbatches; interleaved: its warm-up's chunks).
    double chunks = plan.virtualStages > 1
                        ? std::min(mb * v, 2 * (p - 1) + (v - 1) * p + 1)
                        : std::min(mb, p);
    c.activationBytes =
        int64_t(chunks * boundary + std::ceil(L / (p * v)) * perLayer);
    // ZB-H1: a split backward's weight half reads its input half's
    // intermediate values, kept from B to W: the last stage defers W by
    // p - 1 microbatches, so it keeps up to p microbatches' activations of
    // its layers (every stage holds up to p chunk inputs).
    if (plan.schedule == PipelineScheduleKind::ZeroBubbleH1)
      c.activationBytes =
          int64_t(std::min(mb, p) * boundary +
                  std::min(mb, p) * std::ceil(L / p) * perLayer);
  }
  // The logits and their gradient (fp32) where the loss is.
  c.logitBytes = int64_t(2.0 * b * s * double(vocab) / t * 4.0);
  c.memoryBytes = c.weightBytes + c.gradBytes + c.optimizerBytes +
                  c.activationBytes + c.logitBytes;
  c.fits = double(c.memoryBytes) <= double(hw.memoryBytes) * hw.usableMemory;

  // Compute: the step's FLOPs split evenly, at the GEMM efficiency of
  // peak; full recomputation adds the forward of every layer but the last
  // in the one-program step (a third of their share), every chunk's in a
  // pipeline. Selective recomputation adds no products (norms and GELUs,
  // memory-bound: below). Elementwise work reads and writes each kept
  // activation about three times (forward, backward) on the memory
  // roofline.
  c.modelFlops = double(size.flopsPerToken) * double(size.tokensPerStep);
  double flops = c.modelFlops / devices;
  if (plan.recompute == Recompute::Full)
    flops *= plan.pp > 1 ? 4.0 / 3.0 : 1.0 + (L - 1.0) / (3.0 * L);
  // Small GEMMs run below the large ones' rate: a layer's six products
  // of a microbatch (q, k, v, output: h x h/t; the MLP's two: h x 4h/t)
  // average 4 b s h^2 / t FLOPs, at F / (F + the half-rate FLOPs).
  double gemm = 4.0 * b * s * h * h / t;
  double sizeFactor = gemm / (gemm + hw.gemmHalfFlops);
  c.computeSeconds = flops / (peak * hw.gemmEfficiency * sizeFactor);
  // Tokens per rank of the group (a context-parallel rank's part of its
  // rows' sequences).
  double tokensPerReplica = double(size.tokensPerStep) / d;
  double activationTraffic =
      tokensPerReplica * (L / p) * 3.0 * 16.0 * h * e / t;
  if (plan.recompute == Recompute::Selective)
    // Each norm and GELU once more: read the input, write the output.
    activationTraffic += tokensPerReplica * L * 2.0 * (2.0 + 4.0 / t) * h * e;
  // Each microbatch reads every weight in its forward and backward (once
  // more when the forward is recomputed) and adds its gradients into the
  // fp32 accumulators (read and write); the update reads and writes
  // weights, gradients and moments once per step.
  double weightBytes = mixed ? 2.0 : 4.0;
  double perMicrobatch =
      params *
      ((plan.recompute == Recompute::Full ? 3.0 : 2.0) * weightBytes + 8.0);
  double update = 28.0 * zero(plan.zeroStage >= 1);
  c.memorySeconds =
      (activationTraffic + mb * perMicrobatch + update) / hw.memoryBandwidth;
  double busy = c.computeSeconds + c.memorySeconds;
  c.bubbleSeconds = busy * (p - 1) / (v * mb);
  // ZB-H1 with m >= p: (p - 1) idle units of F, B and W (a third of a
  // backward each) against 1F1B's 3(p - 1); with fewer microbatches it
  // lies between the two: 1F1B's is the bound the model takes.
  if (plan.schedule == PipelineScheduleKind::ZeroBubbleH1 && mb >= p)
    c.bubbleSeconds = busy * (p - 1) / (3 * mb);

  // Which link each axis's groups cross: consecutive ranks fill a node;
  // tp is innermost, then pp and dp in the plan's order.
  double dpn = double(hw.devicesPerNode);
  const double dd = double(plan.dp);
  double ppStride = plan.dataOutermost ? t * cp : t * cp * dd;
  double dpStride = plan.dataOutermost ? t * cp * p : t * cp;
  auto inter = [&](double stride, double n) { return stride * n > dpn; };
  auto add = [&](Kind kind, const char *axis, const char *what, double g,
                 int64_t n, double runs, bool crossesNodes) {
    if (runs <= 0 || g <= 0 || (kind != Kind::Send && n < 2))
      return;
    const LinkSpec &link = crossesNodes ? hw.interNode : hw.intraNode;
    auto [sent, seconds] = ringCost(kind, n, g, link);
    CommCost x;
    x.kind = kindName(kind);
    x.axis = axis;
    x.what = what;
    x.bytes = int64_t(g);
    x.runs = int64_t(runs);
    x.interNode = crossesNodes;
    x.sentBytes = sent * runs;
    x.seconds = seconds * runs;
    c.comms.push_back(x);
    c.commSeconds += x.seconds;
    c.sentBytes += x.sentBytes;
  };
  // Tensor parallelism: per layer and microbatch two all-reduces of the
  // activations forward and two backward (sequence parallel: an
  // all-gather and a reduce-scatter each, the same bytes), two more when
  // the forward is recomputed; the vocabulary-parallel embedding's two.
  double layersPerStage = std::ceil(L / p);
  double tpRuns =
      mb * layersPerStage * (plan.recompute == Recompute::Full ? 6.0 : 4.0);
  double act = b * s * h * e;
  if (plan.sequenceParallel) {
    add(Kind::AllGather, "tp", "layer activations", act, plan.tp, tpRuns,
        false);
    add(Kind::ReduceScatter, "tp", "layer activations", act, plan.tp, tpRuns,
        false);
  } else {
    add(Kind::AllReduce, "tp", "layer activations", act, plan.tp, tpRuns,
        false);
  }
  add(Kind::AllReduce, "tp", "embedding (vocabulary parallel)", b * s * h * 4,
      plan.tp, 2 * mb, false);
  // Context parallelism: per layer and microbatch the keys and values
  // all-gathered forward (again for every layer but the last when the
  // forward is recomputed) and their gradients reduce-scattered backward.
  // The attention waits for them: nothing hides them.
  if (plan.cp > 1) {
    bool x = inter(t, cp);
    double kv = 2.0 * b * whole * h * e / t;
    add(Kind::AllGather, "cp", "keys and values", kv, plan.cp,
        mb * (plan.recompute == Recompute::Full ? 2.0 * L - 1.0 : L), x);
    add(Kind::ReduceScatter, "cp", "key and value gradients", kv, plan.cp,
        mb * L, x);
  }
  // Pipeline: each microbatch's activation forward and gradient back at
  // every boundary; the tied embedding's gradient summed over the stages.
  if (plan.pp > 1) {
    add(Kind::Send, "pp", "stage boundary", boundary, 2, 2 * mb * v,
        inter(ppStride, p));
    if (m.tiedEmbeddings)
      add(Kind::AllReduce, "pp", "tied embedding gradient", wte * 4, plan.pp, 1,
          inter(ppStride, p));
  }
  // Data parallelism: the gradients (fp32) all-reduced after the last
  // microbatch, or reduce-scattered with ZeRO-2/3 (every microbatch's when
  // the plan accumulates without a pipeline, --zero-reduce=microbatch, so
  // that they are slices as the memory above counts them); ZeRO-1/2
  // all-gather the updated slices; ZeRO-3 keeps them and gathers each
  // sliced weight again for every microbatch's forward and backward: in
  // mixed precision the 16-bit casts of the slices, except where a phase
  // reads the fp32 values (the norms both ways, the embedding tables in
  // the forward); the backward does not read wpe, nor an untied wte.
  // A tensor ZeRO cannot slice (`unsliced`) keeps the all-reduce, and
  // nothing gathers it.
  // (With a context axis the group is dp x cp, named "dp" here.)
  if (group > 1) {
    bool x = plan.dp > 1 ? inter(dpStride, dd) : inter(t, cp);
    double grads = params * 4, slicedGrads = (params - unsliced) * 4;
    if (plan.zeroStage >= 2 && unsliced > 0)
      add(Kind::AllReduce, "dp", "gradients ZeRO cannot slice", unsliced * 4,
          group, 1, x);
    if (plan.reducesEachMicrobatch())
      add(Kind::ReduceScatter, "dp", "gradients of each microbatch",
          slicedGrads, group, mb, x);
    else if (plan.zeroStage >= 2)
      add(Kind::ReduceScatter, "dp", "gradients", slicedGrads, group, 1, x);
    else
      add(Kind::AllReduce, "dp", "gradients", grads, group, 1, x);
    if (plan.zeroStage >= 1 && plan.zeroStage < 3)
      add(Kind::AllGather, "dp", "updated parameters", slicedGrads, group, 1,
          x);
    if (plan.zeroStage >= 3 && plan.pp > 1) {
      // A pipeline stage gathers each chunk's fp32 weights (the chunks
      // cast them) in one all-gather for every microbatch's forward and
      // again for its backward.
      add(Kind::AllGather, "dp",
          "chunk weights for each microbatch's forward and backward",
          (params - unsliced) * 4 / v, plan.dp, 2 * mb * v, x);
    } else if (plan.zeroStage >= 3) {
      double norms = layersWhole ? 0 : L * 4 * h + finalNorm;
      double wteSliced = wteWhole ? 0 : wte;
      double wpeSliced = wpeWhole ? 0 : wpe;
      double sliced = params - unsliced;
      double wide = 4.0 - weightBytes;
      double forward =
          sliced * weightBytes + (norms + wteSliced + wpeSliced) * wide;
      double backward =
          (sliced - wpeSliced - (m.tiedEmbeddings ? 0 : wteSliced)) *
              weightBytes +
          norms * wide;
      add(Kind::AllGather, "dp", "weights for each microbatch's forward",
          forward, group, mb, x);
      add(Kind::AllGather, "dp", "weights for each microbatch's backward",
          backward, group, mb, x);
    }
  }
  // Overlap: both runtimes keep a collective in flight until the first
  // kernel that needs its result (runtime::scheduleCollectives; the GPU on
  // a stream of its own, the CPU with non-blocking MPI). `hide` prices
  // the collectives of one run that share the stream (in order) beside
  // `window` seconds of computation spread over the layers: of each, the
  // part that the layer at the window's edge needs or completes (its
  // `edge` share of the bytes) cannot overlap; the rest runs beside the
  // other (L-1)/L of the window: exposed = max(sum of C x edge,
  // C - window (L-1)/L).
  auto hide = [&](const std::vector<std::pair<CommCost *, double>> &items,
                  double window) {
    double run = 0, atEdge = 0;
    for (auto [x, edge] : items) {
      run += x->seconds / double(x->runs);
      atEdge += x->seconds / double(x->runs) * std::min(1.0, edge);
    }
    if (run <= 0)
      return;
    double exposed = std::max(atEdge, run - window * (L - 1.0) / L);
    double hidden = (run - exposed) / run;
    for (auto [x, edge] : items) {
      x->overlappedSeconds = x->seconds * hidden;
      c.commSeconds -= x->overlappedSeconds;
      c.overlappedSeconds += x->overlappedSeconds;
    }
  };
  // One microbatch's forward and backward (a third and two thirds of its
  // computation).
  double forwardRun = busy / mb / 3.0, backwardRun = 2.0 * forwardRun;
  if (group > 1 && plan.pp == 1) {
    // The gradient reduction where it sits inside the backward (the
    // one-program step without accumulation, or each microbatch's
    // reduce-scatter inside the loop; the step's after the loop has
    // nothing left to hide behind): buckets start as the backward
    // completes them, last layer first; the embeddings (a tied wte
    // included) and the first layer complete at its end. ZeRO-3's
    // gathers are issued one bucket ahead of their first reader: each
    // runs beside the layers before it; the first layers (the embeddings
    // forward, the tied head backward) wait for theirs. The backward's
    // gathers and reductions share its window (one stream, in order).
    std::vector<std::pair<CommCost *, double>> forward, backward;
    double tiedWte = m.tiedEmbeddings ? wte : 0.0;
    for (CommCost &x : c.comms) {
      if (x.axis != "dp")
        continue;
      bool gradient = x.what.rfind("gradients", 0) == 0;
      if (gradient &&
          (plan.microbatches == 1 || x.what == "gradients of each microbatch"))
        backward.push_back({&x, (tiedWte + wpe + layer) / params});
      if (x.what == "weights for each microbatch's forward")
        forward.push_back({&x, (wte + wpe + layer) / params});
      if (x.what == "weights for each microbatch's backward")
        backward.push_back({&x, (tiedWte + layer) / params});
    }
    hide(forward, forwardRun);
    hide(backward, backwardRun);
  }
  c.stepSeconds = busy + c.bubbleSeconds + c.commSeconds;
  c.mfu = c.modelFlops / (c.stepSeconds * devices * peak);
  return c;
}

/// The planner's rules for one axis (what gptc's runtime and cost model
/// take): why a mesh with that axis size cannot run the model, or empty.
static std::string tensorRule(const ModelConfig &m, int64_t tp,
                              const HardwareSpec &hw) {
  // Tensor parallelism stays inside a node: across nodes its per-layer
  // all-reduces would run on the slow link.
  if (tp > hw.devicesPerNode)
    return "tensor parallelism stays within a node of " +
           std::to_string(hw.devicesPerNode) + " devices";
  if (m.numHeads % tp || m.modelDim % tp || (m.mlpDim % tp))
    return "num_heads " + std::to_string(m.numHeads) +
           (m.numHeads % tp ? " is" : ", model_dim and the MLP width are") +
           " not " + (m.numHeads % tp ? "a multiple" : "all multiples") +
           " of " + std::to_string(tp);
  return "";
}

static std::string pipelineRule(const ModelConfig &m, int64_t pp) {
  if (pp > m.numLayers)
    return "more stages than num_layers (" + std::to_string(m.numLayers) + ")";
  return "";
}

/// The search's shortest context-parallel chunk (a rank holds two).
static constexpr int64_t kMinContextChunk = 256;

static std::string contextRule(const ModelConfig &m, int64_t cp) {
  if (cp > 1 && m.seqLen % (2 * cp))
    return "seq_len " + std::to_string(m.seqLen) +
           " is not a multiple of 2 x " + std::to_string(cp) +
           " (context parallelism)";
  return "";
}

static std::string dataRule(const ModelConfig &m, int64_t dp) {
  if (m.batchSize % dp)
    return "batch_size " + std::to_string(m.batchSize) +
           " is not a multiple of " + std::to_string(dp);
  return "";
}

std::string mlir::gptc::checkPlan(const ModelConfig &m,
                                  const ParallelPlan &plan,
                                  const HardwareSpec &hw) {
  std::string why = tensorRule(m, plan.tp, hw);
  if (why.empty())
    why = pipelineRule(m, plan.pp);
  if (why.empty())
    why = dataRule(m, plan.dp);
  if (why.empty())
    why = contextRule(m, plan.cp);
  if (!why.empty())
    return why;
  if (plan.cp > 1 && (plan.pp > 1 || plan.sequenceParallel))
    return "context parallelism runs without a pipeline or sequence "
           "parallelism";
  if (plan.microbatches < 1 || plan.microBatch < 1 ||
      plan.microBatch * plan.microbatches * plan.dp != m.batchSize)
    return "batch_size " + std::to_string(m.batchSize) +
           " does not split into " + std::to_string(plan.dp) + " replicas x " +
           std::to_string(plan.microbatches) + " microbatches";
  if (plan.sequenceParallel && (plan.tp < 2 || m.seqLen % plan.tp))
    return "sequence parallelism needs a tensor axis that divides seq_len (" +
           std::to_string(m.seqLen) + ")";
  if (plan.zeroStage > 0 && plan.dp * plan.cp < 2)
    return "ZeRO needs a data (or context) axis";
  if (plan.virtualStages > 1 && (plan.pp < 2 || plan.microbatches % plan.pp ||
                                 m.numLayers < plan.pp * plan.virtualStages))
    return "the interleaved schedule needs microbatches a multiple of the "
           "stages and a layer per chunk (" +
           std::to_string(plan.pp * plan.virtualStages) + " chunks, " +
           std::to_string(m.numLayers) + " layers)";
  return "";
}

bool mlir::gptc::ranksBefore(const PlanCost &a, const PlanCost &b) {
  // Fastest first; plans within the same 0.5% band of step time, the one
  // that sends less first.
  auto band = [](double seconds) {
    return static_cast<int64_t>(
        std::floor(std::log(seconds) / std::log(1.005)));
  };
  int64_t x = band(a.stepSeconds), y = band(b.stepSeconds);
  if (x != y)
    return x < y;
  if (a.sentBytes != b.sentBytes)
    return a.sentBytes < b.sentBytes;
  return a.memoryBytes < b.memoryBytes;
}

std::optional<PlanSearch> mlir::gptc::searchPlans(const ModelConfig &m,
                                                  const HardwareSpec &hw,
                                                  int64_t devices,
                                                  std::string &error,
                                                  int64_t microBatch) {
  if (devices < 1) {
    error = "--devices needs a count >= 1";
    return std::nullopt;
  }
  if (hw.peakFlops[static_cast<int>(m.precision)] <= 0) {
    error = "the hardware description gives no peak FLOP/s for the model's "
            "precision";
    return std::nullopt;
  }
  int64_t nodes = (devices + hw.devicesPerNode - 1) / hw.devicesPerNode;
  if (hw.nodes > 0 && nodes > hw.nodes) {
    error = std::to_string(devices) + " devices need " + std::to_string(nodes) +
            " nodes of " + std::to_string(hw.devicesPerNode) +
            "; the hardware has " + std::to_string(hw.nodes);
    return std::nullopt;
  }
  if (nodes > 1 && !hw.hasInterNode) {
    error = std::to_string(devices) + " devices span " + std::to_string(nodes) +
            " nodes, but the hardware description has no inter_node link";
    return std::nullopt;
  }
  PlanSearch out;
  auto divisors = [](int64_t n) {
    std::vector<int64_t> ds;
    for (int64_t i = 1; i <= n; ++i)
      if (n % i == 0)
        ds.push_back(i);
    return ds;
  };
  // Data parallelism alone (the reference a plan beats): its least
  // memory, with ZeRO-3 and one sequence per microbatch.
  {
    ModelConfig cfg = m;
    cfg.dataParallel = devices;
    cfg.tensorParallel = cfg.pipelineParallel = 1;
    if (std::optional<ModelSize> size = computeModelSize(cfg)) {
      ParallelPlan plan;
      plan.dp = devices;
      plan.zeroStage = devices > 1 ? 3 : 0;
      if (microBatch > 0) {
        plan.microBatch = microBatch;
        plan.microbatches =
            std::max<int64_t>(1, m.batchSize / devices / microBatch);
      }
      out.dataParallelMemory = evaluatePlan(cfg, *size, plan, hw).memoryBytes;
    }
  }
  // Each rule that excluded meshes, with the meshes it excluded
  // ("dp=3: batch_size 8 is not a multiple of 3").
  std::vector<std::pair<std::string, std::vector<std::string>>> rules;
  auto exclude = [&](std::string mesh, std::string why) {
    auto it = llvm::find_if(rules, [&](auto &r) { return r.first == why; });
    if (it == rules.end())
      rules.push_back({std::move(why), {std::move(mesh)}});
    else if (llvm::find(it->second, mesh) == it->second.end())
      it->second.push_back(std::move(mesh));
  };
  for (int64_t tp : divisors(devices)) {
    if (std::string why = tensorRule(m, tp, hw); !why.empty()) {
      exclude("tp=" + std::to_string(tp), why);
      continue;
    }
    for (int64_t pp : divisors(devices / tp)) {
      if (std::string why = pipelineRule(m, pp); !why.empty()) {
        exclude("pp=" + std::to_string(pp), why);
        continue;
      }
      // Context parallelism without a pipeline (what gptc runs), in chunks
      // of at least kMinContextChunk tokens: shorter ones leave attention
      // too little work beside its gathers to pay, and the sizes they
      // would add (up to a cp of 1024 on 1024 devices) would triple the
      // search.
      std::vector<int64_t> cps{1};
      if (pp == 1)
        for (int64_t cp : divisors(devices / tp))
          if (cp > 1 && m.seqLen / (2 * cp) >= kMinContextChunk)
            cps.push_back(cp);
      for (int64_t cp : cps) {
        if (std::string why = contextRule(m, cp); !why.empty()) {
          exclude("cp=" + std::to_string(cp), why);
          continue;
        }
        int64_t dp = devices / tp / pp / cp;
        if (std::string why = dataRule(m, dp); !why.empty()) {
          exclude("dp=" + std::to_string(dp), why);
          continue;
        }
        ModelConfig cfg = m;
        cfg.dataParallel = dp;
        cfg.tensorParallel = tp;
        cfg.pipelineParallel = pp;
        cfg.contextParallel = cp;
        std::optional<ModelSize> size = computeModelSize(cfg);
        if (!size)
          continue;
        int64_t perReplica = m.batchSize / dp;
        for (int64_t b : divisors(perReplica)) {
          if (b > 64 && microBatch == 0)
            break;
          if (microBatch > 0 && b != microBatch)
            continue;
          int64_t micro = perReplica / b;
          for (int zero = 0; zero <= (dp * cp > 1 ? 3 : 0); ++zero) {
            // What gptc's runtime runs: pipelines recompute each chunk in
            // its backward; the one-program step keeps its activations or
            // recomputes them (gptc-recompute, selective or full).
            for (int sp = 0; sp <= (tp > 1 && cp == 1 ? 1 : 0); ++sp) {
              if (sp && m.seqLen % tp)
                continue;
              // (A pipeline: 1F1B, interleaved over 2 chunks a stage, or
              // ZB-H1.)
              const auto oneF = PipelineScheduleKind::OneFOneB,
                         zb = PipelineScheduleKind::ZeroBubbleH1;
              for (auto [v, recompute, schedule] :
                   {std::tuple{int64_t(1), Recompute::None, oneF},
                    std::tuple{int64_t(1), Recompute::Selective, oneF},
                    std::tuple{int64_t(1), Recompute::Full, oneF},
                    std::tuple{int64_t(2), Recompute::Full, oneF},
                    std::tuple{int64_t(1), Recompute::Full, zb}}) {
                if (v > 1 && (pp == 1 || micro % pp || m.numLayers < pp * v))
                  continue;
                if (pp > 1 && recompute != Recompute::Full)
                  continue;
                if (schedule == zb && pp == 1)
                  continue;
                // The better of the two placements (dp or pp outermost).
                std::optional<std::pair<ParallelPlan, PlanCost>> best;
                for (bool outer : {true, false}) {
                  if (!outer && (pp == 1 || dp == 1))
                    continue; // the same placement
                  ParallelPlan plan;
                  plan.dp = dp;
                  plan.tp = tp;
                  plan.pp = pp;
                  plan.cp = cp;
                  plan.zeroStage = zero;
                  plan.sequenceParallel = sp;
                  plan.microBatch = b;
                  plan.microbatches = micro;
                  plan.virtualStages = v;
                  plan.schedule =
                      v > 1 ? PipelineScheduleKind::Interleaved : schedule;
                  plan.recompute = recompute;
                  plan.dataOutermost = outer;
                  ++out.considered;
                  PlanCost cost = evaluatePlan(cfg, *size, plan, hw);
                  if (!out.smallest || cost.memoryBytes < out.smallestMemory) {
                    out.smallest = plan;
                    out.smallestMemory = cost.memoryBytes;
                  }
                  if (cost.fits &&
                      (!best || cost.stepSeconds < best->second.stepSeconds))
                    best = {plan, std::move(cost)};
                }
                if (best)
                  out.plans.push_back(std::move(*best));
              }
            }
          }
        }
      }
    }
  }
  std::stable_sort(out.plans.begin(), out.plans.end(),
                   [](const auto &a, const auto &b) {
                     return ranksBefore(a.second, b.second);
                   });
  for (const auto &[why, meshes] : rules) {
    std::string line;
    for (const std::string &mesh : meshes)
      line += (line.empty() ? "" : ", ") + mesh;
    out.excluded.push_back(line + ": " + why);
  }
  return out;
}
