//===- Planner.h - Cost model and search of parallel plans -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc plan`: for a model, a device count and a hardware description,
// every parallel plan gptc can run (data x tensor x pipeline axes and their
// placement against node boundaries, ZeRO stage, sequence parallelism,
// micro-batch size, pipeline schedule) priced by a closed-form cost model
// of one training step: compute on a GEMM roofline, each collective with
// alpha-beta ring costs on the link it crosses, the pipeline bubble, and
// memory per device from the state and activations gptc's runtime keeps.
// A transformer's layers are identical, so a plan is priced from one
// layer's figures times the layers a stage holds: planning time does not
// grow with depth. docs/Planning.md derives every term.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_ANALYSIS_PLANNER_H
#define GPTC_ANALYSIS_PLANNER_H

#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/PipelineSchedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gptc {

/// A link's ring-collective bandwidth (bytes/s per device, each way) and
/// per-message latency (s).
struct LinkSpec {
  double bandwidth = 0, latency = 0;
};

/// The hardware a plan runs on (from a hardware description).
struct HardwareSpec {
  std::string name, deviceName;
  int64_t devicesPerNode = 1;
  /// Nodes available (0: as many as needed).
  int64_t nodes = 0;
  int64_t memoryBytes = 0;
  /// Dense peak FLOP/s by Precision (FP32, BF16, FP16); 0: unknown.
  double peakFlops[3] = {0, 0, 0};
  double gemmEfficiency = 0.75, memoryBandwidth = 0, usableMemory = 0.9;
  /// The FLOPs of a GEMM that runs at half the large-GEMM rate (0: none).
  double gemmHalfFlops = 0;
  LinkSpec intraNode, interNode;
  bool hasInterNode = false;
};

/// One way to train the model on the devices.
struct ParallelPlan {
  /// The mesh's axes of more than one device, row-major (the innermost,
  /// consecutive ranks, last): their names (dp, pp, cp, tp), sizes and
  /// kinds, as meshString prints them.
  struct Axis {
    const char *name;
    int64_t size;
    MeshAxisKind kind;
  };
  std::vector<Axis> axes() const;
  int64_t dp = 1, tp = 1, pp = 1;
  /// Context parallelism: the sequence over cp ranks (between tp and the
  /// others in the mesh: its groups gather every layer's keys and values).
  int64_t cp = 1;
  int64_t devices() const { return dp * tp * pp * cp; }
  int zeroStage = 0;
  bool sequenceParallel = false;
  /// Sequences per microbatch on each replica, and microbatches per step.
  int64_t microBatch = 1, microbatches = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  int64_t virtualStages = 1;
  Recompute recompute = Recompute::None;
  /// The axes' order from the innermost (consecutive ranks, one node
  /// first): tp, cp, then pp, then dp when true; tp, cp, dp, pp otherwise.
  bool dataOutermost = true;

  /// The --mesh of the plan, row-major with the innermost axis last
  /// ("dp=8,pp=16,tp=8", "dp=4,cp=2,tp=8").
  std::string meshString() const;
  /// Whether the plan reduce-scatters every microbatch's gradients
  /// (`--zero-reduce=microbatch`): ZeRO 2/3 with accumulation and no
  /// pipeline, so that the gradients are held as slices as the memory
  /// model counts them.
  bool reducesEachMicrobatch() const {
    return dp * cp > 1 && pp == 1 && zeroStage >= 2 && microbatches > 1 &&
           !reduceOncePerStep;
  }
  /// ZeRO 2/3 with accumulation and no pipeline reduce-scatter the
  /// microbatches' sum once per step instead (`--zero-reduce=step`, whole
  /// gradients through the loop): a plan a user gives (the search always
  /// reduces each microbatch's).
  bool reduceOncePerStep = false;
};

/// One kind of communication of a step, on one device.
struct CommCost {
  std::string kind;  ///< "all_reduce", "send", ...
  std::string axis;  ///< "tp", "pp", "dp"
  std::string what;  ///< "layer activations", "gradients", ...
  int64_t bytes = 0; ///< G: the tensor of one run
  int64_t runs = 0;  ///< per step
  bool interNode = false;
  /// Bytes this device sends over the step, and the seconds they take.
  double sentBytes = 0, seconds = 0;
  /// Of `seconds`, those hidden behind the backward's computation (the
  /// runtime keeps the collective in flight while later kernels run).
  double overlappedSeconds = 0;
};

/// The predicted cost of a plan's step, per device.
struct PlanCost {
  double stepSeconds = 0;
  double computeSeconds = 0; ///< the step's FLOPs (with recomputation)
  double memorySeconds = 0;  ///< elementwise traffic on the memory roofline
  double bubbleSeconds = 0;  ///< pipeline fill and drain
  double commSeconds = 0;    ///< exposed communication
  /// Communication hidden behind the backward (not in stepSeconds).
  double overlappedSeconds = 0;
  double modelFlops = 0; ///< per step, all devices (no recomputation)
  double mfu = 0;        ///< modelFlops / (step x devices x peak)
  // Memory of the most loaded device.
  int64_t weightBytes = 0, gradBytes = 0, optimizerBytes = 0,
          activationBytes = 0, logitBytes = 0, memoryBytes = 0;
  int64_t paramsPerDevice = 0;
  bool fits = false;
  double sentBytes = 0; ///< per device per step: ties go to less
  std::vector<CommCost> comms;
};

/// Prices `plan` for `config` on `hw` (whose precision is the config's).
PlanCost evaluatePlan(const ModelConfig &config, const ModelSize &size,
                      const ParallelPlan &plan, const HardwareSpec &hw);

/// Why gptc cannot run `plan` for `config` on `hw` by the planner's rules
/// (those the search applies: divisibility, tensor parallelism within a
/// node, stages and chunks against layers); empty when it can.
std::string checkPlan(const ModelConfig &config, const ParallelPlan &plan,
                      const HardwareSpec &hw);

/// Whether plan cost `a` ranks before `b` in the search's order: faster
/// first, and within the same 0.5% band of step time the one that sends
/// less, then the one that needs less memory.
bool ranksBefore(const PlanCost &a, const PlanCost &b);

/// Every runnable plan of `config` on `devices` devices of `hw`, fastest
/// first (ties: less communication), and how many were considered. A
/// nonzero `microBatch` keeps only plans whose microbatches hold that many
/// sequences (an imported ONNX graph's, which its token input fixes).
struct PlanSearch {
  std::vector<std::pair<ParallelPlan, PlanCost>> plans;
  int64_t considered = 0;
  /// The memory per device of data parallelism alone with ZeRO-3 and one
  /// sequence per microbatch (its least; the fixed microbatch's where
  /// there is one), fitting or not.
  int64_t dataParallelMemory = 0;
  /// The plan considered that needs the least memory per device, fitting
  /// or not (what a refusal for memory names), and its memory.
  std::optional<ParallelPlan> smallest;
  int64_t smallestMemory = 0;
  /// Why meshes of these devices were not considered, one line per rule
  /// that excluded some ("tp=3: num_heads 4 is not a multiple of 3"), in
  /// the order found: what a refusal names when no plan is left.
  std::vector<std::string> excluded;
};
std::optional<PlanSearch> searchPlans(const ModelConfig &config,
                                      const HardwareSpec &hw, int64_t devices,
                                      std::string &error,
                                      int64_t microBatch = 0);

} // namespace mlir::gptc

#endif // GPTC_ANALYSIS_PLANNER_H
