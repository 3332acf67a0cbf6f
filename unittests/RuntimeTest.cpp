//===- RuntimeTest.cpp - Runtime contracts ----------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Checksum.h"
#include "gptc/Runtime/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace gptc;
using namespace gptc::cpu;

/// oneDNN's products (strided, batched, accumulated, with a bias) agree
/// with the double reference to float rounding, and bf16 products to bf16
/// rounding of their inputs and result.
TEST(Gemm, StridedBatchedAgreesWithReference) {
  const int64_t batch = 3, m = 5, n = 7, k = 9;
  std::vector<float> a(batch * k * m), b(batch * k * n), bias(n),
      c(batch * m * n, 1.0f);
  std::vector<double> ad(a.size()), bd(b.size()), biasd(n), cd(c.size(), 1.0);
  for (size_t i = 0; i < a.size(); ++i)
    ad[i] = a[i] = std::sin(0.37 * i);
  for (size_t i = 0; i < b.size(); ++i)
    bd[i] = b[i] = std::cos(0.11 * i);
  for (int64_t i = 0; i < n; ++i)
    biasd[i] = bias[i] = 0.5f - 0.1f * i;
  GemmProblem p;
  p.batch1 = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {0, k * m, 1, m}; // A stored transposed
  p.b = {0, k * n, n, 1};
  p.c = {0, m * n, n, 1};
  p.accumulate = true;
  p.bias = true;
  gemm(p, a.data(), b.data(), c.data(), bias.data());
  gemm(p, ad.data(), bd.data(), cd.data(), biasd.data());
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(c[i], cd[i], 1e-5) << i;

  std::vector<BFloat16> ah(a.size()), bh(b.size()), ch(c.size()), biash(n);
  for (size_t i = 0; i < a.size(); ++i)
    ah[i] = toBFloat16(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    bh[i] = toBFloat16(b[i]);
  for (int64_t i = 0; i < n; ++i)
    biash[i] = toBFloat16(bias[i]);
  p.accumulate = false;
  gemm(p, ah.data(), bh.data(), ch.data(), biash.data());
  gemm(p, ad.data(), bd.data(), cd.data(), biasd.data());
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(toFloat(ch[i]), cd[i], 0.05 + 0.01 * std::abs(cd[i])) << i;
}

/// The bf16 product of a CPU without oneDNN's bf16 matmul (AVX2): exact on
/// products whose f32 result is exact, accumulating into C once rounded,
/// and within bf16 rounding of the double reference on a strided batch.
TEST(Gemm, WidenedBFloat16IsRoundedOnce) {
  // Small integers: every product and sum is exact in f32 and bf16.
  const int64_t m = 2, n = 3, k = 4;
  std::vector<BFloat16> a(m * k), b(k * n), c(m * n), bias(n);
  for (int64_t i = 0; i < m * k; ++i)
    a[i] = toBFloat16(float(i % 5) - 2);
  for (int64_t i = 0; i < k * n; ++i)
    b[i] = toBFloat16(float(i % 3));
  for (int64_t i = 0; i < n; ++i)
    bias[i] = toBFloat16(float(i));
  for (int64_t i = 0; i < m * n; ++i)
    c[i] = toBFloat16(10.0f);
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {0, 0, k, 1};
  p.b = {0, 0, n, 1};
  p.c = {0, 0, n, 1};
  p.bias = true;
  p.accumulate = true;
  p.bf16 = true;
  gemmWidened(p, a.data(), b.data(), c.data(), bias.data());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t q = 0; q < n; ++q) {
      float want = 10.0f + float(q);
      for (int64_t x = 0; x < k; ++x)
        want += toFloat(a[r * k + x]) * toFloat(b[x * n + q]);
      EXPECT_EQ(toFloat(c[r * n + q]), want) << r << "," << q;
    }
  // Accumulated in f32 and rounded once: 1 + 3 * 2^-9 -> 1 + 2^-7 (bf16's
  // spacing at 1). Summed in bf16, each partial sum would round back to 1.
  std::vector<BFloat16> one{toBFloat16(1.0f), toBFloat16(0.001953125f),
                            toBFloat16(0.001953125f), toBFloat16(0.001953125f)};
  std::vector<BFloat16> ones(4, toBFloat16(1.0f)), out(1);
  GemmProblem dot;
  dot.m = 1;
  dot.n = 1;
  dot.k = 4;
  dot.a = {0, 0, 4, 1};
  dot.b = {0, 0, 1, 1};
  dot.c = {0, 0, 1, 1};
  dot.bf16 = true;
  gemmWidened(dot, one.data(), ones.data(), out.data());
  EXPECT_EQ(out[0].bits, toBFloat16(1.0f + 3 * 0.001953125f).bits);
  EXPECT_EQ(toFloat(out[0]), 1.0078125f);
  // A strided batch: as the native path, within bf16 rounding.
  const int64_t batch = 3, mm = 5, nn = 7, kk = 9;
  std::vector<BFloat16> ah(batch * kk * mm), bh(batch * kk * nn),
      ch(batch * mm * nn), bb(nn);
  std::vector<double> ad(ah.size()), bd(bh.size()), cd(ch.size()), biasd(nn);
  for (size_t i = 0; i < ah.size(); ++i)
    ad[i] = toFloat(ah[i] = toBFloat16(std::sin(0.37 * i)));
  for (size_t i = 0; i < bh.size(); ++i)
    bd[i] = toFloat(bh[i] = toBFloat16(std::cos(0.11 * i)));
  for (int64_t i = 0; i < nn; ++i)
    biasd[i] = toFloat(bb[i] = toBFloat16(0.5f - 0.1f * i));
  GemmProblem s;
  s.batch1 = batch;
  s.m = mm;
  s.n = nn;
  s.k = kk;
  s.a = {0, kk * mm, 1, mm}; // A stored transposed
  s.b = {0, kk * nn, nn, 1};
  s.c = {0, mm * nn, nn, 1};
  s.bias = true;
  s.bf16 = true;
  gemmWidened(s, ah.data(), bh.data(), ch.data(), bb.data());
  gemm(s, ad.data(), bd.data(), cd.data(), biasd.data());
  for (size_t i = 0; i < ch.size(); ++i)
    EXPECT_NEAR(toFloat(ch[i]), cd[i], std::abs(cd[i]) / 256 + 1e-6) << i;
}

/// bf16 rounding is to nearest even, and NaN stays NaN.
TEST(Gemm, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(toBFloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(toBFloat16(1.00390625f).bits, 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even.
  EXPECT_EQ(toBFloat16(1.01171875f).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(std::nanf("")))));
  EXPECT_EQ(toFloat(toBFloat16(-2.5f)), -2.5f);
}

/// The GEMM library's state --emit=summary counts: building a product's
/// primitive takes memory once; the same product again (already built, as
/// in a runtime that ran it) and an empty one take none.
TEST(Gemm, PrimitiveBytesCountsEachProductOnce) {
  // The measure is the C library's heap statistics (mallinfo2), which
  // AddressSanitizer's allocator does not keep.
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "mallinfo2 does not see AddressSanitizer's allocator";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "mallinfo2 does not see AddressSanitizer's allocator";
#endif
#endif
  GemmProblem a = linearProblem(96, 40, 24, /*bias=*/true);
  GemmProblem b = matmulProblem(3, 17, 19, 23, /*transposeA=*/false,
                                /*transposeB=*/true);
  EXPECT_GT(gemmPrimitiveBytes({a, b}), 0);
  EXPECT_EQ(gemmPrimitiveBytes({a, b, a}), 0);
  EXPECT_EQ(gemmPrimitiveBytes({linearProblem(8, 8, 0, false)}), 0);
}

/// Bytes that are not a shared object are an error, not a crash.
TEST(KernelLibrary, GarbageIsAnError) {
  std::string error;
  auto lib = runtime::KernelLibrary::load("not an ELF file", error);
  EXPECT_EQ(lib, nullptr);
  EXPECT_NE(error.find("cannot load the program's kernels"), std::string::npos)
      << error;
}

/// A program that calls generated code but carries no kernel library is
/// refused when the executor is created, naming the kernel.
TEST(Executor, CompiledKernelNeedsALibrary) {
  program::Function f;
  f.set_name("f");
  for (int id = 0; id < 2; ++id) {
    program::Value *v = f.add_values();
    v->set_id(id);
    v->set_offset(-1);
    v->mutable_type()->set_dtype(program::F32);
    v->mutable_type()->add_shape(4);
  }
  f.add_inputs(0);
  f.add_outputs(1);
  program::Kernel *k = f.add_kernels();
  k->set_op(program::COMPILED);
  k->mutable_compiled()->set_symbol("f_k0_gelu");
  k->mutable_compiled()->set_extent(4);
  k->set_location("model.pbtxt:3:1");
  k->add_inputs(0);
  k->add_outputs(1);
  std::string error;
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("kernel 'f_k0_gelu' at model.pbtxt:3:1 is generated "
                       "code, but the program has no kernel library"),
            std::string::npos)
      << error;
}

/// Each kernel carries its op's own parameter message: a LAYER_NORM with
/// none, or with another op's, is refused when the executor is created.
TEST(Executor, KernelMustCarryItsOpsParameters) {
  program::Function f;
  f.set_name("f");
  for (int id = 0; id < 4; ++id) {
    program::Value *v = f.add_values();
    v->set_id(id);
    v->set_offset(-1);
    v->mutable_type()->set_dtype(program::F32);
    v->mutable_type()->add_shape(4);
  }
  for (int id = 0; id < 3; ++id)
    f.add_inputs(id);
  f.add_outputs(3);
  program::Kernel *k = f.add_kernels();
  k->set_op(program::LAYER_NORM);
  k->set_location("model.pbtxt:7:2");
  for (int id = 0; id < 3; ++id)
    k->add_inputs(id);
  k->add_outputs(3);
  std::string error;
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("kernel LAYER_NORM at model.pbtxt:7:2 does not carry "
                       "its op's parameters"),
            std::string::npos)
      << error;
  k->mutable_attention()->set_num_heads(2);
  error.clear();
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("does not carry its op's parameters"), std::string::npos)
      << error;
  k->mutable_norm()->set_epsilon(1e-5);
  error.clear();
  EXPECT_NE(runtime::Executor::create(f, error), nullptr) << error;
}

/// fp16 conversions: every half survives float and back; float -> half
/// rounds to nearest even, overflows to infinity from 65520 on, and keeps
/// subnormals.
TEST(Half, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h{static_cast<uint16_t>(bits)};
    float f = toFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(toFloat(toHalf(f)))) << bits;
      continue;
    }
    EXPECT_EQ(toHalf(f).bits, bits) << bits;
  }
  EXPECT_EQ(toHalf(1.0f).bits, 0x3c00);
  EXPECT_EQ(toHalf(65504.0f).bits, 0x7bff); // the largest half
  EXPECT_EQ(toHalf(65519.0f).bits, 0x7bff); // below the midpoint
  EXPECT_EQ(toHalf(65520.0f).bits, 0x7c00); // the midpoint: to even, inf
  EXPECT_EQ(toHalf(-1e6f).bits, 0xfc00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(toHalf(1.00048828125f).bits, 0x3c00);
  // 1 + 3 * 2^-11: halfway between 1 + 2^-10 and 1 + 2^-9: to even.
  EXPECT_EQ(toHalf(1.00146484375f).bits, 0x3c02);
  // The smallest subnormal is 2^-24; half of it ties to even (zero), a
  // little more rounds up.
  EXPECT_EQ(toHalf(5.9604644775390625e-08f).bits, 0x0001);
  EXPECT_EQ(toHalf(2.98023223876953125e-08f).bits, 0x0000);
  EXPECT_EQ(toHalf(3.0e-08f).bits, 0x0001);
  // Every float between two halves goes to the nearer one: against a
  // double-precision search over a sweep of magnitudes.
  for (float x = 1e-7f; x < 7e4f; x *= 1.0137f) {
    Half h = toHalf(x);
    double err = std::abs(double(toFloat(h)) - x);
    for (int d : {-1, 1}) {
      Half n{static_cast<uint16_t>(h.bits + d)};
      if (std::isfinite(toFloat(n)) && std::isfinite(toFloat(h))) {
        EXPECT_LE(err, std::abs(double(toFloat(n)) - x)) << x;
      }
    }
  }
}

/// PyTorch GradScaler's state machine: an overflow halves the scale and
/// does not count the update; the interval-th good step in a row doubles
/// it (unless that overflows f32).
TEST(Kernels, LossScaleUpdateFollowsGradScaler) {
  LossScaleState s{1024.0f, 0, 0};
  s = updateLossScale(s, /*found=*/true, 2.0, 0.5, 3);
  EXPECT_EQ(s.scale, 512.0f);
  EXPECT_EQ(s.good, 0);
  EXPECT_EQ(s.updates, 0);
  s = updateLossScale(s, false, 2.0, 0.5, 3);
  s = updateLossScale(s, false, 2.0, 0.5, 3);
  EXPECT_EQ(s.scale, 512.0f);
  EXPECT_EQ(s.good, 2);
  EXPECT_EQ(s.updates, 2);
  s = updateLossScale(s, false, 2.0, 0.5, 3);
  EXPECT_EQ(s.scale, 1024.0f);
  EXPECT_EQ(s.good, 0);
  EXPECT_EQ(s.updates, 3);
  LossScaleState top{3.0e38f, 0, 7};
  top = updateLossScale(top, false, 2.0, 0.5, 1);
  EXPECT_EQ(top.scale, 3.0e38f);
  EXPECT_EQ(top.good, 0);
  EXPECT_EQ(top.updates, 8);
}

/// A MULTI_ADAMW kernel that does not carry one weight decay per parameter
/// (a hand-edited artifact) is refused when the executor is created, with
/// the kernel's location; with them, it updates each tensor and may
/// overwrite only a tensor's own state in place.
TEST(Executor, MultiAdamWChecksItsParameters) {
  program::Function f;
  f.set_name("f");
  // 0, 1 p; 2, 3 g; 4, 5 m; 6, 7 v; 8 lr; 9 step; 10 scale
  //   -> 11, 12 p'; 13, 14 m'; 15, 16 v'.
  for (int id = 0; id < 17; ++id) {
    program::Value *v = f.add_values();
    v->set_id(id);
    v->set_offset(-1);
    v->mutable_type()->set_dtype(id == 9 ? program::I32 : program::F32);
    if (id < 8 || id > 10)
      v->mutable_type()->add_shape(id % 2 == 0 ? 3 : 2);
  }
  // Tensor 0 (p, g, m, v: ids 0, 2, 4, 6; results 11, 13, 15) has 3
  // elements, tensor 1 (ids 1, 3, 5, 7; results 12, 14, 16) has 2.
  for (int id = 11; id < 17; ++id)
    f.mutable_values(id)->mutable_type()->set_shape(0, id % 2 == 1 ? 3 : 2);
  for (int id = 0; id < 11; ++id)
    f.add_inputs(id);
  program::Kernel *k = f.add_kernels();
  k->set_op(program::MULTI_ADAMW);
  k->set_location("model.pbtxt:9:1");
  for (int id = 0; id < 11; ++id)
    k->add_inputs(id);
  for (int id = 11; id < 17; ++id) {
    k->add_outputs(id);
    f.add_outputs(id);
  }
  program::MultiAdamWParams *h = k->mutable_multi_adamw();
  h->set_beta1(0.9);
  h->set_beta2(0.95);
  h->set_eps(1e-8);
  h->add_weight_decays(0.1); // one decay for two parameters
  std::string error;
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("kernel MULTI_ADAMW at model.pbtxt:9:1 needs 4 "
                       "tensors, lr, step and scale (and a skip flag) per "
                       "update and one weight decay per parameter"),
            std::string::npos)
      << error;

  using runtime::Tensor;
  std::vector<Tensor> in;
  for (int id = 0; id < 11; ++id) {
    const program::TensorType &t = f.values(id).type();
    in.emplace_back(t.dtype(),
                    std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  }
  in[8].data<float>()[0] = 1e-3f;
  in[10].data<float>()[0] = 1.0f;
  std::vector<const Tensor *> args;
  for (Tensor &t : in)
    args.push_back(&t);
  std::vector<Tensor> out(6);
  h->add_weight_decays(0.0);
  error.clear();
  auto exec = runtime::Executor::create(f, error);
  ASSERT_NE(exec, nullptr) << error;
  EXPECT_TRUE(exec->run(args, out, error)) << error;
  // Output p'0 (id 11, output 0) may take p0's buffer (input 0), not p1's
  // (input 1) nor a moment of the other tensor (input 5).
  EXPECT_TRUE(exec->canOverwriteInput(0, 0));
  EXPECT_FALSE(exec->canOverwriteInput(0, 1));
  EXPECT_FALSE(exec->canOverwriteInput(0, 5));
  EXPECT_TRUE(exec->canOverwriteInput(2, 4)); // m'0 over m0
}

/// A gradient bucket is one ALL_REDUCE with n inputs and n outputs: one
/// output per input, one element type; on a group of one device it passes
/// its inputs through, also when they are unplanned (the packed path).
TEST(Executor, BucketAllReduceChecksAndRuns) {
  auto makeFunction = [](program::DType second) {
    program::Function f;
    f.set_name("f");
    f.add_grid_shape(1);
    // 0: f32[3], 1: second[2] -> 2: f32[3], 3: second[2].
    for (int id = 0; id < 4; ++id) {
      program::Value *v = f.add_values();
      v->set_id(id);
      v->set_offset(-1);
      v->mutable_type()->set_dtype(id % 2 ? second : program::F32);
      v->mutable_type()->add_shape(id % 2 ? 2 : 3);
    }
    f.add_inputs(0);
    f.add_inputs(1);
    f.add_outputs(2);
    f.add_outputs(3);
    program::Kernel *k = f.add_kernels();
    k->set_op(program::ALL_REDUCE);
    k->set_location("bucket");
    k->add_inputs(0);
    k->add_inputs(1);
    k->add_outputs(2);
    k->add_outputs(3);
    k->mutable_collective()->add_grid_axes(0);
    return f;
  };
  std::string error;
  program::Function f = makeFunction(program::F32);
  f.mutable_kernels(0)->mutable_outputs()->RemoveLast();
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("kernel ALL_REDUCE at bucket needs one output per "
                       "input"),
            std::string::npos)
      << error;

  using runtime::Tensor;
  Tensor x(program::F32, {3}), y(program::F64, {2});
  for (int i = 0; i < 3; ++i)
    x.data<float>()[i] = 1.5f * i;
  std::vector<const Tensor *> args{&x, &y};
  std::vector<Tensor> out(2);
  error.clear();
  auto mixed = runtime::Executor::create(makeFunction(program::F64), error);
  ASSERT_NE(mixed, nullptr) << error;
  EXPECT_FALSE(mixed->run(args, out, error));
  EXPECT_NE(error.find("a bucket's tensors must share one element type"),
            std::string::npos)
      << error;

  Tensor z(program::F32, {2});
  z.data<float>()[0] = -1;
  z.data<float>()[1] = 7;
  args = {&x, &z};
  out.assign(2, Tensor());
  error.clear();
  auto exec = runtime::Executor::create(makeFunction(program::F32), error);
  ASSERT_NE(exec, nullptr) << error;
  ASSERT_TRUE(exec->run(args, out, error)) << error;
  EXPECT_EQ(std::memcmp(out[0].raw(), x.raw(), x.byteSize()), 0);
  EXPECT_EQ(std::memcmp(out[1].raw(), z.raw(), z.byteSize()), 0);
}

/// A skipped AdamW (fp16 overflow) returns its state unchanged, gradient
/// infinities and all.
TEST(Executor, AdamWSkipKeepsTheState) {
  program::Function f;
  f.set_name("f");
  // 0 p, 1 g, 2 m, 3 v, 4 lr, 5 step, 6 scale, 7 skip -> 8 p', 9 m', 10 v'.
  auto value = [&](int id, program::DType dtype, bool vector) {
    program::Value *v = f.add_values();
    v->set_id(id);
    v->set_offset(-1);
    v->mutable_type()->set_dtype(dtype);
    if (vector)
      v->mutable_type()->add_shape(3);
  };
  for (int id = 0; id < 4; ++id)
    value(id, program::F32, true);
  value(4, program::F32, false);
  value(5, program::I32, false);
  value(6, program::F32, false);
  value(7, program::F32, false);
  for (int id = 8; id < 11; ++id)
    value(id, program::F32, true);
  for (int id = 0; id < 8; ++id)
    f.add_inputs(id);
  program::Kernel *k = f.add_kernels();
  k->set_op(program::ADAMW);
  for (int id = 0; id < 8; ++id)
    k->add_inputs(id);
  for (int id = 8; id < 11; ++id) {
    k->add_outputs(id);
    f.add_outputs(id);
  }
  program::AdamWParams *h = k->mutable_adamw();
  h->set_beta1(0.9);
  h->set_beta2(0.95);
  h->set_eps(1e-8);
  h->set_weight_decay(0.1);
  std::string error;
  auto exec = runtime::Executor::create(f, error);
  ASSERT_NE(exec, nullptr) << error;
  using runtime::Tensor;
  std::vector<Tensor> in;
  for (int i = 0; i < 4; ++i) {
    in.emplace_back(program::F32, std::vector<int64_t>{3});
    for (int j = 0; j < 3; ++j)
      in.back().data<float>()[j] = 0.5f * (i + 1) + j;
  }
  in[1].data<float>()[1] = INFINITY;
  in.emplace_back(program::F32, std::vector<int64_t>{});
  in.back().data<float>()[0] = 1e-3f;
  in.emplace_back(program::I32, std::vector<int64_t>{});
  in.back().data<int32_t>()[0] = 4;
  in.emplace_back(program::F32, std::vector<int64_t>{});
  in.back().data<float>()[0] = 1.0f;
  in.emplace_back(program::F32, std::vector<int64_t>{});
  in.back().data<float>()[0] = 1.0f; // skip
  std::vector<const Tensor *> args;
  for (const Tensor &t : in)
    args.push_back(&t);
  std::vector<Tensor> out;
  ASSERT_TRUE(exec->run(args, out, error)) << error;
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(out[0].data<float>()[j], in[0].data<float>()[j]);
    EXPECT_EQ(out[1].data<float>()[j], in[2].data<float>()[j]);
    EXPECT_EQ(out[2].data<float>()[j], in[3].data<float>()[j]);
  }
  // Without the skip the same step updates (and the infinity spreads).
  in[7].data<float>()[0] = 0.0f;
  ASSERT_TRUE(exec->run(args, out, error)) << error;
  EXPECT_NE(out[0].data<float>()[0], in[0].data<float>()[0]);
}

TEST(Checksum, Crc32cKnownValuesAndContinuation) {
  using gptc::runtime::crc32c;
  // The check value of CRC-32C (RFC 3720's test vector family).
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  // 32 zero bytes (RFC 3720, B.4).
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
  // Continuation, across the 8-byte words and the tail.
  const char *text = "checkpoints are checked tensor by tensor";
  size_t n = std::strlen(text);
  for (size_t cut = 0; cut <= n; ++cut)
    EXPECT_EQ(crc32c(crc32c(0, text, cut), text + cut, n - cut),
              crc32c(0, text, n));
}

TEST(Checksum, Fnv1aIsTheSameEverywhere) {
  EXPECT_EQ(gptc::runtime::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(gptc::runtime::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(gptc::runtime::fnv1a64("foobar"), 0x85944171f73967e8ull);
}
