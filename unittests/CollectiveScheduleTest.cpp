//===- CollectiveScheduleTest.cpp - Where collectives are waited for -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CollectiveSchedule.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace gptc;
using namespace gptc::runtime;

namespace {
/// A function of f32[4] values (16 bytes each) at the given arena
/// offsets (-1: unplanned) on a grid of two devices.
program::Function makeFunction(const std::vector<int64_t> &offsets) {
  program::Function f;
  f.set_name("f");
  f.add_grid_shape(2);
  for (size_t i = 0; i < offsets.size(); ++i) {
    program::Value *v = f.add_values();
    v->set_id(static_cast<int32_t>(i));
    v->mutable_type()->set_dtype(program::F32);
    v->mutable_type()->add_shape(4);
    v->set_offset(offsets[i]);
  }
  return f;
}

void addKernel(program::Function &f, program::OpKind op,
               const std::vector<int32_t> &in,
               const std::vector<int32_t> &out) {
  program::Kernel *k = f.add_kernels();
  k->set_op(op);
  for (int32_t id : in)
    k->add_inputs(id);
  for (int32_t id : out)
    k->add_outputs(id);
  if (isDeviceCollective(op))
    k->mutable_collective()->add_grid_axes(0);
}
} // namespace

TEST(CollectiveSchedule, WaitsBeforeTheFirstReader) {
  // v0 = k0(); v1 = all_reduce(v0); v2 = k2(); v3 = k3(v1)
  program::Function f = makeFunction({-1, -1, -1, -1});
  addKernel(f, program::COMPILED, {}, {0});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::COMPILED, {}, {2});
  addKernel(f, program::COMPILED, {1}, {3});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kernel, 1u);
  EXPECT_EQ(s[0].waitBefore, 3u);
}

TEST(CollectiveSchedule, UnreadResultIsWaitedForAtTheEnd) {
  program::Function f = makeFunction({-1, -1, -1});
  addKernel(f, program::COMPILED, {}, {0});
  addKernel(f, program::ALL_GATHER, {0}, {1});
  addKernel(f, program::COMPILED, {}, {2});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].waitBefore, 3u); // kernels_size(): the end
}

TEST(CollectiveSchedule, ReuseOfTheInputBufferWaits) {
  // The plan puts v2 where the all-reduce's input v0 was (v0's last
  // reader is the all-reduce): writing v2 must wait for it.
  program::Function f = makeFunction({0, 16, 0, 32});
  addKernel(f, program::COMPILED, {}, {0});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::COMPILED, {}, {3});
  addKernel(f, program::COMPILED, {}, {2});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].waitBefore, 3u);
}

TEST(CollectiveSchedule, PartialOverlapOfTheOutputWaits) {
  // v2 (bytes 8..24) overlaps the output v1 (16..32) by half.
  program::Function f = makeFunction({0, 16, 8});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::COMPILED, {}, {2});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].waitBefore, 1u);
}

TEST(CollectiveSchedule, LaterCollectivesDoNotWait) {
  // A second collective reading the first's result runs after it on the
  // communication stream: the compute stream waits for neither.
  program::Function f = makeFunction({-1, -1, -1, -1});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::REDUCE_SCATTER, {1}, {2});
  addKernel(f, program::COMPILED, {}, {3});
  addKernel(f, program::COMPILED, {2}, {0});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 2u);
  // The first: its input v0 is written by kernel 3.
  EXPECT_EQ(s[0].waitBefore, 3u);
  // The second: its output v2 is read by kernel 3.
  EXPECT_EQ(s[1].waitBefore, 3u);
}

TEST(CollectiveSchedule, SeveralInFlightWaitForALaterCollective) {
  // The CPU keeps several collectives in flight at once (MPI): the same
  // program, without one stream, waits for the first collective before
  // the second, which reads its result; the second still overlaps.
  program::Function f = makeFunction({-1, -1, -1, -1});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::REDUCE_SCATTER, {1}, {2});
  addKernel(f, program::COMPILED, {}, {3});
  addKernel(f, program::COMPILED, {2}, {0});
  std::vector<ScheduledCollective> s =
      scheduleCollectives(f, /*oneStream=*/false);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].waitBefore, 1u);
  EXPECT_EQ(s[1].waitBefore, 3u);
  // A later collective writing over an earlier one's input waits too;
  // one that touches neither does not.
  program::Function g = makeFunction({0, 16, 0, 32, -1});
  addKernel(g, program::ALL_REDUCE, {0}, {1});
  addKernel(g, program::ALL_REDUCE, {4}, {3});
  addKernel(g, program::ALL_GATHER, {4}, {2});
  addKernel(g, program::COMPILED, {}, {4});
  s = scheduleCollectives(g, /*oneStream=*/false);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].waitBefore, 2u);
  EXPECT_EQ(s[1].waitBefore, 3u);
  EXPECT_EQ(s[2].waitBefore, 3u);
}

TEST(CollectiveSchedule, LocalOpsAreNotCollectives) {
  EXPECT_FALSE(isDeviceCollective(program::ALL_SLICE));
  EXPECT_FALSE(isDeviceCollective(program::SHARD_OFFSET));
  EXPECT_TRUE(isDeviceCollective(program::ALL_REDUCE_MAX));
  program::Function f = makeFunction({-1, -1});
  addKernel(f, program::ALL_SLICE, {0}, {1});
  EXPECT_TRUE(scheduleCollectives(f).empty());
}

TEST(CollectiveSchedule, BucketInPlaceIsWaitedForByAnyMembersReader) {
  // v0 = k0(); v1 = k1(); {v2, v3} = all_reduce(v0, v1) in place (v2 over
  // v0 at 0, v3 over v1 at 64); v4 = k3() elsewhere; v5 = k4(v3).
  program::Function f = makeFunction({0, 64, 0, 64, 128, -1});
  addKernel(f, program::COMPILED, {}, {0});
  addKernel(f, program::COMPILED, {}, {1});
  addKernel(f, program::ALL_REDUCE, {0, 1}, {2, 3});
  addKernel(f, program::COMPILED, {}, {4});
  addKernel(f, program::COMPILED, {3}, {5});
  std::vector<ScheduledCollective> s = scheduleCollectives(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].waitBefore, 4u);
  // A kernel that writes over a member's bytes waits for the bucket too.
  f.mutable_values(4)->set_offset(64);
  s = scheduleCollectives(f);
  EXPECT_EQ(s[0].waitBefore, 3u);
  std::ostringstream os;
  printDeviceSchedule(f, os);
  EXPECT_NE(os.str().find("  comm     #2 ALL_REDUCE bucket of 2 F32 tensors, "
                          "32 bytes over axes (0) of 2 ranks, waited for "
                          "before #3\n"),
            std::string::npos)
      << os.str();
}

TEST(CollectiveSchedule, BucketSpanNeedsThePlansLayout) {
  // f32[4] values: outputs over inputs at 0 and 64 (a 48-byte gap of
  // alignment): one span of 80 bytes.
  program::Function f = makeFunction({0, 64, 0, 64});
  addKernel(f, program::ALL_REDUCE, {0, 1}, {2, 3});
  EXPECT_EQ(bucketSpanBytes(f, f.kernels(0)), 80);
  // A gap of 64 bytes or more could hold another value: no span.
  f.mutable_values(1)->set_offset(128);
  f.mutable_values(3)->set_offset(128);
  EXPECT_EQ(bucketSpanBytes(f, f.kernels(0)), 0);
  // Not in place, out of order, unplanned or one tensor: no span.
  program::Function g = makeFunction({0, 64, 0, 128});
  addKernel(g, program::ALL_REDUCE, {0, 1}, {2, 3});
  EXPECT_EQ(bucketSpanBytes(g, g.kernels(0)), 0);
  program::Function h = makeFunction({64, 0, 64, 0});
  addKernel(h, program::ALL_REDUCE, {0, 1}, {2, 3});
  EXPECT_EQ(bucketSpanBytes(h, h.kernels(0)), 0);
  program::Function u = makeFunction({-1, -1, -1, -1});
  addKernel(u, program::ALL_REDUCE, {0, 1}, {2, 3});
  addKernel(u, program::ALL_REDUCE, {0}, {0});
  EXPECT_EQ(bucketSpanBytes(u, u.kernels(0)), 0);
  EXPECT_EQ(bucketSpanBytes(u, u.kernels(1)), 0);
}

TEST(CollectiveSchedule, PrintsStreamsAndWaits) {
  program::Function f = makeFunction({-1, -1, -1, -1});
  addKernel(f, program::COMPILED, {}, {0});
  addKernel(f, program::ALL_REDUCE, {0}, {1});
  addKernel(f, program::COMPILED, {}, {2});
  addKernel(f, program::COMPILED, {1}, {3});
  std::ostringstream os;
  printDeviceSchedule(f, os);
  EXPECT_EQ(os.str(),
            "function f: 3 steps on the compute stream, 1 collectives on the "
            "communication stream (1 overlapped with later kernels)\n"
            "  compute  #0 COMPILED\n"
            "  comm     #1 ALL_REDUCE F32[4] over axes (0) of 2 ranks, waited "
            "for before #3\n"
            "  compute  #2 COMPILED\n"
            "  compute  wait #1\n"
            "  compute  #3 COMPILED\n");
}
