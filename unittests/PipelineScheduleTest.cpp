//===- PipelineScheduleTest.cpp - Pipeline plans and schedules -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

using namespace mlir::gptc;

namespace {

PipelineTimeline simulate(int64_t p, int64_t v, int64_t m,
                          PipelineScheduleKind kind) {
  std::string error;
  auto part = partitionPipeline(p * v * 2, p, v, 1.0, 0.0, 0.0, error);
  EXPECT_TRUE(part) << error;
  auto programs = buildPipelinePrograms(*part, m, kind, error);
  EXPECT_TRUE(programs) << error;
  std::vector<double> equal(p * v, 1.0 / static_cast<double>(v));
  auto t = simulatePipeline(*programs, equal, v, error);
  EXPECT_TRUE(t) << error;
  return *t;
}

} // namespace

// GPipe and 1F1B idle (p-1)/(m+p-1) of the time with equal stages; 1F1B
// holds at most p - s microbatches' activations on stage s, GPipe all m.
TEST(PipelineSchedule, BubbleAndInFlightOfGPipeAnd1F1B) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 7, 8, 16}) {
      double expected = double(p - 1) / double(m + p - 1);
      PipelineTimeline g = simulate(p, 1, m, PipelineScheduleKind::GPipe);
      PipelineTimeline f = simulate(p, 1, m, PipelineScheduleKind::OneFOneB);
      EXPECT_NEAR(g.bubbleFraction, expected, 1e-12) << p << " " << m;
      EXPECT_NEAR(f.bubbleFraction, expected, 1e-12) << p << " " << m;
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(g.peakInFlight[s], double(m));
        EXPECT_EQ(f.peakInFlight[s], double(std::min(m, p - s)));
      }
    }
}

// ZB-H1 (each backward split into B and W, each stage s deferring W by s
// microbatches): with equal F, B and W and m >= p, (p-1) idle units of
// 3m + p - 1, against 1F1B's 3(p-1) of 3m + 3(p-1); fewer microbatches
// still beat 1F1B. Every stage holds at most p microbatches (1F1B's first
// stage's peak); each runs every microbatch's F, B and W once, B before W.
TEST(PipelineSchedule, ZeroBubbleH1) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 7, 8, 16}) {
      PipelineTimeline z =
          simulate(p, 1, m, PipelineScheduleKind::ZeroBubbleH1);
      PipelineTimeline f = simulate(p, 1, m, PipelineScheduleKind::OneFOneB);
      if (m >= p)
        EXPECT_NEAR(z.bubbleFraction, double(p - 1) / double(3 * m + p - 1),
                    1e-12)
            << p << " " << m;
      EXPECT_LT(z.bubbleFraction, f.bubbleFraction) << p << " " << m;
      for (int64_t s = 0; s < p; ++s)
        EXPECT_LE(z.peakInFlight[s], double(std::min(m, p))) << p << " " << m;
      std::string error;
      auto part = partitionPipeline(2 * p, p, 1, 1.0, 0.0, 0.0, error);
      auto programs = buildPipelinePrograms(
          *part, m, PipelineScheduleKind::ZeroBubbleH1, error);
      ASSERT_TRUE(programs) << error;
      for (const auto &program : *programs) {
        std::set<int64_t> f, b, w;
        for (const PipelineOp &op : program) {
          EXPECT_NE(op.kind, PipelineOp::Backward);
          if (op.kind == PipelineOp::Forward)
            f.insert(op.microbatch);
          if (op.kind == PipelineOp::BackwardInput) {
            EXPECT_TRUE(f.count(op.microbatch));
            b.insert(op.microbatch);
          }
          if (op.kind == PipelineOp::BackwardWeight) {
            EXPECT_TRUE(b.count(op.microbatch));
            EXPECT_TRUE(w.insert(op.microbatch).second);
          }
        }
        EXPECT_EQ(int64_t(w.size()), m);
        EXPECT_EQ(int64_t(b.size()), m);
      }
    }
  // Its weight halves are free to move: no message waits for them.
  std::string error;
  auto part = partitionPipeline(8, 4, 1, 1.0, 0.0, 0.0, error);
  auto programs = buildPipelinePrograms(
      *part, 8, PipelineScheduleKind::ZeroBubbleH1, error);
  ASSERT_TRUE(programs);
  for (const auto &program : *programs)
    for (size_t k = 0; k + 1 < program.size(); ++k)
      if (program[k].kind == PipelineOp::BackwardWeight)
        EXPECT_FALSE(program[k + 1].kind == PipelineOp::Send &&
                     program[k + 1].microbatch == program[k].microbatch &&
                     program[k + 1].gradient);
  EXPECT_EQ(describePipelineOp({PipelineOp::BackwardWeight, 3, 0}, false),
            "W3");
  EXPECT_EQ(describePipelineOp({PipelineOp::BackwardInput, 3, 1}, true),
            "B3.1");
  EXPECT_EQ(parsePipelineSchedule("zb-h1"), PipelineScheduleKind::ZeroBubbleH1);
  EXPECT_STREQ(pipelineScheduleName(PipelineScheduleKind::ZeroBubbleH1),
               "zb-h1");
  // No virtual stages.
  auto two = partitionPipeline(8, 2, 2, 1.0, 0.0, 0.0, error);
  EXPECT_FALSE(buildPipelinePrograms(
      *two, 4, PipelineScheduleKind::ZeroBubbleH1, error));
}

// Interleaving v chunks per stage shrinks the bubble.
TEST(PipelineSchedule, InterleavedBubbleIsSmaller) {
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8, 16})
      for (int64_t v : {2, 3}) {
        PipelineTimeline f = simulate(p, 1, m, PipelineScheduleKind::OneFOneB);
        PipelineTimeline i =
            simulate(p, v, m, PipelineScheduleKind::Interleaved);
        EXPECT_LT(i.bubbleFraction, f.bubbleFraction)
            << p << " " << m << " " << v;
      }
}

// Every send has its receive on the peer, and each stage computes each
// microbatch's forward before its backward.
TEST(PipelineSchedule, SendsMatchReceives) {
  std::string error;
  auto part = partitionPipeline(8, 4, 2, 1.0, 0.5, 2.0, error);
  ASSERT_TRUE(part) << error;
  auto programs =
      buildPipelinePrograms(*part, 8, PipelineScheduleKind::Interleaved, error);
  ASSERT_TRUE(programs) << error;
  std::multiset<std::tuple<int64_t, int64_t, bool, int64_t, int64_t>> sends,
      recvs;
  for (int64_t s = 0; s < 4; ++s)
    for (const PipelineOp &op : (*programs)[s]) {
      if (op.kind == PipelineOp::Send)
        sends.insert({s, op.peer, op.gradient, op.microbatch, op.chunk});
      if (op.kind == PipelineOp::Recv)
        recvs.insert({op.peer, s, op.gradient, op.microbatch, op.chunk});
    }
  EXPECT_EQ(sends, recvs);
  EXPECT_EQ(sends.size(), size_t(2 * 8 * 7)); // 7 boundaries, both ways
}

// The partition balances FLOPs: the head's cost pulls layers off the last
// stage; more chunks than layers is an error.
TEST(PipelineSchedule, PartitionBalancesCost) {
  std::string error;
  auto part = partitionPipeline(12, 4, 1, 1.0, 0.0, 3.0, error);
  ASSERT_TRUE(part) << error;
  EXPECT_EQ(part->chunks.back().second - part->chunks.back().first, 1);
  for (double c : part->forwardCost)
    EXPECT_LE(c, 4.0);
  EXPECT_FALSE(partitionPipeline(3, 2, 2, 1.0, 0.0, 0.0, error));
  EXPECT_NE(error.find("need at least 4 layers"), std::string::npos) << error;
}

// A stage that runs a backward before the forward it needs waits forever:
// the simulation names the wait cycle.
TEST(PipelineSchedule, DeadlockIsDiagnosed) {
  std::vector<std::vector<PipelineOp>> programs(2);
  // Stage 0 waits for microbatch 0's gradient before sending its activation.
  programs[0] = {{PipelineOp::Recv, 0, 0, 1, true},
                 {PipelineOp::Forward, 0, 0, -1, false},
                 {PipelineOp::Send, 0, 1, 1, false},
                 {PipelineOp::Backward, 0, 0, -1, true}};
  programs[1] = {{PipelineOp::Recv, 0, 1, 0, false},
                 {PipelineOp::Forward, 0, 1, -1, false},
                 {PipelineOp::Backward, 0, 1, -1, true},
                 {PipelineOp::Send, 0, 0, 0, true}};
  std::string error;
  PipelineStall stall;
  EXPECT_FALSE(simulatePipeline(programs, {1.0, 1.0}, 1, error, &stall));
  EXPECT_EQ(error, "the pipeline schedule deadlocks: stage 0 waits for the "
                   "gradient of microbatch 0 from stage 1, which waits for "
                   "the activation of microbatch 0 from stage 0 (a cycle)");
  // Where: stage 0's first op, the receive the chain starts from.
  EXPECT_EQ(stall.stage, 0);
  EXPECT_EQ(stall.index, 0u);
  // A receive nobody sends.
  programs[1].pop_back();
  EXPECT_FALSE(simulatePipeline(programs, {1.0, 1.0}, 1, error));
  EXPECT_EQ(error, "the pipeline schedule deadlocks: stage 0 waits for the "
                   "gradient of microbatch 0 from stage 1, which never sends "
                   "it");
}

TEST(PipelineSchedule, ScheduleArgumentsAreChecked) {
  std::string error;
  auto part = partitionPipeline(8, 4, 1, 1.0, 0.0, 0.0, error);
  ASSERT_TRUE(part);
  EXPECT_FALSE(buildPipelinePrograms(*part, 6,
                                     PipelineScheduleKind::Interleaved, error));
  EXPECT_NE(error.find("2 or more virtual stages"), std::string::npos);
  auto two = partitionPipeline(8, 4, 2, 1.0, 0.0, 0.0, error);
  ASSERT_TRUE(two);
  EXPECT_FALSE(
      buildPipelinePrograms(*two, 6, PipelineScheduleKind::Interleaved, error));
  EXPECT_NE(error.find("multiple of the pipeline stages"), std::string::npos);
  EXPECT_FALSE(
      buildPipelinePrograms(*two, 8, PipelineScheduleKind::OneFOneB, error));
  EXPECT_NE(error.find("virtual stages are for the interleaved"),
            std::string::npos);
}

// Every message is timed: sent when its sender reaches the send, taken
// when its receiver reaches the receive (never before it was sent).
TEST(PipelineSchedule, MessagesAreTimed) {
  std::string error;
  auto part = partitionPipeline(8, 4, 1, 1.0, 0.0, 0.0, error);
  ASSERT_TRUE(part);
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB}) {
    auto programs = buildPipelinePrograms(*part, 8, kind, error);
    ASSERT_TRUE(programs) << error;
    auto t = simulatePipeline(*programs, part->forwardCost, 1, error);
    ASSERT_TRUE(t) << error;
    size_t sends = 0;
    for (const auto &program : *programs)
      for (const PipelineOp &op : program)
        sends += op.kind == PipelineOp::Send;
    ASSERT_EQ(t->messages.size(), sends);
    for (const auto &m : t->messages) {
      EXPECT_GE(m.received, m.sent);
      EXPECT_EQ(m.to, m.op.peer);
      EXPECT_EQ(m.from + (m.op.gradient ? -1 : 1), m.to);
    }
  }
}
