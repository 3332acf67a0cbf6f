//===- Avx512.cpp - The runtime's AVX-512 kernels ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The rest of the runtime is built for baseline x86-64 (4-wide vectors);
// these kernels, where 16-wide vectors and a vectorized exp matter most,
// carry their own target attribute and run where the CPU has AVX-512.
//
// Cross-entropy rows: log-sum-exp and the scaled softmax of a row of
// logits, 16 lanes at a time with a masked tail.
//
// Causal attention for float heads of width D (16, 32, 64 or 128) on CPUs
// with AVX-512, one (batch element, head) at a time, the way
// flash attention tiles a GPU: the head's keys and values are transposed
// into L1-sized buffers once, and each query row computes its scores
// (16 keys per vector), its causal softmax and its output without the
// scores leaving the cache. Only the keys a row sees are touched. The
// backward pass works a block of 64 query rows at a time: it recomputes
// the block's probabilities and score gradients (64 x T per thread, never
// T x T) and adds the block's share of dK and dV a key at a time. The rest of
// the runtime is built for the baseline x86-64, so these functions carry their
// own target attribute and the caller checks the CPU first (Kernels.cpp falls
// back to the batched GEMM path elsewhere).
//
//===----------------------------------------------------------------------===//

#include "Avx512.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's AVX-512 headers trip its own uninitialized-value warnings
// (_mm512_undefined_ps); the code here is not at fault.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define GPTC_HAVE_AVX512_PATH 1
#define GPTC_AVX512 __attribute__((target("avx512f,avx512dq,fma")))
#endif

namespace gptc::cpu {

#ifdef GPTC_HAVE_AVX512_PATH

bool avx512Available() {
  static const bool available =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return available;
}

namespace {

/// exp(x) for 16 lanes: the Cephes polynomial of the runtime's scalar
/// fastExp, with the power of two applied by scalef; 0 below -87.
GPTC_AVX512 inline __m512 exp16(__m512 x) {
  __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  __m512 n = _mm512_roundscale_ps(
      _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r,
                      _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(~tiny, p, n);
}

/// The mask of the lanes of key block `jb` (keys 16 jb ..) that row t sees.
GPTC_AVX512 inline __mmask16 visible(int64_t jb, int64_t t) {
  int64_t last = t - 16 * jb; // the last visible lane
  return last >= 15 ? __mmask16(0xffff) : __mmask16((1u << (last + 1)) - 1);
}

/// One head's view: rows of D floats with row stride `stride`; `seq` keys
/// and `queries` query rows, query row t attending the keys up to
/// limit(t): t itself, or its position in the sequence when the queries
/// are part of it (context parallelism).
struct Head {
  int64_t seq, d, stride;
  float scale;
  int64_t queries;
  const int32_t *pos = nullptr;
  /// Ring attention's steps: row t's log-sum-exp (of its scaled scores) is
  /// written to lse[t * lseStride] in the forward, and its gradient read
  /// from dlse[t * lseStride] in the backward. A row whose limit is -1
  /// sees no key: a zero output and lse -inf.
  float *lse = nullptr;
  const float *dlse = nullptr;
  int64_t lseStride = 0;
  int64_t limit(int64_t t) const { return pos ? pos[t] : t; }
  /// The largest limit of rows [t0, t1).
  int64_t lastLimit(int64_t t0, int64_t t1) const {
    int64_t last = 0;
    for (int64_t t = t0; t < t1; ++t)
      last = std::max(last, limit(t));
    return last;
  }
  /// The first row of [t0, t1) that sees key j (rows before it do not;
  /// rows after it may not either where positions are not consecutive:
  /// their weights are zero).
  int64_t firstSeeing(int64_t j, int64_t t0, int64_t t1) const {
    if (!pos)
      return std::max(j, t0);
    if (pos[t1 - 1] - pos[t0] != t1 - 1 - t0)
      return t0;
    return std::min(t1, t0 + std::max<int64_t>(0, j - pos[t0]));
  }
};

/// [T][D] (row stride `stride`) -> [D][Tp], Tp = T rounded up to 16, the
/// padding zero.
GPTC_AVX512 void transpose(const float *x, const Head &h, int64_t tp,
                           float *xt) {
  for (int64_t dd = 0; dd < h.d; ++dd) {
    float *row = xt + dd * tp;
    for (int64_t j = 0; j < h.seq; ++j)
      row[j] = x[j * h.stride + dd];
    std::fill(row + h.seq, row + tp, 0.0f);
  }
}

/// out[16 jb + l] = sum_d x[d] xt[d][16 jb + l] for the key blocks jb <
/// blocks (xt is [D][Tp]): a row of scores. Four blocks at a time, so that
/// four FMA chains are in flight instead of one waiting on the last.
GPTC_AVX512 void scoreRow(const float *x, const float *xt, int64_t tp,
                          int64_t d, int64_t blocks, float *out) {
  int64_t jb = 0;
  for (; jb + 4 <= blocks; jb += 4) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *col = xt + 16 * jb;
    for (int64_t dd = 0; dd < d; ++dd) {
      __m512 w = _mm512_set1_ps(x[dd]);
      const float *row = col + dd * tp;
      a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row), a0);
      a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 16), a1);
      a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 32), a2);
      a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 48), a3);
    }
    _mm512_storeu_ps(out + 16 * jb, a0);
    _mm512_storeu_ps(out + 16 * jb + 16, a1);
    _mm512_storeu_ps(out + 16 * jb + 32, a2);
    _mm512_storeu_ps(out + 16 * jb + 48, a3);
  }
  for (; jb < blocks; ++jb) {
    // The rest: the D sum split over two chains.
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    const float *col = xt + 16 * jb;
    int64_t dd = 0;
    for (; dd + 2 <= d; dd += 2) {
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[dd]),
                           _mm512_loadu_ps(col + dd * tp), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(x[dd + 1]),
                           _mm512_loadu_ps(col + (dd + 1) * tp), a1);
    }
    for (; dd < d; ++dd)
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[dd]),
                           _mm512_loadu_ps(col + dd * tp), a0);
    _mm512_storeu_ps(out + 16 * jb, _mm512_add_ps(a0, a1));
  }
}

/// Row t's scores (p, at least t / 16 + 1 blocks) into its causal
/// probabilities in place: softmax(scale * s_j) over j <= t, zero after t
/// within those blocks. Returns the log-sum-exp of the scaled scores; a
/// row that sees no key (t = -1) gets zeros and -inf.
GPTC_AVX512 float softmaxRow(const Head &h, int64_t t, float *p) {
  if (t < 0) {
    _mm512_storeu_ps(p, _mm512_setzero_ps());
    return -INFINITY;
  }
  int64_t blocks = t / 16 + 1;
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int64_t jb = 0; jb < blocks; ++jb) {
    __m512 acc =
        _mm512_mul_ps(_mm512_loadu_ps(p + 16 * jb), _mm512_set1_ps(h.scale));
    acc = _mm512_mask_blend_ps(visible(jb, t), _mm512_set1_ps(-INFINITY), acc);
    _mm512_storeu_ps(p + 16 * jb, acc);
    m = _mm512_max_ps(m, acc);
  }
  __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t jb = 0; jb < blocks; ++jb) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p + 16 * jb), mx));
    e = _mm512_maskz_mov_ps(visible(jb, t), e);
    _mm512_storeu_ps(p + 16 * jb, e);
    sum = _mm512_add_ps(sum, e);
  }
  float total = _mm512_reduce_add_ps(sum);
  __m512 inv = _mm512_set1_ps(1.0f / total);
  for (int64_t jb = 0; jb < blocks; ++jb)
    _mm512_storeu_ps(p + 16 * jb,
                     _mm512_mul_ps(_mm512_loadu_ps(p + 16 * jb), inv));
  return _mm512_reduce_max_ps(mx) + std::log(total);
}

/// Row t's causal probabilities into p (16 * blocks lanes, zero after t):
/// softmax(scale * q_t . k_j) over j <= t. kt is [D][Tp]. Returns the
/// log-sum-exp.
GPTC_AVX512 float probabilities(const float *qt, const float *kt, int64_t tp,
                                const Head &h, int64_t t, float *p) {
  scoreRow(qt, kt, tp, h.d, t / 16 + 1, p);
  return softmaxRow(h, t, p);
}

/// Four rows at once (x rows t..t+3, stride `stride`; out rows of tp): the
/// scores of the first `blocks` key blocks. Each key vector loaded serves
/// the four rows.
GPTC_AVX512 void scoreRows4(const float *x, int64_t stride, const float *xt,
                            int64_t tp, int64_t d, int64_t blocks, float *out) {
  const float *x0 = x, *x1 = x + stride, *x2 = x1 + stride, *x3 = x2 + stride;
  for (int64_t jb = 0; jb < blocks; ++jb) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *col = xt + 16 * jb;
    for (int64_t dd = 0; dd < d; ++dd) {
      __m512 kv = _mm512_loadu_ps(col + dd * tp);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(x0[dd]), kv, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(x1[dd]), kv, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(x2[dd]), kv, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(x3[dd]), kv, a3);
    }
    _mm512_storeu_ps(out + 16 * jb, a0);
    _mm512_storeu_ps(out + tp + 16 * jb, a1);
    _mm512_storeu_ps(out + 2 * tp + 16 * jb, a2);
    _mm512_storeu_ps(out + 3 * tp + 16 * jb, a3);
  }
}

/// out rows r < R (stride) = sum_{i in [begin, end)} weight(r, i) x_i (plus
/// what out holds, with addToOut) for
/// rows x_i of D = 16 V floats (stride): the weighted sums of attention's
/// outputs and gradients. Each x row loaded serves the R rows; one row
/// splits its sum over even and odd i, so that two FMA chains are in
/// flight. V and R are template arguments so that the accumulators stay in
/// registers.
template <int V, int R, typename Weight>
GPTC_AVX512 inline void
accumulateRows(const float *x, const Head &h, int64_t begin, int64_t end,
               Weight weight, float *out, bool addToOut = false) {
  constexpr int kSets = R == 1 ? 2 : R;
  __m512 acc[kSets][V];
  for (int r = 0; r < kSets; ++r)
    for (int c = 0; c < V; ++c)
      acc[r][c] = addToOut && r < R
                      ? _mm512_loadu_ps(out + r * h.stride + 16 * c)
                      : _mm512_setzero_ps();
  int64_t i = begin;
  if constexpr (R == 1) {
    for (; i + 2 <= end; i += 2) {
      __m512 w0 = _mm512_set1_ps(weight(0, i)),
             w1 = _mm512_set1_ps(weight(0, i + 1));
      const float *r0 = x + i * h.stride, *r1 = r0 + h.stride;
      for (int c = 0; c < V; ++c) {
        acc[0][c] =
            _mm512_fmadd_ps(w0, _mm512_loadu_ps(r0 + 16 * c), acc[0][c]);
        acc[1][c] =
            _mm512_fmadd_ps(w1, _mm512_loadu_ps(r1 + 16 * c), acc[1][c]);
      }
    }
    for (int c = 0; c < V; ++c)
      acc[0][c] = _mm512_add_ps(acc[0][c], acc[1][c]);
  }
  for (; i < end; ++i) {
    const float *row = x + i * h.stride;
    __m512 w[R];
    for (int r = 0; r < R; ++r)
      w[r] = _mm512_set1_ps(weight(r, i));
    for (int c = 0; c < V; ++c) {
      __m512 xv = _mm512_loadu_ps(row + 16 * c);
      for (int r = 0; r < R; ++r)
        acc[r][c] = _mm512_fmadd_ps(w[r], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c)
      _mm512_storeu_ps(out + r * h.stride + 16 * c, acc[r][c]);
}

/// out_t = sum_{j <= last} p[j] x_j (p one row) ...
template <int V>
GPTC_AVX512 void weightedRows(const float *p, const float *x, const Head &h,
                              int64_t last, float *out) {
  accumulateRows<V, 1>(
      x, h, 0, last + 1, [p](int, int64_t j) { return p[j]; }, out);
}

/// ... and for four rows r of p (row stride tp; zero where a row does not
/// see j).
template <int V>
GPTC_AVX512 void weightedRows4(const float *p, int64_t tp, const float *x,
                               const Head &h, int64_t last, float *out) {
  accumulateRows<V, 4>(
      x, h, 0, last + 1, [p, tp](int r, int64_t j) { return p[r * tp + j]; },
      out);
}

/// out += sum_{t in [first row seeing j, t1)} w[t - t0][j + r] x_t for
/// column j (R = 1) or columns j..j+3 (R = 4) of w, the rows t0..t1 of a
/// [T][Tp] matrix (zero where a row does not see a key).
template <int V, int R>
GPTC_AVX512 void columnRows(const float *w, int64_t tp, int64_t t0, int64_t t1,
                            const float *x, const Head &h, int64_t j,
                            float *out) {
  accumulateRows<V, R>(
      x, h, h.firstSeeing(j, t0, t1), t1,
      [w, tp, j, t0](int r, int64_t t) { return w[(t - t0) * tp + j + r]; },
      out, /*addToOut=*/true);
}

/// The forward pass of one head: four query rows at a time (while V <= 4
/// keeps their accumulators in registers), then row by row.
template <int V>
GPTC_AVX512 void forwardHead(const float *q, const float *k, const float *v,
                             const Head &h, float *out,
                             std::vector<float> &scratch) {
  int64_t tp = (h.seq + 15) / 16 * 16;
  scratch.assign(h.d * tp + 4 * tp, 0.0f);
  float *kt = scratch.data(), *p = kt + h.d * tp;
  transpose(k, h, tp, kt);
  int64_t t = 0;
  if constexpr (V <= 4)
    for (; t + 4 <= h.queries; t += 4) {
      // Rows t..t+3 see the keys up to the last of their limits: one set
      // of blocks for all.
      int64_t last = h.lastLimit(t, t + 4);
      int64_t blocks = last / 16 + 1;
      scoreRows4(q + t * h.stride, h.stride, kt, tp, h.d, blocks, p);
      for (int r = 0; r < 4; ++r) {
        // Lanes past a row's own last block (but within the group's) must
        // weigh nothing: softmaxRow masks only its own blocks.
        int64_t own = std::max<int64_t>(h.limit(t + r), 0) / 16 + 1;
        std::fill(p + r * tp + 16 * own, p + r * tp + 16 * blocks, 0.0f);
        float lse = softmaxRow(h, h.limit(t + r), p + r * tp);
        if (h.lse)
          h.lse[(t + r) * h.lseStride] = lse;
      }
      weightedRows4<V>(p, tp, v, h, last, out + t * h.stride);
    }
  for (; t < h.queries; ++t) {
    float lse = probabilities(q + t * h.stride, kt, tp, h, h.limit(t), p);
    if (h.lse)
      h.lse[t * h.lseStride] = lse;
    weightedRows<V>(p, v, h, h.limit(t), out + t * h.stride);
  }
}

/// Row t's score gradients in place: ds = p (ds - sum_j p ds + dlse_t)
/// scale over `blocks` blocks (p is zero where the row does not see the
/// key; dlse_t the gradient of its log-sum-exp, for ring attention).
GPTC_AVX512 void scoreGradRow(const Head &h, int64_t t, const float *p,
                              int64_t blocks, float *ds) {
  __m512 dot = _mm512_setzero_ps();
  for (int64_t jb = 0; jb < blocks; ++jb)
    dot = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16 * jb),
                          _mm512_loadu_ps(ds + 16 * jb), dot);
  float shift = h.dlse ? h.dlse[t * h.lseStride] : 0.0f;
  __m512 rowDot = _mm512_set1_ps(_mm512_reduce_add_ps(dot) - shift);
  for (int64_t jb = 0; jb < blocks; ++jb) {
    __m512 pj = _mm512_loadu_ps(p + 16 * jb);
    __m512 g = _mm512_mul_ps(
        _mm512_mul_ps(pj, _mm512_sub_ps(_mm512_loadu_ps(ds + 16 * jb), rowDot)),
        _mm512_set1_ps(h.scale));
    _mm512_storeu_ps(ds + 16 * jb, g);
  }
}

/// The backward pass of one head: dQ, dK, dV (rows of stride `stride`),
/// flash-style, a block of kAttentionBlockRows query rows at a time. For each
/// block, pass 1 recomputes each row's probabilities P and score gradients dS
/// and gives dQ; pass 2 adds the block's share to dK and dV a key at a time
/// (dK_j += sum_t dS[t][j] q_t, dV_j += sum_t P[t][j] dO_t over the block's
/// rows t), in registers rather than by read-modify-writes per query.
template <int V>
GPTC_AVX512 void backwardHead(const float *q, const float *k, const float *v,
                              const float *dout, const Head &h, float *dq,
                              float *dk, float *dv,
                              std::vector<float> &scratch) {
  int64_t tp = (h.seq + 15) / 16 * 16;
  int64_t rows = std::min(kAttentionBlockRows, h.queries);
  scratch.assign(2 * h.d * tp + 2 * rows * tp, 0.0f);
  float *kt = scratch.data(), *vt = kt + h.d * tp, *pm = vt + h.d * tp,
        *dsm = pm + rows * tp;
  transpose(k, h, tp, kt);
  transpose(v, h, tp, vt);
  for (int64_t j = 0; j < h.seq; ++j) {
    std::fill(dk + j * h.stride, dk + j * h.stride + h.d, 0.0f);
    std::fill(dv + j * h.stride, dv + j * h.stride + h.d, 0.0f);
  }
  for (int64_t t0 = 0; t0 < h.queries; t0 += kAttentionBlockRows) {
    int64_t t1 = std::min(t0 + kAttentionBlockRows, h.queries);
    // The block's rows see the keys up to `seen`: P and dS start zero
    // there, so what a row does not see weighs nothing in pass 2.
    int64_t seen = h.lastLimit(t0, t1) + 1;
    int64_t width = ((seen - 1) / 16 + 1) * 16;
    for (int64_t r = 0; r < t1 - t0; ++r) {
      std::fill(pm + r * tp, pm + r * tp + width, 0.0f);
      std::fill(dsm + r * tp, dsm + r * tp + width, 0.0f);
    }
    int64_t t = t0;
    if constexpr (V <= 4)
      for (; t + 4 <= t1; t += 4) {
        int64_t last = h.lastLimit(t, t + 4);
        int64_t blocks = last / 16 + 1;
        float *p = pm + (t - t0) * tp, *ds = dsm + (t - t0) * tp;
        scoreRows4(q + t * h.stride, h.stride, kt, tp, h.d, blocks, p);
        for (int r = 0; r < 4; ++r) {
          int64_t own = std::max<int64_t>(h.limit(t + r), 0) / 16 + 1;
          std::fill(p + r * tp + 16 * own, p + r * tp + 16 * blocks, 0.0f);
          softmaxRow(h, h.limit(t + r), p + r * tp);
        }
        // dP = dO_t . v_j, then dS; dQ_t = sum_j dS_j k_j.
        scoreRows4(dout + t * h.stride, h.stride, vt, tp, h.d, blocks, ds);
        for (int r = 0; r < 4; ++r)
          scoreGradRow(h, t + r, p + r * tp, blocks, ds + r * tp);
        weightedRows4<V>(ds, tp, k, h, last, dq + t * h.stride);
      }
    for (; t < t1; ++t) {
      float *p = pm + (t - t0) * tp, *ds = dsm + (t - t0) * tp;
      int64_t blocks = std::max<int64_t>(h.limit(t), 0) / 16 + 1;
      probabilities(q + t * h.stride, kt, tp, h, h.limit(t), p);
      scoreRow(dout + t * h.stride, vt, tp, h.d, blocks, ds);
      scoreGradRow(h, t, p, blocks, ds);
      weightedRows<V>(ds, k, h, h.limit(t), dq + t * h.stride);
    }
    // Pass 2: the block's share of dK_j and dV_j for the keys it sees.
    int64_t j = 0;
    if constexpr (V <= 4)
      for (; j + 4 <= seen; j += 4) {
        columnRows<V, 4>(dsm, tp, t0, t1, q, h, j, dk + j * h.stride);
        columnRows<V, 4>(pm, tp, t0, t1, dout, h, j, dv + j * h.stride);
      }
    for (; j < seen; ++j) {
      columnRows<V, 1>(dsm, tp, t0, t1, q, h, j, dk + j * h.stride);
      columnRows<V, 1>(pm, tp, t0, t1, dout, h, j, dv + j * h.stride);
    }
  }
}

} // namespace

/// The lanes of a row of n elements from i on (a tail of fewer than 16).
GPTC_AVX512 static inline __mmask16 lanes(int64_t i, int64_t n) {
  int64_t left = n - i;
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

GPTC_AVX512 static float logSumExpRow(const float *row, int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16)
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY),
                                              lanes(i, n), row + i));
  float mx = _mm512_reduce_max_ps(m);
  __m512 vm = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = lanes(i, n);
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vm));
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  return mx + std::log(_mm512_reduce_add_ps(sum));
}

GPTC_AVX512 static void scaledSoftmaxRow(const float *row, int64_t n, float lse,
                                         float scale, float *out) {
  __m512 vl = _mm512_set1_ps(lse), vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = lanes(i, n);
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vl));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(e, vs));
  }
}

bool logSumExpAvx512(const float *row, int64_t n, float &out) {
  if (!avx512Available() || n <= 0)
    return false;
  out = logSumExpRow(row, n);
  return true;
}

bool scaledSoftmaxAvx512(const float *row, int64_t n, float lse, float scale,
                         float *out) {
  if (!avx512Available())
    return false;
  scaledSoftmaxRow(row, n, lse, scale, out);
  return true;
}

/// Calls f.template operator()<V>() for the head width 16 V.
template <typename F>
static void withWidth(int64_t d, F &&f) {
  switch (d) {
  case 16:
    return f(std::integral_constant<int, 1>());
  case 32:
    return f(std::integral_constant<int, 2>());
  case 64:
    return f(std::integral_constant<int, 4>());
  default:
    return f(std::integral_constant<int, 8>());
  }
}

bool attentionAvx512Fits(int64_t width, int64_t heads) {
  if (heads <= 0 || width % heads != 0)
    return false;
  int64_t d = width / heads;
  return avx512Available() && (d == 16 || d == 32 || d == 64 || d == 128);
}

/// Calls body(offQ, offK, v16, scratch) for every (batch element, head)
/// of [B, Tq, C] queries and [B, Tk, C] keys, `offQ` and `offK` the
/// head's first elements, the heads spread over the threads, each thread
/// with its own scratch.
template <typename Body>
static void forEachHead(int64_t batch, int64_t seqQ, int64_t seqK,
                        int64_t width, int64_t heads, Body body) {
  int64_t d = width / heads, items = batch * heads;
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < items; ++i) {
      int64_t b = i / heads, head = (i % heads) * d;
      int64_t offQ = b * seqQ * width + head, offK = b * seqK * width + head;
      withWidth(d, [&](auto v16) { body(offQ, offK, v16, scratch); });
    }
  }
}

/// The heads' view of [B, Tq, C] queries and [B, Tk, C] keys.
static Head headOf(int64_t seqQ, int64_t seqK, int64_t width, int64_t heads,
                   const int32_t *pos) {
  int64_t d = width / heads;
  return Head{seqK, d, width, 1.0f / std::sqrt(float(d)), seqQ, pos};
}

bool causalAttentionAvx512(const float *q, const float *k, const float *v,
                           int64_t batch, int64_t seq, int64_t width,
                           int64_t heads, float *out) {
  return positionedAttentionAvx512(q, k, v, nullptr, batch, seq, seq, width,
                                   heads, out);
}

/// Where the log-sum-exps ([B, Tq, H]) of the head whose queries start at
/// `offQ` begin.
static int64_t lseOffset(int64_t offQ, int64_t seqQ, int64_t width,
                         int64_t heads) {
  int64_t b = offQ / (seqQ * width), head = offQ % width / (width / heads);
  return b * seqQ * heads + head;
}

bool positionedAttentionAvx512(const float *q, const float *k, const float *v,
                               const int32_t *pos, int64_t batch, int64_t seqQ,
                               int64_t seqK, int64_t width, int64_t heads,
                               float *out, float *lse) {
  if (!attentionAvx512Fits(width, heads))
    return false;
  Head h = headOf(seqQ, seqK, width, heads, pos);
  h.lseStride = heads;
  forEachHead(
      batch, seqQ, seqK, width, heads,
      [&](int64_t offQ, int64_t offK, auto v16, std::vector<float> &scratch) {
        Head own = h;
        if (lse)
          own.lse = lse + lseOffset(offQ, seqQ, width, heads);
        forwardHead<decltype(v16)::value>(q + offQ, k + offK, v + offK, own,
                                          out + offQ, scratch);
      });
  return true;
}

bool causalAttentionGradAvx512(const float *q, const float *k, const float *v,
                               const float *dout, int64_t batch, int64_t seq,
                               int64_t width, int64_t heads, float *dq,
                               float *dk, float *dv) {
  return positionedAttentionGradAvx512(q, k, v, dout, nullptr, batch, seq, seq,
                                       width, heads, dq, dk, dv);
}

bool positionedAttentionGradAvx512(const float *q, const float *k,
                                   const float *v, const float *dout,
                                   const int32_t *pos, int64_t batch,
                                   int64_t seqQ, int64_t seqK, int64_t width,
                                   int64_t heads, float *dq, float *dk,
                                   float *dv, const float *dlse) {
  if (!attentionAvx512Fits(width, heads))
    return false;
  Head h = headOf(seqQ, seqK, width, heads, pos);
  h.lseStride = heads;
  forEachHead(
      batch, seqQ, seqK, width, heads,
      [&](int64_t offQ, int64_t offK, auto v16, std::vector<float> &scratch) {
        Head own = h;
        if (dlse)
          own.dlse = dlse + lseOffset(offQ, seqQ, width, heads);
        backwardHead<decltype(v16)::value>(q + offQ, k + offK, v + offK,
                                           dout + offQ, own, dq + offQ,
                                           dk + offK, dv + offK, scratch);
      });
  return true;
}

#else

bool avx512Available() { return false; }
bool logSumExpAvx512(const float *, int64_t, float &) { return false; }
bool scaledSoftmaxAvx512(const float *, int64_t, float, float, float *) {
  return false;
}
bool attentionAvx512Fits(int64_t, int64_t) { return false; }
bool causalAttentionAvx512(const float *, const float *, const float *, int64_t,
                           int64_t, int64_t, int64_t, float *) {
  return false;
}
bool causalAttentionGradAvx512(const float *, const float *, const float *,
                               const float *, int64_t, int64_t, int64_t,
                               int64_t, float *, float *, float *) {
  return false;
}
bool positionedAttentionAvx512(const float *, const float *, const float *,
                               const int32_t *, int64_t, int64_t, int64_t,
                               int64_t, int64_t, float *, float *) {
  return false;
}
bool positionedAttentionGradAvx512(const float *, const float *, const float *,
                                   const float *, const int32_t *, int64_t,
                                   int64_t, int64_t, int64_t, int64_t, float *,
                                   float *, float *, const float *) {
  return false;
}

#endif

} // namespace gptc::cpu
