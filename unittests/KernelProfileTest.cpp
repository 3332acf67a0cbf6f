//===- KernelProfileTest.cpp - Pricing and reporting kernels ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `--profile` prices each kernel from its operands (KernelProfile.h) and
// reports the classes' rates. These tests build small functions by hand,
// so the expected bytes, FLOPs and rates are exact; test/gptc/profile.test
// checks the same on a whole trained model.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/KernelProfile.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

using namespace gptc;
using namespace gptc::runtime;

namespace {

/// A function with values of the given types, appended as needed.
struct Builder {
  program::Function f;
  int32_t value(program::DType t, std::vector<int64_t> shape) {
    program::Value *v = f.add_values();
    v->set_id(f.values_size() - 1);
    v->mutable_type()->set_dtype(t);
    for (int64_t d : shape)
      v->mutable_type()->add_shape(d);
    return v->id();
  }
  program::Kernel &kernel(program::OpKind op, std::vector<int32_t> in,
                          std::vector<int32_t> out) {
    program::Kernel *k = f.add_kernels();
    k->set_op(op);
    for (int32_t id : in)
      k->add_inputs(id);
    for (int32_t id : out)
      k->add_outputs(id);
    return *k;
  }
};

TEST(KernelProfile, GemmFlopsFollowTheContractedDimension) {
  Builder b;
  // LINEAR x [4, 8, 16] w [32, 16] b [32] -> y [4, 8, 32]: 2 * 32 rows *
  // 32 outputs * 16.
  int32_t x = b.value(program::BF16, {4, 8, 16});
  int32_t w = b.value(program::BF16, {32, 16});
  int32_t bias = b.value(program::BF16, {32});
  int32_t y = b.value(program::BF16, {4, 8, 32});
  KernelCost linear =
      kernelCost(b.f, b.kernel(program::LINEAR, {x, w, bias}, {y}));
  EXPECT_EQ(linear.cls, KernelCost::Gemm);
  EXPECT_DOUBLE_EQ(linear.flops, 2.0 * 32 * 32 * 16);
  EXPECT_DOUBLE_EQ(linear.bytes,
                   2.0 * (4 * 8 * 16 + 32 * 16 + 32 + 4 * 8 * 32));
  // A weight gradient: lhs [32 rows, 16] transposed, rhs [32, 8] -> [16, 8];
  // the contraction runs over the lhs's rows.
  int32_t lhs = b.value(program::F32, {32, 16});
  int32_t rhs = b.value(program::F32, {32, 8});
  int32_t out = b.value(program::F32, {16, 8});
  program::Kernel &mm = b.kernel(program::MATMUL, {lhs, rhs}, {out});
  mm.mutable_matmul()->set_transpose_lhs(true);
  EXPECT_DOUBLE_EQ(kernelCost(b.f, mm).flops, 2.0 * 16 * 8 * 32);
  mm.mutable_matmul()->set_transpose_lhs(false);
  EXPECT_DOUBLE_EQ(kernelCost(b.f, mm).flops, 2.0 * 16 * 8 * 16);
}

TEST(KernelProfile, AttentionAndMemoryBoundKernels) {
  Builder b;
  int32_t q = b.value(program::BF16, {2, 64, 32});
  KernelCost fwd =
      kernelCost(b.f, b.kernel(program::CAUSAL_ATTENTION, {q, q, q}, {q}));
  EXPECT_EQ(fwd.cls, KernelCost::Attention);
  EXPECT_DOUBLE_EQ(fwd.flops, 2.0 * 2 * 64 * 64 * 32);
  KernelCost bwd = kernelCost(
      b.f, b.kernel(program::CAUSAL_ATTENTION_GRAD, {q, q, q, q}, {q, q, q}));
  EXPECT_DOUBLE_EQ(bwd.flops, 2.5 * fwd.flops);

  // An embedding reads the table's rows its ids select, not the table.
  int32_t ids = b.value(program::I32, {2, 64});
  int32_t table = b.value(program::F32, {50000, 32});
  int32_t rows = b.value(program::F32, {2, 64, 32});
  KernelCost emb =
      kernelCost(b.f, b.kernel(program::EMBEDDING, {table, ids}, {rows}));
  EXPECT_EQ(emb.cls, KernelCost::Memory);
  EXPECT_DOUBLE_EQ(emb.bytes, 4.0 * 2 * 64 + 2 * (4.0 * 2 * 64 * 32));
  EXPECT_DOUBLE_EQ(emb.flops, 0);

  // A generated kernel: each operand once; views and collectives apart.
  program::Kernel &fused = b.kernel(program::COMPILED, {rows, rows}, {rows});
  fused.mutable_compiled()->set_symbol("k0_gelu");
  EXPECT_DOUBLE_EQ(kernelCost(b.f, fused).bytes, 3 * 4.0 * 2 * 64 * 32);
  EXPECT_EQ(kernelCost(b.f, b.kernel(program::RESHAPE, {rows}, {q})).cls,
            KernelCost::Other);
  EXPECT_EQ(kernelCost(b.f, b.kernel(program::ALL_REDUCE, {rows}, {rows})).cls,
            KernelCost::Collective);
}

TEST(KernelProfile, ReportsRatesAgainstTheCopy) {
  Builder b;
  // A GEMM of 2 * 256^3 FLOPs and a kernel moving 3 * 4 MiB.
  int32_t a = b.value(program::F32, {256, 256});
  int32_t big = b.value(program::F32, {1 << 20});
  int32_t tiny = b.value(program::F32, {16});
  b.kernel(program::LINEAR, {a, a}, {a});
  program::Kernel &fused = b.kernel(program::COMPILED, {big, big}, {big});
  fused.mutable_compiled()->set_symbol("k1_add");
  fused.set_location("m.pbtxt:3:1 (h.0.ln_1) + m.pbtxt:4:1 + m.pbtxt:5:1");
  b.kernel(program::COMPILED, {tiny}, {tiny})
      .mutable_compiled()
      ->set_symbol("k2_small");
  // Two steps: the GEMM 1 ms a call (33.5 GFLOP/s = 0.0336 TFLOP/s), the
  // large kernel 12 MiB in 0.5 ms a call (25.2 GB/s), against a copy of
  // 50.3 GB/s: 50%.
  std::vector<KernelTime> times = {
      {&b.f, 0, 2e-3, 2}, {&b.f, 1, 1e-3, 2}, {&b.f, 2, 2e-6, 2}};
  std::ostringstream os;
  double copy = 2 * (12.0 * (1 << 20)) / 0.5e-3;
  printKernelProfile(os, "train_step", times, 2, true, 2e-3, copy);
  std::string text = os.str();
  EXPECT_NE(text.find("@train_step's kernels over 2 steps after the first: "
                      "1.50 ms a step of 2.00 ms (75%)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("0.0336 TFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("25.2 GB/s, 50% of the copy's 50.3 GB/s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("small"), std::string::npos) << text;
  // A fused kernel's location: its first op's, and how many more.
  EXPECT_NE(text.find("k1_add  m.pbtxt:3:1 (h.0.ln_1) + 2 more"),
            std::string::npos)
      << text;
  // The stream's format is left as it was.
  EXPECT_FALSE(os.flags() & std::ios_base::fixed);
  // One step after the first: said so.
  std::ostringstream one;
  printKernelProfile(one, "train_step", times, 1, true, 2e-3, copy);
  EXPECT_NE(one.str().find("over 1 step after the first: "), std::string::npos)
      << one.str();
  // Nothing ran: nothing to print.
  std::ostringstream none;
  printKernelProfile(none, "train_step", {}, 2, true, 2e-3, copy);
  EXPECT_EQ(none.str(), "");
}

TEST(KernelProfile, CpuCopyBandwidthIsMeasured) {
  std::string error;
  program::Program empty;
  std::unique_ptr<Backend> cpu = createCpuBackend(empty, error);
  ASSERT_TRUE(cpu) << error;
  EXPECT_GT(cpu->copyBandwidth(), 1e8);
}

} // namespace
