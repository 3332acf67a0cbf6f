//===- CheckpointTest.cpp - Checkpoint directories --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Grid.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;
namespace fs = std::filesystem;

namespace {
/// This process's scratch root; removed when the test program ends, so the
/// suite leaves nothing behind in the temporary directory.
fs::path scratchRoot() {
  return fs::temp_directory_path() /
         ("gptc-checkpoint-test-" + std::to_string(::getpid()));
}

struct ScratchCleanup : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratchRoot(), ec);
  }
};
[[maybe_unused]] ::testing::Environment *const scratchCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

/// A fresh directory under the test's temporary directory.
std::string scratch(const std::string &name) {
  fs::path dir = scratchRoot() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

Tensor iota(std::vector<int64_t> shape, float first = 0) {
  Tensor t(program::F32, shape);
  float *p = t.data<float>();
  std::iota(p, p + t.numElements(), first);
  return t;
}

checkpoint::Manifest header(int64_t step) {
  checkpoint::Manifest h;
  h.set_model("m");
  h.set_fingerprint("fnv1a64:0");
  h.set_step(step);
  return h;
}
} // namespace

TEST(CheckpointStore, BlocksOfTheGrid) {
  // A 8x4 tensor split on dimension 0 over axis 1 of a 2x2 grid: ranks 0
  // and 2 (axis-1 index 0) hold rows 0-3, ranks 1 and 3 rows 4-7.
  BlockLayout l{{8, 4}, {{1}, {}}};
  std::vector<int64_t> grid = {2, 2};
  EXPECT_EQ(blockStart(l, grid, 0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(blockStart(l, grid, 1), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(blockStart(l, grid, 3), (std::vector<int64_t>{4, 0}));
  EXPECT_TRUE(firstHolder(l, grid, 0));
  EXPECT_TRUE(firstHolder(l, grid, 1));
  EXPECT_FALSE(firstHolder(l, grid, 2));
  EXPECT_FALSE(firstHolder(l, grid, 3));
  // Whole: only rank 0 writes it.
  BlockLayout whole{{8, 4}, {}};
  EXPECT_TRUE(firstHolder(whole, grid, 0));
  EXPECT_FALSE(firstHolder(whole, grid, 1));
}

TEST(CheckpointStore, ReadsAnyBoxAcrossShards) {
  // Written as two row blocks (as two ranks would), read back as column
  // blocks, a middle box and the whole: every element from its shard.
  std::string dir = scratch("boxes");
  Tensor whole = iota({6, 5});
  Tensor top(program::F32, {3, 5}), bottom(program::F32, {3, 5});
  std::memcpy(top.raw(), whole.raw(), top.byteSize());
  std::memcpy(bottom.raw(), whole.raw() + top.byteSize(), bottom.byteSize());
  std::vector<HeldBlock> blocks = {{"w", {6, 5}, {0, 0}, &top},
                                   {"w", {6, 5}, {3, 0}, &bottom}};
  std::string error;
  ASSERT_TRUE(
      writeCheckpointDirectory(dir, header(3), blocks, 1, nullptr, error))
      << error;
  auto reader = CheckpointReader::open(dir, error);
  ASSERT_TRUE(reader) << error;
  EXPECT_EQ(reader->manifest().step(), 3);
  EXPECT_EQ(reader->find("w")->shards_size(), 2);
  for (auto [start, shape] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{0, 0}, {6, 5}},
           {{0, 2}, {6, 3}},
           {{2, 1}, {3, 2}},
           {{5, 4}, {1, 1}}}) {
    Tensor box(program::F32, shape);
    ASSERT_TRUE(reader->read("w", {6, 5}, start, box, error)) << error;
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        EXPECT_EQ(box.data<float>()[i * shape[1] + j],
                  whole.data<float>()[(start[0] + i) * 5 + start[1] + j]);
  }
  // Another whole shape, a missing name and another dtype are errors.
  Tensor box(program::F32, {6, 5});
  EXPECT_FALSE(reader->read("w", {5, 6}, {0, 0}, box, error));
  EXPECT_NE(error.find("it holds [6x5], the model has [5x6]"),
            std::string::npos)
      << error;
  EXPECT_FALSE(reader->read("nope", {6, 5}, {0, 0}, box, error));
  Tensor ints(program::I32, {6, 5});
  EXPECT_FALSE(reader->read("w", {6, 5}, {0, 0}, ints, error));
}

TEST(CheckpointStore, KeepsTheNewestAndPointsLatestAtIt) {
  std::string dir = scratch("keep");
  Tensor t = iota({4});
  std::string error;
  for (int64_t step : {1, 2, 3, 4})
    ASSERT_TRUE(writeCheckpointDirectory(
        dir, header(step), {{"t", {4}, {0}, &t}}, 2, nullptr, error))
        << error;
  EXPECT_FALSE(fs::exists(dir + "/step-00000002"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000003"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000004"));
  // A run restarted from step 1 leaves the later steps of the other run
  // alone until it passes them.
  ASSERT_TRUE(writeCheckpointDirectory(dir, header(1), {{"t", {4}, {0}, &t}}, 2,
                                       nullptr, error));
  EXPECT_TRUE(fs::exists(dir + "/step-00000004"));
  auto reader = CheckpointReader::open(dir, error);
  ASSERT_TRUE(reader) << error;
  EXPECT_EQ(reader->manifest().step(), 1);
  EXPECT_EQ(reader->manifest().format_version(), 3);
}

TEST(CheckpointStore, ManifestChecks) {
  checkpoint::Manifest m;
  checkpoint::TensorRecord *t = m.add_tensors();
  t->set_name("w");
  t->set_dtype(program::F32);
  t->add_shape(4);
  t->add_shape(2);
  auto shard = [&](int64_t start, int64_t rows, uint64_t bytes,
                   std::string file = "rank-00000.bin") {
    checkpoint::Shard *s = t->add_shards();
    s->add_start(start);
    s->add_start(0);
    s->add_extent(rows);
    s->add_extent(2);
    s->set_bytes(bytes);
    s->set_file(file);
  };
  std::string error;
  shard(0, 2, 16);
  EXPECT_FALSE(verifyManifest(m, "x", error)); // rows 2-3 missing
  EXPECT_NE(error.find("do not cover it"), std::string::npos) << error;
  shard(1, 2, 16);
  EXPECT_FALSE(verifyManifest(m, "x", error)); // rows 1-2 overlap
  EXPECT_NE(error.find("overlap"), std::string::npos) << error;
  t->mutable_shards()->RemoveLast();
  shard(2, 2, 12);
  EXPECT_FALSE(verifyManifest(m, "x", error)); // byte count
  t->mutable_shards()->RemoveLast();
  shard(2, 3, 24);
  EXPECT_FALSE(verifyManifest(m, "x", error)); // outside
  t->mutable_shards()->RemoveLast();
  shard(2, 2, 16, "../../etc/passwd");
  EXPECT_FALSE(verifyManifest(m, "x", error)); // a path, not a file name
  t->mutable_shards()->RemoveLast();
  shard(2, 2, 16);
  EXPECT_TRUE(verifyManifest(m, "x", error)) << error;
  t->set_dtype(99);
  EXPECT_FALSE(verifyManifest(m, "x", error));
  t->set_dtype(program::F32);
  t->set_shape(0, int64_t(1) << 62);
  EXPECT_FALSE(verifyManifest(m, "x", error)); // overflowing size
}
