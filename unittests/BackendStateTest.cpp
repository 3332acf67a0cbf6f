//===- BackendStateTest.cpp - The Backend's state operations ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The pipeline trainer's gradient sums and update go through the Backend's
// state operations (Backend.h): on the CPU they compute in the host
// tensors; behind the residency check (a device's memory contract on the
// CPU) they compute in the second copy, leave the host copy stale until
// syncToHost, and refuse a tensor that is not resident. The collectives
// are covered under mpirun (test/Parallel/residency-check.test), the GPU's
// kernels under emulation (DeviceKernelsTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/CPU/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;

namespace {

Tensor ramp(int64_t n, float scale) {
  Tensor t(program::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    t.data<float>()[i] = scale * std::sin(0.37f * static_cast<float>(i + 1));
  return t;
}

std::unique_ptr<Backend> cpuBackend() {
  std::string error;
  program::Program empty;
  std::unique_ptr<Backend> b = createCpuBackend(empty, error);
  EXPECT_TRUE(b) << error;
  return b;
}

TEST(BackendState, HostOperationsComputeInTheTensors) {
  std::unique_ptr<Backend> b = cpuBackend();
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->hasDeviceMemory());
  std::string error;
  Tensor x = ramp(100, 2.f), y = ramp(100, -0.5f);
  std::vector<float> sum(100);
  for (int i = 0; i < 100; ++i)
    sum[i] = y.data<float>()[i] + x.data<float>()[i];
  // Operands need not be resident on the host.
  ASSERT_TRUE(b->stateAdd(y, x, error)) << error;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(y.data<float>()[i], sum[i]) << i;
  // A span: elements [10, 30) only.
  ASSERT_TRUE(b->stateScale({&y, 10, 20}, 0.25f, error)) << error;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(y.data<float>()[i], i >= 10 && i < 30 ? sum[i] * 0.25f : sum[i]);
  double squares = 0, expected = 0;
  for (int i = 5; i < 50; ++i)
    expected += static_cast<double>(x.data<float>()[i]) * x.data<float>()[i];
  for (int i = 0; i < 3; ++i)
    expected += static_cast<double>(y.data<float>()[i]) * y.data<float>()[i];
  ASSERT_TRUE(b->stateSumOfSquares({{&x, 5, 45}, {&y, 0, 3}}, squares, error))
      << error;
  EXPECT_DOUBLE_EQ(squares, expected);
  ASSERT_TRUE(b->stateZero(y, error)) << error;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(y.data<float>()[i], 0.f);
}

TEST(BackendState, AdamWOnASliceIsTheCpuUpdate) {
  // ZeRO's slice: parameter and gradient elements [40, 100), moments as
  // long as the slice.
  std::unique_ptr<Backend> b = cpuBackend();
  ASSERT_TRUE(b);
  std::string error;
  Tensor p = ramp(100, 1.f), g = ramp(100, 0.01f), m = ramp(60, 0.001f),
         v = ramp(60, 1e-3f);
  for (int64_t i = 0; i < 60; ++i)
    v.data<float>()[i] = std::abs(v.data<float>()[i]);
  std::vector<float> p2(60), m2(60), v2(60);
  cpu::adamw<float>(p.data<float>() + 40, g.data<float>() + 40, m.data<float>(),
                    v.data<float>(), 60, 1e-3, 7, 0.5, 0.9, 0.95, 1e-8, 0.1,
                    p2.data(), m2.data(), v2.data());
  std::vector<float> before(p.data<float>(), p.data<float>() + 40),
      sliceBefore(p.data<float>() + 40, p.data<float>() + 100);
  ASSERT_TRUE(b->stateAdamW({{&p, &g, &m, &v, 40, 60, 0.1}}, 1e-3, 7, 0.5, 0.9,
                            0.95, 1e-8, error))
      << error;
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(p.data<float>()[i], before[i]) << "outside the slice " << i;
  // (multiAdamW's vector code may contract to FMAs where adamw<float>,
  // compiled here, does not.)
  for (int i = 0; i < 60; ++i) {
    EXPECT_NEAR(p.data<float>()[40 + i], p2[i], 1e-6f * (1.f + std::abs(p2[i])))
        << i;
    EXPECT_NEAR(m.data<float>()[i], m2[i], 1e-6f * std::abs(m2[i]) + 1e-12f)
        << i;
    EXPECT_NEAR(v.data<float>()[i], v2[i], 1e-6f * std::abs(v2[i]) + 1e-15f)
        << i;
  }
  // Every element of the slice moved.
  for (int i = 0; i < 60; ++i)
    EXPECT_NE(p.data<float>()[40 + i], sliceBefore[i]) << i;
}

TEST(BackendState, WrongOperandsAreErrors) {
  std::unique_ptr<Backend> b = cpuBackend();
  ASSERT_TRUE(b);
  std::string error;
  Tensor x = ramp(10, 1.f), shorter = ramp(9, 1.f);
  Tensor ints(program::I32, {10});
  EXPECT_FALSE(b->stateAdd(x, shorter, error));
  EXPECT_EQ(error, "stateAdd: the tensors differ in size");
  EXPECT_FALSE(b->stateScale({&ints, 0, 10}, 2.f, error));
  EXPECT_EQ(error, "state operations take f32 tensors");
}

TEST(BackendState, BehindTheResidencyCheckTheyComputeOnTheDeviceCopy) {
  std::unique_ptr<Backend> b = createResidencyCheckingBackend(cpuBackend());
  EXPECT_TRUE(b->hasDeviceMemory());
  std::string error;
  Tensor x = ramp(64, 1.f), y = ramp(64, 3.f), loose = ramp(64, 1.f);
  std::vector<float> sum(64);
  for (int i = 0; i < 64; ++i)
    sum[i] = x.data<float>()[i] + y.data<float>()[i];
  b->keepResident(x);
  b->keepResident(y);
  // A tensor that is not resident has no device copy to compute in.
  EXPECT_FALSE(b->stateAdd(y, loose, error));
  EXPECT_EQ(error, "a state operation names a tensor that is not resident");
  // The sum is written on the device: the host copy is stale (NaN bytes)
  // until syncToHost.
  ASSERT_TRUE(b->stateAdd(y, x, error)) << error;
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  double squares = 0, expected = 0;
  for (float s : sum)
    expected += static_cast<double>(s) * s;
  ASSERT_TRUE(b->stateSumOfSquares({{&y, 0, 64}}, squares, error)) << error;
  EXPECT_DOUBLE_EQ(squares, expected);
  ASSERT_TRUE(b->syncToHost(error)) << error;
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(y.data<float>()[i], sum[i]) << i;
  // A host write handed over reaches the device copy.
  y.data<float>()[0] = 5.f;
  b->hostWrote(y);
  ASSERT_TRUE(b->stateSumOfSquares({{&y, 0, 1}}, squares, error)) << error;
  EXPECT_EQ(squares, 25.0);
}

} // namespace
