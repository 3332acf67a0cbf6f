//===- PlannerTest.cpp - The cost model's properties -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Each term of the cost model moves the way the system it models does:
// ZeRO trades memory for nothing (1, 2) or for communication (3), sequence
// parallelism splits activations, microbatches shrink the bubble, a link
// across nodes costs more than one inside, and the search's plans all fit.
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/Planner.h"

#include <gtest/gtest.h>

using namespace mlir::gptc;

namespace {
ModelConfig gpt2Medium() {
  ModelConfig m;
  m.vocabSize = 50257;
  m.contextLength = 1024;
  m.numLayers = 24;
  m.numHeads = 16;
  m.modelDim = 1024;
  m.mlpDim = 4096;
  m.batchSize = 512;
  m.seqLen = 1024;
  m.precision = Precision::BF16;
  return m;
}

HardwareSpec node() {
  HardwareSpec hw;
  hw.name = "test";
  hw.devicesPerNode = 8;
  hw.memoryBytes = int64_t(80) << 30;
  hw.peakFlops[1] = 1e15;
  hw.memoryBandwidth = 3e12;
  hw.intraNode = {300e9, 10e-6};
  hw.interNode = {40e9, 20e-6};
  hw.hasInterNode = true;
  return hw;
}

PlanCost cost(ParallelPlan plan, ModelConfig m = gpt2Medium()) {
  m.dataParallel = plan.dp;
  m.tensorParallel = plan.tp;
  m.pipelineParallel = plan.pp;
  m.contextParallel = plan.cp;
  std::optional<ModelSize> size = computeModelSize(m);
  EXPECT_TRUE(size);
  return evaluatePlan(m, *size, plan, node());
}
} // namespace

TEST(Planner, ZeroShrinksStateNotStepTime) {
  ParallelPlan p;
  p.dp = 8;
  p.microbatches = 64;
  PlanCost z0 = cost(p);
  p.zeroStage = 1;
  PlanCost z1 = cost(p);
  p.zeroStage = 2;
  PlanCost z2 = cost(p);
  p.zeroStage = 3;
  PlanCost z3 = cost(p);
  EXPECT_LT(z1.optimizerBytes, z0.optimizerBytes);
  EXPECT_EQ(z1.gradBytes, z0.gradBytes);
  EXPECT_LT(z2.gradBytes, z1.gradBytes);
  EXPECT_LT(z3.weightBytes, z2.weightBytes);
  // Bytes each device sends in a ring of 8: (8-1)/8 of the tensor for a
  // reduce-scatter or all-gather, twice that for an all-reduce. wte's
  // 50257 rows do not divide by 8, so ZeRO leaves it whole: its gradient
  // is all-reduced and nothing gathers it. ZeRO-1 adds the gather of the
  // updated slices to the all-reduce; ZeRO-2 with accumulation
  // reduce-scatters every microbatch's gradients (its slices are what the
  // memory counts: --zero-reduce=microbatch), then gathers; ZeRO-3 keeps
  // its slices (no gather after the update) and gathers the weights for
  // every microbatch's forward and backward: the bf16 casts of the sliced
  // ones, the norms in fp32 both ways, wpe in fp32 and only forward (so
  // wpe adds 4 bytes in all, as a matrix does, and a norm 8).
  EXPECT_TRUE(p.reducesEachMicrobatch());
  double params = double(z0.paramsPerDevice);
  double wte = 50257.0 * 1024, sliced = params - wte;
  double norms = (24 * 4 + 2) * 1024.0;
  auto ring = [](double bytes) { return 7.0 / 8 * bytes; };
  double tol = 1e-9 * z0.sentBytes * 64;
  EXPECT_NEAR(z0.sentBytes, 2 * ring(4 * params), tol);
  EXPECT_NEAR(z1.sentBytes, z0.sentBytes + ring(4 * sliced), tol);
  EXPECT_NEAR(z2.sentBytes,
              2 * ring(4 * wte) + 64 * ring(4 * sliced) + ring(4 * sliced),
              tol);
  EXPECT_NEAR(z3.sentBytes,
              2 * ring(4 * wte) + 64 * ring(4 * sliced) +
                  64 * ring(4 * (sliced + norms)),
              tol);
  // So each microbatch moves at most one ZeRO-0 all-reduce's bytes (half
  // in the reduce-scatter, a quarter in each 16-bit gather), where fp32
  // gathers would make it 1.5x.
  EXPECT_LT(z3.sentBytes, 64 * z0.sentBytes);
  EXPECT_GT(z3.stepSeconds, z2.stepSeconds);
  // Without accumulation ZeRO-2 reduces once: a reduce-scatter and the
  // gather move what ZeRO-0's all-reduce moves.
  p.microbatches = 1;
  p.zeroStage = 0;
  double once0 = cost(p).sentBytes;
  p.zeroStage = 2;
  EXPECT_FALSE(p.reducesEachMicrobatch());
  EXPECT_DOUBLE_EQ(cost(p).sentBytes, once0);
}

TEST(Planner, SequenceParallelSplitsActivations) {
  ParallelPlan p;
  p.tp = 4;
  p.dp = 2;
  p.microbatches = 256;
  PlanCost plain = cost(p);
  p.sequenceParallel = true;
  PlanCost sp = cost(p);
  EXPECT_LT(sp.activationBytes, plain.activationBytes);
  // An all-gather and a reduce-scatter move what an all-reduce moves.
  EXPECT_NEAR(sp.sentBytes, plain.sentBytes, 1e-9 * plain.sentBytes);
}

// Context parallelism: the same 8 sequences a replica on two ranks of a
// context axis (half the tokens each) hold less than half of one rank's
// activations plus every layer's gathered keys and values, gather and
// reduce-scatter them per layer and microbatch, and join the data axis
// for the gradients' reduction and ZeRO's slices.
TEST(Planner, ContextParallelSplitsTheSequence) {
  ParallelPlan one;
  one.dp = 4;
  one.microBatch = 8;
  one.microbatches = 16;
  one.zeroStage = 1;
  ParallelPlan split = one;
  split.cp = 2;
  PlanCost a = cost(one), c = cost(split);
  EXPECT_LT(c.activationBytes, a.activationBytes);
  EXPECT_GT(c.activationBytes, a.activationBytes / 2);
  EXPECT_LT(c.optimizerBytes, a.optimizerBytes);
  EXPECT_NEAR(c.computeSeconds * 2, a.computeSeconds, a.computeSeconds * 0.2);
  int kv = 0;
  for (const CommCost &x : c.comms) {
    if (x.axis == "cp") {
      ++kv;
      EXPECT_EQ(x.runs, 16 * 24);
      EXPECT_EQ(x.overlappedSeconds, 0);
    }
    if (x.what == "gradients") {
      EXPECT_EQ(x.kind, "all_reduce");
    }
  }
  EXPECT_EQ(kv, 2);
  EXPECT_EQ(split.meshString(), "dp=4,cp=2");
  EXPECT_EQ(checkPlan(gpt2Medium(), split, node()), "");
  ParallelPlan odd = split;
  odd.cp = 3;
  odd.dp = 4;
  EXPECT_NE(checkPlan(gpt2Medium(), odd, node()).find("seq_len 1024"),
            std::string::npos);
}

TEST(Planner, MicrobatchesShrinkTheBubble) {
  ParallelPlan p;
  p.pp = 4;
  p.dp = 2;
  p.recompute = Recompute::Full;
  p.microbatches = 4;
  p.microBatch = 64;
  PlanCost few = cost(p);
  p.microbatches = 64;
  p.microBatch = 4;
  PlanCost many = cost(p);
  EXPECT_LT(many.bubbleSeconds, few.bubbleSeconds);
  // (p - 1) / m of the busy time.
  EXPECT_NEAR(few.bubbleSeconds / (few.computeSeconds + few.memorySeconds),
              3.0 / 4.0, 1e-12);
  // Interleaving divides it by the virtual stages.
  p.virtualStages = 2;
  p.schedule = PipelineScheduleKind::Interleaved;
  PlanCost interleaved = cost(p);
  EXPECT_NEAR(interleaved.bubbleSeconds, many.bubbleSeconds / 2,
              1e-12 * many.bubbleSeconds);
}

TEST(Planner, CrossingNodesCostsMore) {
  // dp=16 spans two nodes: the gradients' all-reduce runs on the slow link.
  ParallelPlan p;
  p.dp = 8;
  p.microbatches = 64;
  PlanCost inNode = cost(p);
  p.dp = 16;
  p.microbatches = 32;
  PlanCost across = cost(p);
  ASSERT_FALSE(inNode.comms.empty());
  ASSERT_FALSE(across.comms.empty());
  EXPECT_FALSE(inNode.comms.back().interNode);
  EXPECT_TRUE(across.comms.back().interNode);
  EXPECT_GT(across.commSeconds, 4 * inNode.commSeconds);
}

TEST(Planner, SearchReturnsFittingPlansFastestFirst) {
  std::string error;
  auto search = searchPlans(gpt2Medium(), node(), 16, error);
  ASSERT_TRUE(search) << error;
  ASSERT_FALSE(search->plans.empty());
  EXPECT_GE(search->considered, int64_t(search->plans.size()));
  double usable = double(node().memoryBytes) * node().usableMemory;
  for (size_t i = 0; i < search->plans.size(); ++i) {
    const auto &[plan, c] = search->plans[i];
    EXPECT_TRUE(c.fits);
    EXPECT_LE(double(c.memoryBytes), usable);
    EXPECT_LE(plan.tp, 8);
    EXPECT_EQ(plan.devices(), 16);
    if (i) {
      EXPECT_GE(c.stepSeconds, search->plans[i - 1].second.stepSeconds * 0.995);
    }
  }
  // Too many nodes, or none of the precision's FLOP/s.
  HardwareSpec two = node();
  two.nodes = 1;
  EXPECT_FALSE(searchPlans(gpt2Medium(), two, 16, error));
  EXPECT_NE(error.find("need 2 nodes of 8; the hardware has 1"),
            std::string::npos);
  HardwareSpec fp32Only = node();
  fp32Only.peakFlops[1] = 0;
  EXPECT_FALSE(searchPlans(gpt2Medium(), fp32Only, 8, error));
}

// Planning does not grow with depth: a plan is priced from one layer.
TEST(Planner, PlansAsManyLayersInTheSameCount) {
  std::string error;
  ModelConfig shallow = gpt2Medium(), deep = gpt2Medium();
  shallow.numLayers = 48;
  deep.numLayers = 96;
  auto a = searchPlans(shallow, node(), 16, error);
  auto b = searchPlans(deep, node(), 16, error);
  ASSERT_TRUE(a && b);
  // The same candidates once every pipeline size (a divisor of 16, twice
  // for interleaving) has the layers it needs.
  EXPECT_EQ(a->considered, b->considered);
}

TEST(Planner, RecomputationTradesTimeForActivations) {
  ParallelPlan p;
  p.dp = 8;
  p.microBatch = 8;
  p.microbatches = 8;
  PlanCost none = cost(p);
  p.recompute = Recompute::Selective;
  PlanCost selective = cost(p);
  p.recompute = Recompute::Full;
  PlanCost full = cost(p);
  // Each mode keeps less and takes longer; only full adds products.
  EXPECT_LT(selective.activationBytes, none.activationBytes);
  EXPECT_LT(full.activationBytes, selective.activationBytes);
  EXPECT_GT(selective.stepSeconds, none.stepSeconds);
  EXPECT_GT(full.stepSeconds, selective.stepSeconds);
  EXPECT_DOUBLE_EQ(selective.computeSeconds, none.computeSeconds);
  EXPECT_GT(full.computeSeconds, none.computeSeconds * 1.25);
  EXPECT_LT(full.computeSeconds, none.computeSeconds * 4.0 / 3.0);
  // The state is the same.
  EXPECT_EQ(full.weightBytes + full.gradBytes + full.optimizerBytes,
            none.weightBytes + none.gradBytes + none.optimizerBytes);
}

// An imported graph fixes the microbatch (its token input's rows): every
// plan the search keeps has microbatches of exactly that many sequences.
TEST(Planner, FixedMicroBatchKeepsOnlyPlansOfIt) {
  std::string error;
  ModelConfig m = gpt2Medium();
  auto free = searchPlans(m, node(), 16, error);
  auto fixed = searchPlans(m, node(), 16, error, /*microBatch=*/4);
  ASSERT_TRUE(free && fixed) << error;
  ASSERT_FALSE(fixed->plans.empty());
  EXPECT_LT(fixed->considered, free->considered);
  for (const auto &[plan, cost] : fixed->plans) {
    EXPECT_EQ(plan.microBatch, 4);
    EXPECT_EQ(plan.dp * plan.microbatches * plan.microBatch, m.batchSize);
  }
  // A batch the fixed microbatch does not fill on any replica count gives
  // nothing to rank.
  auto none = searchPlans(m, node(), 16, error, /*microBatch=*/m.batchSize + 1);
  ASSERT_TRUE(none) << error;
  EXPECT_TRUE(none->plans.empty());
}
