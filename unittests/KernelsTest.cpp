//===- KernelsTest.cpp - CPU kernel accuracy --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gptc::cpu;

/// The float tanh of the GELU kernels stays within 4e-7 (absolute; about 3
/// float ulp near +-1) of the library's over the whole range, saturation
/// included.
TEST(Kernels, FastTanhMatchesLibraryTanh) {
  double worst = 0;
  for (int i = -200000; i <= 200000; ++i) {
    float x = i * 1e-4f;
    worst = std::max(worst, std::abs(double(tanhForGelu(x)) - std::tanh(double(x))));
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(tanhForGelu(100.0f), tanhForGelu(7.9053111f));
  EXPECT_NEAR(tanhForGelu(-100.0f), -1.0f, 1e-6);
}

/// GELU in float agrees with the double computation to float rounding.
TEST(Kernels, GeluFloatMatchesDouble) {
  std::vector<float> xf(2001), yf(2001);
  std::vector<double> xd(2001), yd(2001);
  for (int i = 0; i < 2001; ++i)
    xd[i] = xf[i] = (i - 1000) * 0.01f;
  gelu(xf.data(), 2001, yf.data());
  gelu(xd.data(), 2001, yd.data());
  for (int i = 0; i < 2001; ++i)
    EXPECT_NEAR(yf[i], yd[i], 1e-6 * std::max(1.0, std::abs(yd[i]))) << xd[i];
}

/// AdamW on one element, against the formula written out.
TEST(Kernels, AdamWFollowsPyTorch) {
  float p = 1.0f, g = 0.5f, m = 0.1f, v = 0.2f, np, nm, nv;
  adamw(&p, &g, &m, &v, 1, /*lr=*/0.01, /*step=*/2, /*scale=*/0.5, 0.9, 0.95,
        1e-8, /*weightDecay=*/0.1, &np, &nm, &nv);
  double grad = 0.25, em = 0.1 + 0.1 * (grad - 0.1);
  double ev = 0.2 * 0.95 + 0.05 * grad * grad;
  double bc1 = 1 - std::pow(0.9, 3), bc2 = 1 - std::pow(0.95, 3);
  double ep = 1.0 * (1 - 0.01 * 0.1) -
              0.01 / bc1 * em / (std::sqrt(ev) / std::sqrt(bc2) + 1e-8);
  EXPECT_NEAR(nm, em, 1e-7);
  EXPECT_NEAR(nv, ev, 1e-7);
  EXPECT_NEAR(np, ep, 1e-6);
}

/// The float exp of the softmax kernels stays within 2 ulp (relative 2.4e-7)
/// of the library's over the range softmax uses (x - max <= 0) and beyond.
TEST(Kernels, FastExpMatchesLibraryExp) {
  double worst = 0;
  for (int i = -870000; i <= 880000; ++i) {
    float x = i * 1e-4f;
    double ref = std::exp(double(x));
    worst = std::max(worst, std::abs(double(expForSoftmax(x)) - ref) / ref);
  }
  EXPECT_LT(worst, 2.4e-7);
  EXPECT_EQ(expForSoftmax(-1000.0f), 0.0f);
  EXPECT_EQ(expForSoftmax(0.0f), 1.0f);
}

/// The threaded update equals the serial one, element for element.
TEST(Kernels, AdamWParallelEqualsSerial) {
  const int64_t n = 10007;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::sin(i * 0.1f);
    g[i] = std::cos(i * 0.3f);
    m[i] = 0.01f * std::sin(i * 0.7f);
    v[i] = 0.02f + 0.01f * std::cos(i * 0.2f);
  }
  std::vector<float> a(n), am(n), av(n), b(n), bm(n), bv(n);
  adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-3, 4, 0.7, 0.9, 0.95,
        1e-8, 0.1, a.data(), am.data(), av.data());
  adamwParallel(p.data(), g.data(), m.data(), v.data(), n, 1e-3, 4, 0.7, 0.9,
                0.95, 1e-8, 0.1, b.data(), bm.data(), bv.data(),
                /*minParallel=*/1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(am, bm);
  EXPECT_EQ(av, bv);
}
