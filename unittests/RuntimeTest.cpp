//===- RuntimeTest.cpp - Runtime contracts: GEMMs, kernels, errors -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
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
  std::vector<double> ad(a.size()), bd(b.size()), biasd(n),
      cd(c.size(), 1.0);
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
  k->set_symbol("f_k0_gelu");
  k->set_location("model.pbtxt:3:1");
  k->add_inputs(0);
  k->add_outputs(1);
  k->add_ints(4);
  std::string error;
  EXPECT_EQ(runtime::Executor::create(f, error), nullptr);
  EXPECT_NE(error.find("kernel 'f_k0_gelu' at model.pbtxt:3:1 is generated "
                       "code, but the program has no kernel library"),
            std::string::npos)
      << error;
}
