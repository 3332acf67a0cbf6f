//===- KernelsTest.cpp - CPU kernel accuracy --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

using namespace gptc::cpu;

/// The float tanh of the GELU kernels stays within 4e-7 (absolute; about 3
/// float ulp near +-1) of the library's over the whole range, saturation
/// included.
TEST(Kernels, FastTanhMatchesLibraryTanh) {
  double worst = 0;
  for (int i = -200000; i <= 200000; ++i) {
    float x = i * 1e-4f;
    worst = std::max(worst,
                     std::abs(double(tanhForGelu(x)) - std::tanh(double(x))));
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

/// The multi-tensor update, threaded over the concatenated elements,
/// equals the serial update of each tensor element for element, with a
/// weight decay per tensor, out of place and in place; tensors of one
/// element, of none and ones split between threads included.
TEST(Kernels, MultiAdamWEqualsSerialPerTensor) {
  setNumThreads(2);
  const std::vector<int64_t> sizes = {10007, 1, 0, 37, 4099};
  const std::vector<double> decays = {0.1, 0.0, 0.1, 0.0, 0.05};
  struct State {
    std::vector<float> p, g, m, v;
  };
  std::vector<State> state(sizes.size());
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int64_t i = 0; i < sizes[t]; ++i) {
      float x = static_cast<float>(i + 131 * t);
      state[t].p.push_back(std::sin(x * 0.1f));
      state[t].g.push_back(std::cos(x * 0.3f));
      state[t].m.push_back(0.01f * std::sin(x * 0.7f));
      state[t].v.push_back(0.02f + 0.01f * std::cos(x * 0.2f));
    }
  std::vector<State> serial(sizes.size()), multi(sizes.size());
  std::vector<State> inPlace = state;
  std::vector<AdamWTensor> tensors, inPlaceTensors;
  for (size_t t = 0; t < sizes.size(); ++t) {
    int64_t n = sizes[t];
    for (State *s : {&serial[t], &multi[t]}) {
      s->p.resize(n);
      s->m.resize(n);
      s->v.resize(n);
    }
    adamw(state[t].p.data(), state[t].g.data(), state[t].m.data(),
          state[t].v.data(), n, 1e-3, 4, 0.7, 0.9, 0.95, 1e-8, decays[t],
          serial[t].p.data(), serial[t].m.data(), serial[t].v.data());
    tensors.push_back({state[t].p.data(), state[t].g.data(), state[t].m.data(),
                       state[t].v.data(), multi[t].p.data(), multi[t].m.data(),
                       multi[t].v.data(), n, decays[t]});
    State &ip = inPlace[t];
    inPlaceTensors.push_back({ip.p.data(), ip.g.data(), ip.m.data(),
                              ip.v.data(), ip.p.data(), ip.m.data(),
                              ip.v.data(), n, decays[t]});
  }
  multiAdamW(tensors, 1e-3, 4, 0.7, 0.9, 0.95, 1e-8, /*minParallel=*/1);
  multiAdamW(inPlaceTensors, 1e-3, 4, 0.7, 0.9, 0.95, 1e-8,
             /*minParallel=*/1);
  for (size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_EQ(multi[t].p, serial[t].p) << "tensor " << t;
    EXPECT_EQ(multi[t].m, serial[t].m) << "tensor " << t;
    EXPECT_EQ(multi[t].v, serial[t].v) << "tensor " << t;
    EXPECT_EQ(inPlace[t].p, serial[t].p) << "tensor " << t;
    EXPECT_EQ(inPlace[t].m, serial[t].m) << "tensor " << t;
    EXPECT_EQ(inPlace[t].v, serial[t].v) << "tensor " << t;
  }
}

/// softmax(q k^T / sqrt(D)) v over the keys j <= t, by definition, in
/// double: the reference both attention paths must meet.
static std::vector<double> naiveAttention(const std::vector<double> &q,
                                          const std::vector<double> &k,
                                          const std::vector<double> &v,
                                          int64_t batch, int64_t seq,
                                          int64_t width, int64_t heads) {
  int64_t d = width / heads;
  std::vector<double> out(q.size()), w(seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < seq; ++t) {
        auto at = [&](int64_t row) { return (b * seq + row) * width + h * d; };
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          w[j] = 0;
          for (int64_t c = 0; c < d; ++c)
            w[j] += q[at(t) + c] * k[at(j) + c];
          w[j] /= std::sqrt(double(d));
          m = std::max(m, w[j]);
        }
        for (int64_t j = 0; j <= t; ++j)
          sum += w[j] = std::exp(w[j] - m);
        for (int64_t c = 0; c < d; ++c) {
          double x = 0;
          for (int64_t j = 0; j <= t; ++j)
            x += w[j] / sum * v[at(j) + c];
          out[at(t) + c] = x;
        }
      }
  return out;
}

/// Causal attention in float (the AVX-512 path where the CPU has it and
/// the head width is a multiple of 16, its backward in blocks of 64 query
/// rows, else the batched GEMM path) and in
/// double (the GEMM path, with query blocks from T = 128, ragged when T is
/// not a multiple of 32) meets the definition forward, and float meets
/// double backward, for head widths 16, 24, 32, 64 and 128.
TEST(Kernels, CausalAttentionFloatMatchesDouble) {
  struct Shape {
    int64_t batch, seq, width, heads;
  };
  for (Shape s :
       {Shape{2, 70, 64, 4}, Shape{1, 33, 64, 2}, Shape{3, 16, 128, 2},
        Shape{2, 130, 64, 2}, Shape{2, 129, 48, 2}, Shape{1, 160, 64, 1},
        Shape{1, 37, 128, 1}}) {
    int64_t n = s.batch * s.seq * s.width;
    std::vector<float> q(n), k(n), v(n), g(n), out(n), dq(n), dk(n), dv(n);
    std::vector<double> qd(n), kd(n), vd(n), gd(n), outd(n), dqd(n), dkd(n),
        dvd(n);
    uint32_t state = 12345;
    auto draw = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>((state >> 8) / double(1 << 24) * 4.0 - 2.0);
    };
    for (int64_t i = 0; i < n; ++i) {
      qd[i] = q[i] = draw();
      kd[i] = k[i] = draw();
      vd[i] = v[i] = draw();
      gd[i] = g[i] = draw();
    }
    // The kernels overwrite their results: garbage there must not leak in.
    for (auto *r : {&out, &dq, &dk, &dv})
      std::fill(r->begin(), r->end(), std::numeric_limits<float>::quiet_NaN());
    causalAttention(q.data(), k.data(), v.data(), s.batch, s.seq, s.width,
                    s.heads, out.data());
    causalAttention(qd.data(), kd.data(), vd.data(), s.batch, s.seq, s.width,
                    s.heads, outd.data());
    causalAttentionGrad(q.data(), k.data(), v.data(), g.data(), s.batch, s.seq,
                        s.width, s.heads, dq.data(), dk.data(), dv.data());
    causalAttentionGrad(qd.data(), kd.data(), vd.data(), gd.data(), s.batch,
                        s.seq, s.width, s.heads, dqd.data(), dkd.data(),
                        dvd.data());
    std::vector<double> ref =
        naiveAttention(qd, kd, vd, s.batch, s.seq, s.width, s.heads);
    // Worst errors that a NaN (a result the kernel left unwritten) makes
    // NaN, where std::max would skip it.
    auto worse = [](double &worst, double e) {
      if (!std::isnan(worst) && !(e <= worst))
        worst = e;
    };
    double worstRef = 0;
    for (int64_t i = 0; i < n; ++i) {
      worse(worstRef, std::abs(outd[i] - ref[i]));
      worse(worstRef, std::abs(out[i] - ref[i]) / 10);
    }
    EXPECT_LT(worstRef, 1e-6) << "B " << s.batch << " T " << s.seq << " C "
                              << s.width << " H " << s.heads;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (auto [f, d] : {std::pair{out[i], outd[i]}, std::pair{dq[i], dqd[i]},
                          std::pair{dk[i], dkd[i]}, std::pair{dv[i], dvd[i]}})
        worse(worst, std::abs(f - d) / (1.0 + std::abs(d)));
    EXPECT_LT(worst, 2e-5) << "B " << s.batch << " T " << s.seq << " C "
                           << s.width << " H " << s.heads;
  }
}

/// Attention from a subset of the positions (context parallelism: rank r
/// of P holds sequence chunks r and 2P-1-r) equals the rows of causal
/// attention over the whole sequence at those positions, forward and
/// backward (the whole sequence's gradient with the other rows' output
/// gradients zero), in double and in float, with query blocks (>= 128
/// rows) and without.
TEST(Kernels, PositionedAttentionEqualsCausalRows) {
  struct Shape {
    int64_t batch, seq, width, heads, ranks, rank;
  };
  // Head widths 16 and 32 run the AVX-512 kernels in float where the CPU
  // has them (blocks of 64 rows that straddle two chunks: T = 256, and
  // rows that do not: T = 512); width 24 the GEMM path.
  for (Shape s : {Shape{2, 16, 32, 2, 2, 0}, Shape{2, 16, 32, 2, 2, 1},
                  Shape{2, 32, 48, 2, 2, 1}, Shape{1, 256, 64, 4, 4, 2},
                  Shape{1, 24, 48, 3, 3, 1}, Shape{2, 256, 64, 4, 2, 1},
                  Shape{1, 512, 64, 2, 2, 0}}) {
    int64_t chunk = s.seq / (2 * s.ranks), rows = 2 * chunk;
    std::vector<int32_t> pos;
    for (int64_t c : {s.rank, 2 * s.ranks - 1 - s.rank})
      for (int64_t i = 0; i < chunk; ++i)
        pos.push_back(static_cast<int32_t>(c * chunk + i));
    int64_t n = s.batch * s.seq * s.width, m = s.batch * rows * s.width;
    uint32_t state = 777;
    auto draw = [&] {
      state = state * 1664525u + 1013904223u;
      return (state >> 8) / double(1 << 24) * 4.0 - 2.0;
    };
    std::vector<double> q(n), k(n), v(n), g(n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      q[i] = draw();
      k[i] = draw();
      v[i] = draw();
    }
    // The local queries and output gradients: the rows at `pos`.
    std::vector<double> ql(m), gl(m);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < s.width; ++c) {
          int64_t whole = (b * s.seq + pos[i]) * s.width + c;
          int64_t local = (b * rows + i) * s.width + c;
          ql[local] = q[whole];
          gl[local] = g[whole] = draw();
        }
    std::vector<double> out(n), dq(n), dk(n), dv(n);
    causalAttention(q.data(), k.data(), v.data(), s.batch, s.seq, s.width,
                    s.heads, out.data());
    causalAttentionGrad(q.data(), k.data(), v.data(), g.data(), s.batch, s.seq,
                        s.width, s.heads, dq.data(), dk.data(), dv.data());
    std::vector<double> outl(m), dql(m), dkl(n, 1e9), dvl(n, 1e9);
    positionedAttention(ql.data(), k.data(), v.data(), pos.data(), s.batch,
                        rows, s.seq, s.width, s.heads, outl.data());
    positionedAttentionGrad(ql.data(), k.data(), v.data(), gl.data(),
                            pos.data(), s.batch, rows, s.seq, s.width, s.heads,
                            dql.data(), dkl.data(), dvl.data());
    // The same in float.
    auto narrow = [](const std::vector<double> &x) {
      return std::vector<float>(x.begin(), x.end());
    };
    std::vector<float> qf = narrow(ql), kf = narrow(k), vf = narrow(v),
                       gf = narrow(gl), outf(m), dqf(m), dkf(n), dvf(n);
    positionedAttention(qf.data(), kf.data(), vf.data(), pos.data(), s.batch,
                        rows, s.seq, s.width, s.heads, outf.data());
    positionedAttentionGrad(qf.data(), kf.data(), vf.data(), gf.data(),
                            pos.data(), s.batch, rows, s.seq, s.width, s.heads,
                            dqf.data(), dkf.data(), dvf.data());
    double worst = 0, worstFloat = 0;
    auto check = [&](double got, float single, double want) {
      double e = std::abs(got - want) / (1.0 + std::abs(want));
      double ef = std::abs(single - want) / (1.0 + std::abs(want));
      worst = std::isnan(e) ? e : std::max(worst, e);
      worstFloat = std::isnan(ef) ? ef : std::max(worstFloat, ef);
    };
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < s.width; ++c) {
          int64_t whole = (b * s.seq + pos[i]) * s.width + c;
          int64_t local = (b * rows + i) * s.width + c;
          check(outl[local], outf[local], out[whole]);
          check(dql[local], dqf[local], dq[whole]);
        }
    for (int64_t i = 0; i < n; ++i) {
      check(dkl[i], dkf[i], dk[i]);
      check(dvl[i], dvf[i], dv[i]);
    }
    EXPECT_LT(worst, 1e-12)
        << "T " << s.seq << " P " << s.ranks << " rank " << s.rank;
    EXPECT_LT(worstFloat, 2e-5)
        << "T " << s.seq << " P " << s.ranks << " rank " << s.rank;
  }
}

/// Ring attention's math: rank r of P attends each rank's block of keys
/// and values (chunks s and 2P-1-s, at their positions) with
/// blockAttention, merges the P results with attentionMerge in ring order,
/// and gets positioned attention over the whole sequence; the merges' and
/// blocks' gradients, chained backward from the output's gradient (the
/// final log-sum-exp's gradient zero) and scattered to the blocks'
/// positions, give its gradients. In double (to 1e-12) and float, for
/// every rank of P = 2 and 3, with query blocks of 32 rows (T >= 128) and
/// without.
TEST(Kernels, RingBlocksMergeToPositionedAttention) {
  struct Shape {
    int64_t batch, seq, width, heads, ranks;
  };
  for (Shape s : {Shape{2, 16, 32, 2, 2}, Shape{1, 24, 48, 3, 3},
                  Shape{1, 256, 64, 4, 2}}) {
    int64_t chunk = s.seq / (2 * s.ranks), rows = 2 * chunk;
    int64_t n = s.batch * s.seq * s.width, m = s.batch * rows * s.width;
    int64_t lseN = s.batch * rows * s.heads;
    auto positionsOf = [&](int64_t rank) {
      std::vector<int32_t> pos;
      for (int64_t c : {rank, 2 * s.ranks - 1 - rank})
        for (int64_t i = 0; i < chunk; ++i)
          pos.push_back(static_cast<int32_t>(c * chunk + i));
      return pos;
    };
    // Rows of x (B x seq x C) at `pos`, and their scatter back.
    auto gatherRows = [&](const std::vector<double> &x,
                          const std::vector<int32_t> &pos) {
      std::vector<double> y(m);
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t c = 0; c < s.width; ++c)
            y[(b * rows + i) * s.width + c] =
                x[(b * s.seq + pos[i]) * s.width + c];
      return y;
    };
    uint32_t state = 4242;
    auto draw = [&] {
      state = state * 1664525u + 1013904223u;
      return (state >> 8) / double(1 << 24) * 4.0 - 2.0;
    };
    std::vector<double> k(n), v(n);
    for (int64_t i = 0; i < n; ++i) {
      k[i] = draw();
      v[i] = draw();
    }
    for (int64_t rank = 0; rank < s.ranks; ++rank) {
      std::vector<int32_t> pos = positionsOf(rank);
      std::vector<double> q(m), g(m);
      for (int64_t i = 0; i < m; ++i) {
        q[i] = draw();
        g[i] = draw();
      }
      // The reference: positioned attention against the whole sequence.
      std::vector<double> ref(m), rdq(m), rdk(n), rdv(n);
      positionedAttention(q.data(), k.data(), v.data(), pos.data(), s.batch,
                          rows, s.seq, s.width, s.heads, ref.data());
      positionedAttentionGrad(q.data(), k.data(), v.data(), g.data(),
                              pos.data(), s.batch, rows, s.seq, s.width,
                              s.heads, rdq.data(), rdk.data(), rdv.data());
      // The ring in T: blocks from ranks r, r-1, ..., merged in order.
      auto ring = [&](auto zero, double &worst) {
        using T = decltype(zero);
        auto to = [](const std::vector<double> &x) {
          return std::vector<T>(x.begin(), x.end());
        };
        std::vector<T> qt = to(q), gt = to(g);
        std::vector<std::vector<int32_t>> kpos;
        std::vector<std::vector<T>> kb, vb, out, lse, mergedOut, mergedLse;
        for (int64_t step = 0; step < s.ranks; ++step) {
          int64_t from = (rank - step + s.ranks) % s.ranks;
          kpos.push_back(positionsOf(from));
          kb.push_back(to(gatherRows(k, kpos.back())));
          vb.push_back(to(gatherRows(v, kpos.back())));
          out.emplace_back(m);
          lse.emplace_back(lseN);
          blockAttention(qt.data(), kb.back().data(), vb.back().data(),
                         pos.data(), kpos.back().data(), s.batch, rows, rows,
                         s.width, s.heads, out.back().data(),
                         lse.back().data());
          if (step == 0) {
            mergedOut.push_back(out.back());
            mergedLse.push_back(lse.back());
            continue;
          }
          std::vector<T> o(m), l(lseN);
          attentionMerge(mergedOut.back().data(), mergedLse.back().data(),
                         out.back().data(), lse.back().data(), s.batch * rows,
                         s.width, s.heads, o.data(), l.data());
          mergedOut.push_back(o);
          mergedLse.push_back(l);
        }
        // Backward: through the merges from the last, then each block.
        std::vector<T> dOut = gt, dLse(lseN, T(0));
        std::vector<std::vector<T>> blockOut(s.ranks), blockLse(s.ranks);
        for (int64_t step = s.ranks - 1; step >= 1; --step) {
          std::vector<T> da(m), dla(lseN), db(m), dlb(lseN);
          attentionMergeGrad(mergedOut[step - 1].data(),
                             mergedLse[step - 1].data(), out[step].data(),
                             lse[step].data(), dOut.data(), dLse.data(),
                             s.batch * rows, s.width, s.heads, da.data(),
                             dla.data(), db.data(), dlb.data());
          blockOut[step] = db;
          blockLse[step] = dlb;
          dOut = da;
          dLse = dla;
        }
        blockOut[0] = dOut;
        blockLse[0] = dLse;
        std::vector<double> dq(m, 0.0), dk(n, 0.0), dv(n, 0.0);
        for (int64_t step = 0; step < s.ranks; ++step) {
          std::vector<T> bq(m), bk(m), bv(m);
          blockAttentionGrad(qt.data(), kb[step].data(), vb[step].data(),
                             pos.data(), kpos[step].data(),
                             blockOut[step].data(), blockLse[step].data(),
                             s.batch, rows, rows, s.width, s.heads, bq.data(),
                             bk.data(), bv.data());
          for (int64_t i = 0; i < m; ++i)
            dq[i] += bq[i];
          for (int64_t b = 0; b < s.batch; ++b)
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t c = 0; c < s.width; ++c) {
                int64_t whole = (b * s.seq + kpos[step][i]) * s.width + c;
                dk[whole] += bk[(b * rows + i) * s.width + c];
                dv[whole] += bv[(b * rows + i) * s.width + c];
              }
        }
        auto check = [&](double got, double want) {
          double e = std::abs(got - want) / (1.0 + std::abs(want));
          worst = std::isnan(e) ? e : std::max(worst, e);
        };
        for (int64_t i = 0; i < m; ++i) {
          check(mergedOut.back()[i], ref[i]);
          check(dq[i], rdq[i]);
        }
        for (int64_t i = 0; i < n; ++i) {
          check(dk[i], rdk[i]);
          check(dv[i], rdv[i]);
        }
      };
      double worst = 0, worstFloat = 0;
      ring(double(0), worst);
      ring(float(0), worstFloat);
      EXPECT_LT(worst, 1e-12)
          << "T " << s.seq << " P " << s.ranks << " rank " << rank;
      EXPECT_LT(worstFloat, 2e-5)
          << "T " << s.seq << " P " << s.ranks << " rank " << rank;
    }
  }
}

/// A query that sees none of a block's keys gets a zero row and lse -inf,
/// and the merge of such a block leaves the other block's result as it is.
TEST(Kernels, RingBlockUnseenRowsAreEmpty) {
  // 2 queries at positions 0 and 5 against keys at 3 and 4: the first sees
  // none, the second both.
  std::vector<float> q = {1, 0, 0, 1}, kv = {1, 2, 3, 4}, out(4), lse(2);
  std::vector<int32_t> qpos = {0, 5}, kpos = {3, 4};
  blockAttention(q.data(), kv.data(), kv.data(), qpos.data(), kpos.data(), 1, 2,
                 2, 2, 1, out.data(), lse.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
  EXPECT_TRUE(std::isfinite(lse[1]));
  std::vector<float> other = {5, 6, 7, 8}, otherLse = {0.5f, 0.25f}, o(4), l(2);
  attentionMerge(out.data(), lse.data(), other.data(), otherLse.data(), 2, 2, 1,
                 o.data(), l.data());
  EXPECT_FLOAT_EQ(o[0], 5.0f);
  EXPECT_FLOAT_EQ(o[1], 6.0f);
  EXPECT_FLOAT_EQ(l[0], 0.5f);
}

/// The float cross-entropy (its rows on AVX-512 where the CPU has it)
/// agrees with the double one, loss and gradient, for vocabularies that do
/// and do not fill 16-lane vectors, with an ignored row.
TEST(Kernels, CrossEntropyFloatMatchesDouble) {
  for (int64_t vocab : {16, 37, 1000, 50257}) {
    int64_t rows = 5;
    std::vector<float> logits(rows * vocab), grad(rows * vocab);
    std::vector<double> logitsD(rows * vocab), gradD(rows * vocab);
    uint32_t state = 777;
    for (int64_t i = 0; i < rows * vocab; ++i) {
      state = state * 1664525u + 1013904223u;
      logitsD[i] = logits[i] =
          static_cast<float>((state >> 8) / double(1 << 24) * 20.0 - 10.0);
    }
    std::vector<int32_t> labels = {0, int32_t(vocab - 1), -1,
                                   int32_t(vocab / 2), 3 % int32_t(vocab)};
    int64_t bad = 0;
    float loss = crossEntropy(logits.data(), labels.data(), rows, vocab, true,
                              -1, 0.0, bad);
    double lossD = crossEntropy(logitsD.data(), labels.data(), rows, vocab,
                                true, -1, 0.0, bad);
    // A float sum over 50257 exponentials: its rounding grows like
    // sqrt(V) ulps in the worst order (2.4e-6 seen from the clang sanitizer
    // build on an AVX2 CPU, whose loops vectorize differently).
    EXPECT_NEAR(loss, lossD, 1e-5 * std::abs(lossD)) << vocab;
    crossEntropyGrad(logits.data(), labels.data(), 1.0f, rows, vocab, true, -1,
                     0.0, grad.data());
    crossEntropyGrad(logitsD.data(), labels.data(), 1.0, rows, vocab, true, -1,
                     0.0, gradD.data());
    double worst = 0;
    for (int64_t i = 0; i < rows * vocab; ++i)
      worst = std::max(worst, std::abs(grad[i] - gradD[i]));
    EXPECT_LT(worst, 1e-6) << vocab;
  }
}
