//===- Kernels.cpp - CPU kernels of gptc's runtime -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Straightforward, cache-friendly loops over rows, with GEMMs in CBLAS. The
// formulas follow PyTorch's definitions (biased variance in layer norm,
// tanh-approximated GELU, mean cross-entropy over non-ignored positions) so
// that fp32 results agree with PyTorch to rounding.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Kernels.h"

#include "gptc/Runtime/CPU/Cores.h"
#include "gptc/Runtime/CPU/Gemm.h"

#include "Avx512.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

namespace gptc::cpu {

/// Loops over fewer elements than this run on one thread: forking the
/// pool costs more than the work.
static constexpr int64_t kParallelElements = 16384;

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

template <typename T>
int64_t embedding(const int32_t *ids, int64_t n, const T *table, int64_t vocab,
                  int64_t width, T *out, bool block, int64_t offset) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = ids[i] - offset;
    if (id < 0 || id >= vocab) {
      if (!block)
        return i;
      std::fill(out + i * width, out + (i + 1) * width, T(0));
      continue;
    }
    std::memcpy(out + i * width, table + id * width, width * sizeof(T));
  }
  return -1;
}

template <typename T>
int64_t embeddingGrad(const int32_t *ids, int64_t n, const T *dout,
                      int64_t vocab, int64_t width, T *dtable, bool block,
                      int64_t offset) {
  std::fill(dtable, dtable + vocab * width, T(0));
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = ids[i] - offset;
    if (id < 0 || id >= vocab) {
      if (block)
        continue;
      return i;
    }
    T *row = dtable + id * width;
    const T *g = dout + i * width;
    for (int64_t c = 0; c < width; ++c)
      row[c] += g[c];
  }
  return -1;
}

void iota(int32_t *out, const std::vector<int64_t> &shape, int64_t dim) {
  int64_t inner = 1, outer = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  int64_t extent = shape[dim];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < extent; ++i)
      std::fill(out + (o * extent + i) * inner,
                out + (o * extent + i + 1) * inner, static_cast<int32_t>(i));
}

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

template <typename T>
void linear(const T *x, const T *w, const T *b, int64_t m, int64_t n, int64_t k,
            T *y) {
  // y = x W^T + b: the bias is the GEMM's epilogue, not a separate pass.
  gemm(linearProblem(m, n, k, b != nullptr), x, w, y, b);
}

template <typename T>
void matmul(const T *a, const T *b, int64_t batch, int64_t m, int64_t n,
            int64_t k, bool ta, bool tb, T *c) {
  // One batched product, each operand's transposition a stride.
  gemm(matmulProblem(batch, m, n, k, ta, tb), a, b, c);
}

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

/// Mean and reciprocal standard deviation of one row (biased variance).
template <typename T>
static void rowStats(const T *x, int64_t cols, double eps, T &mean, T &rstd) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c)
    sum += x[c];
  mean = sum / T(cols);
  T var = 0;
#pragma omp simd reduction(+ : var)
  for (int64_t c = 0; c < cols; ++c) {
    T d = x[c] - mean;
    var += d * d;
  }
  var /= T(cols);
  rstd = T(1) / std::sqrt(var + T(eps));
}

template <typename T>
void layerNorm(const T *x, const T *gamma, const T *beta, int64_t rows,
               int64_t cols, double eps, T *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    T mean, rstd;
    rowStats(xr, cols, eps, mean, rstd);
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

template <typename T>
void layerNormGrad(const T *x, const T *gamma, const T *dy, int64_t rows,
                   int64_t cols, double eps, T *dx, T *dgamma, T *dbeta) {
  // 1. dx, row by row (rows in parallel), keeping each row's statistics.
  std::vector<T> means(rows), rstds(rows);
  bool parallel = rows * cols >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols, *dyr = dy + r * cols;
    T *dxr = dx + r * cols;
    T mean, rstd;
    rowStats(xr, cols, eps, mean, rstd);
    means[r] = mean;
    rstds[r] = rstd;
    // dx = rstd (dn - mean(dn) - n mean(dn n)), dn = dy gamma.
    T meanDn = 0, meanDnN = 0;
    for (int64_t c = 0; c < cols; ++c) {
      T n = (xr[c] - mean) * rstd;
      T dn = dyr[c] * gamma[c];
      meanDn += dn;
      meanDnN += dn * n;
    }
    meanDn /= T(cols);
    meanDnN /= T(cols);
    for (int64_t c = 0; c < cols; ++c) {
      T n = (xr[c] - mean) * rstd;
      dxr[c] = rstd * (dyr[c] * gamma[c] - meanDn - n * meanDnN);
    }
  }
  // 2. dgamma and dbeta, summed over rows in order by column blocks, so
  // the sums do not depend on the number of threads.
  constexpr int64_t block = 16;
  int64_t blocks = (cols + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    int64_t c0 = cb * block, c1 = std::min(cols, c0 + block);
    T g[block] = {}, bsum[block] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * cols, *dyr = dy + r * cols;
      for (int64_t c = c0; c < c1; ++c) {
        T n = (xr[c] - means[r]) * rstds[r];
        g[c - c0] += dyr[c] * n;
        bsum[c - c0] += dyr[c];
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dgamma[c] = g[c - c0];
      dbeta[c] = bsum[c - c0];
    }
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
static constexpr T geluScale() {
  return T(0.7978845608028654); // sqrt(2 / pi)
}

/// tanh for the GELU loops: a [13/6] rational approximation in float (the
/// one Eigen uses; within a few ulp of std::tanh, and vectorizable), the
/// library's tanh in double, which the finite-difference checks use.
static inline float fastTanh(float x) {
  const float clamp = 7.90531110763549805f;
  // Selects, not branches, so that the loops around it vectorize.
  x = x > clamp ? clamp : x;
  x = x < -clamp ? -clamp : x;
  float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}
static inline double fastTanh(double x) { return std::tanh(x); }

float tanhForGelu(float x) { return fastTanh(x); }

/// exp for the softmax and cross-entropy loops: Cody-Waite range reduction
/// to r in [-ln2/2, ln2/2] and Cephes' degree-6 polynomial, scaled by 2^n
/// through the exponent bits; within 2 ulp of std::exp, and vectorizable.
/// Inputs below -87 give 0 (the softmaxes here only exponentiate x - max).
static inline float fastExp(float x) {
  // NaN stays NaN (converting it to int below would be undefined).
  bool nan = x != x;
  x = nan ? 0.0f : x;
  x = x > 88.0f ? 88.0f : x;
  bool tiny = x < -87.0f;
  x = x < -87.0f ? -87.0f : x;
  float fn = x * 1.44269504088896341f;
  int n = static_cast<int>(fn + (fn >= 0 ? 0.5f : -0.5f));
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return nan    ? std::numeric_limits<float>::quiet_NaN()
         : tiny ? 0.0f
                : p * scale;
}
static inline double fastExp(double x) { return std::exp(x); }

float expForSoftmax(float x) { return fastExp(x); }

template <typename T>
void gelu(const T *xIn, int64_t n, T *yOut) {
  const T *__restrict x = xIn;
  T *__restrict y = yOut;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    T u = geluScale<T>() * (v + T(0.044715) * v * v * v);
    y[i] = T(0.5) * v * (T(1) + fastTanh(u));
  }
}

template <typename T>
void geluGrad(const T *xIn, const T *dyIn, int64_t n, T *dxOut) {
  const T *__restrict x = xIn, *__restrict dy = dyIn;
  T *__restrict dx = dxOut;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    T u = geluScale<T>() * (v + T(0.044715) * v * v * v);
    T t = fastTanh(u);
    T du = geluScale<T>() * (T(1) + T(3 * 0.044715) * v * v);
    dx[i] = dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

/// The largest element of `row` (vectorized; -inf for an empty row).
template <typename T>
static T rowMax(const T *row, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i)
    m = row[i] > m ? row[i] : m;
  return m;
}

template <typename T>
void softmax(const T *x, int64_t rows, int64_t cols, T *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    T m = rowMax(xr, cols);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c)
      sum += yr[c] = fastExp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c)
      yr[c] /= sum;
  }
}

template <typename T>
void softmaxGrad(const T *y, const T *dy, int64_t rows, int64_t cols, T *dx) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T *yr = y + r * cols, *dyr = dy + r * cols;
    T dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += yr[c] * dyr[c];
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = yr[c] * (dyr[c] - dot);
  }
}

template <typename T>
void add(const T *a, const T *b, int64_t n, T *y) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}

/// erf in float: Eigen's [13/10] rational approximation on [-4, 4] (within
/// 1e-7 of std::erf), which the generated kernels compute too; the
/// library's erf in double.
static inline float fastErf(float x) {
  x = x > 4.0f ? 4.0f : x;
  x = x < -4.0f ? -4.0f : x;
  float x2 = x * x;
  float p = -2.72614225801306e-10f;
  for (float k :
       {2.77068142495902e-08f, -2.10102402082508e-06f, -5.69250639462346e-05f,
        -7.34990630326855e-04f, -2.95459980854025e-03f, -1.60960333262415e-02f})
    p = p * x2 + k;
  p = p * x;
  float q = -1.45660718464996e-05f;
  for (float k : {-2.13374055278905e-04f, -1.68282697438203e-03f,
                  -7.37332916720468e-03f, -1.42647390514189e-02f})
    q = q * x2 + k;
  return p / q;
}
static inline double fastErf(double x) { return std::erf(x); }

template <typename T>
void geluExact(const T *xIn, int64_t n, T *yOut) {
  const T *__restrict x = xIn;
  T *__restrict y = yOut;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i)
    y[i] = T(0.5) * x[i] * (T(1) + fastErf(T(0.7071067811865476) * x[i]));
}

template <typename T>
void geluExactGrad(const T *xIn, const T *dyIn, int64_t n, T *dxOut) {
  const T *__restrict x = xIn, *__restrict dy = dyIn;
  T *__restrict dx = dxOut;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    T cdf = T(0.5) * (T(1) + fastErf(T(0.7071067811865476) * v));
    T pdf = T(0.3989422804014327) * fastExp(T(-0.5) * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

std::optional<UnaryFunction> unaryFunction(program::UnaryFunction f) {
  switch (f) {
  case program::UNARY_NEG:
    return UnaryFunction::Neg;
  case program::UNARY_SQRT:
    return UnaryFunction::Sqrt;
  case program::UNARY_EXP:
    return UnaryFunction::Exp;
  case program::UNARY_LOG:
    return UnaryFunction::Log;
  case program::UNARY_TANH:
    return UnaryFunction::Tanh;
  case program::UNARY_ERF:
    return UnaryFunction::Erf;
  case program::UNARY_RECIPROCAL:
    return UnaryFunction::Reciprocal;
  case program::UNARY_RELU:
    return UnaryFunction::Relu;
  case program::UNARY_SIGMOID:
    return UnaryFunction::Sigmoid;
  case program::UNARY_ABS:
    return UnaryFunction::Abs;
  case program::UNARY_STEP:
    return UnaryFunction::Step;
  case program::UNARY_SIGN:
    return UnaryFunction::Sign;
  default:
    return std::nullopt;
  }
}

std::optional<BinaryFunction> binaryFunction(program::BinaryFunction f) {
  switch (f) {
  case program::BINARY_SUB:
    return BinaryFunction::Sub;
  case program::BINARY_MUL:
    return BinaryFunction::Mul;
  case program::BINARY_DIV:
    return BinaryFunction::Div;
  case program::BINARY_POW:
    return BinaryFunction::Pow;
  case program::BINARY_UNLESS_NAN:
    return BinaryFunction::UnlessNan;
  default:
    return std::nullopt;
  }
}

template <typename T>
void unary(UnaryFunction fn, const T *x, int64_t n, T *y) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    switch (fn) {
    case UnaryFunction::Neg:
      v = -v;
      break;
    case UnaryFunction::Sqrt:
      v = std::sqrt(v);
      break;
    case UnaryFunction::Exp:
      v = std::exp(v);
      break;
    case UnaryFunction::Log:
      v = std::log(v);
      break;
    case UnaryFunction::Tanh:
      v = fastTanh(v);
      break;
    case UnaryFunction::Erf:
      v = fastErf(v);
      break;
    case UnaryFunction::Reciprocal:
      v = T(1) / v;
      break;
    case UnaryFunction::Relu:
      v = v > T(0) ? v : T(0);
      break;
    case UnaryFunction::Sigmoid:
      v = T(1) / (T(1) + std::exp(-v));
      break;
    case UnaryFunction::Abs:
      v = std::fabs(v);
      break;
    case UnaryFunction::Step:
      v = v > T(0) ? T(1) : T(0);
      break;
    case UnaryFunction::Sign:
      v = v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
      break;
    }
    y[i] = v;
  }
}

template <typename T>
void binary(BinaryFunction fn, const T *a, const T *b, int64_t n, T *y) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    switch (fn) {
    case BinaryFunction::Sub:
      y[i] = a[i] - b[i];
      break;
    case BinaryFunction::Mul:
      y[i] = a[i] * b[i];
      break;
    case BinaryFunction::Div:
      y[i] = a[i] / b[i];
      break;
    case BinaryFunction::Pow:
      y[i] = std::pow(a[i], b[i]);
      break;
    case BinaryFunction::UnlessNan:
      y[i] = a[i] != a[i] ? T(0) : b[i];
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Causal attention
//===----------------------------------------------------------------------===//

/// Turns row t of one head's scores (T wide) into causal probabilities in
/// place: softmax(scale * s[t, 0..t]), zero after.
template <typename T>
static void causalSoftmaxRow(T *row, int64_t t, int64_t seq, T scale) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j <= t; ++j) {
    row[j] *= scale;
    m = row[j] > m ? row[j] : m;
  }
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j <= t; ++j)
    sum += row[j] = fastExp(row[j] - m);
  T inv = T(1) / sum;
  for (int64_t j = 0; j <= t; ++j)
    row[j] *= inv;
  std::fill(row + t + 1, row + seq, T(0));
}

// The heads' columns of Q, K, V (B x T x C) are B x H matrices of T x D
// with row stride C, head stride D and batch stride T C: one batched
// product covers a chunk of batch elements and every head, without
// copies. Causality skips work: from T = 128 the queries go in blocks of
// 32 rows, and a block [r0, r1) multiplies only the keys [0, r1) (at
// T = 128, 62.5% of the full T x T products). The scores of one chunk
// and block (chunk x H x rows x T) live in scratch.

/// One batched product over `batch` elements and every head.
static GemmProblem headsProduct(int64_t batch, int64_t heads, int64_t m,
                                int64_t n, int64_t k, MatrixStrides a,
                                MatrixStrides b, MatrixStrides c,
                                bool accumulate) {
  GemmProblem p;
  p.batch0 = batch;
  p.batch1 = heads;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = a;
  p.b = b;
  p.c = c;
  p.accumulate = accumulate;
  return p;
}

namespace {
/// The strided views of a chunk of batch elements' heads, for query
/// blocks of `rows` rows.
struct HeadViews {
  int64_t chunk, seq, width, heads, d, rows;
  HeadViews(int64_t batch, int64_t seq, int64_t width, int64_t heads)
      : seq(seq), width(width), heads(heads), d(width / heads) {
    // Blocks of 32 query rows once the sequence is long enough for the
    // skipped products to outweigh the smaller GEMMs (measured: at T = 64
    // one block is faster, at T = 128 blocks of 32 beat blocks of 64).
    rows = seq >= 128 ? 32 : seq;
    // Scratch of about 8 MiB of scores at most, whole batch elements.
    int64_t perElement = heads * rows * seq * 8;
    chunk = std::clamp<int64_t>((int64_t(8) << 20) / perElement, 1, batch);
  }
  /// Q, K, V, O and their gradients: (T x D), row stride C.
  MatrixStrides act() const { return {seq * width, d, width, 1}; }
  /// The same, transposed (D x T).
  MatrixStrides actT() const { return {seq * width, d, 1, width}; }
  /// One block's scores and probabilities: (rows x keys), row stride T,
  /// and transposed.
  MatrixStrides scores() const {
    return {heads * rows * seq, rows * seq, seq, 1};
  }
  MatrixStrides scoresT() const {
    return {heads * rows * seq, rows * seq, 1, seq};
  }
  int64_t scratch() const { return chunk * heads * rows * seq; }
  GemmProblem product(int64_t batch, int64_t m, int64_t n, int64_t k,
                      MatrixStrides a, MatrixStrides b, MatrixStrides c,
                      bool accumulate = false) const {
    return headsProduct(batch, heads, m, n, k, a, b, c, accumulate);
  }
};
} // namespace

int64_t causalAttentionScratch(int64_t batch, int64_t seq, int64_t width,
                               int64_t heads) {
  // The AVX-512 path keeps, per thread, a head's transposed keys and
  // values and a block of query rows' probabilities and score gradients
  // (kAttentionBlockRows x T, T rounded up to 16), in two halves of what
  // this function counts.
  if (attentionAvx512Fits(width, heads)) {
    int64_t tp = (seq + 15) / 16 * 16;
    return omp_get_max_threads() *
           (width / heads + std::min(kAttentionBlockRows, seq)) * tp;
  }
  return HeadViews(batch, seq, width, heads).scratch();
}

/// P = causal softmax(Q K^T / sqrt(D)) of query rows [r0, r1) against
/// keys [0, r1), every head of `n` batch elements (q, k at the chunk).
template <typename T>
static void blockProbabilities(const HeadViews &h, int64_t n, int64_t r0,
                               int64_t r1, const T *q, const T *k, T scale,
                               T *p) {
  gemm(h.product(n, r1 - r0, r1, h.d, h.act(), h.actT(), h.scores()),
       q + r0 * h.width, k, p);
  // Row i of (batch element, head) bh lies at bh * rows * T + i * T: a
  // ragged last block (m < rows) leaves the rest of each head's slot unused.
  int64_t m = r1 - r0, rows = n * h.heads * m;
#pragma omp parallel for schedule(static) if (rows * r1 > 16384)
  for (int64_t r = 0; r < rows; ++r)
    causalSoftmaxRow(p + (r / m) * h.rows * h.seq + (r % m) * h.seq, r0 + r % m,
                     r1, scale);
}

template <typename T>
void causalAttention(const T *q, const T *k, const T *v, int64_t batch,
                     int64_t seq, int64_t width, int64_t heads, T *out) {
  if constexpr (std::is_same_v<T, float>)
    if (causalAttentionAvx512(q, k, v, batch, seq, width, heads, out))
      return;
  HeadViews h(batch, seq, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch());
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b), off = b * seq * width;
    for (int64_t r0 = 0; r0 < seq; r0 += h.rows) {
      int64_t r1 = std::min(seq, r0 + h.rows);
      // P = causal softmax(Q K^T / sqrt(D)); O = P V, keys [0, r1).
      blockProbabilities(h, n, r0, r1, q + off, k + off, scale, p.data());
      gemm(h.product(n, r1 - r0, h.d, r1, h.scores(), h.act(), h.act()),
           p.data(), v + off, out + off + r0 * width);
    }
  }
}

template <typename T>
void causalAttentionGrad(const T *q, const T *k, const T *v, const T *dout,
                         int64_t batch, int64_t seq, int64_t width,
                         int64_t heads, T *dq, T *dk, T *dv) {
  if constexpr (std::is_same_v<T, float>)
    if (causalAttentionGradAvx512(q, k, v, dout, batch, seq, width, heads, dq,
                                  dk, dv))
      return;
  HeadViews h(batch, seq, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch()), dp(h.scratch());
  int64_t last = (seq - 1) / h.rows * h.rows;
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b), off = b * seq * width;
    // Blocks from the last: it reaches every key, so its dK and dV
    // products write rows [0, T) and the earlier blocks add to theirs.
    for (int64_t r0 = last; r0 >= 0; r0 -= h.rows) {
      int64_t r1 = std::min(seq, r0 + h.rows), m = r1 - r0;
      bool add = r0 != last;
      // Recompute P, as flash attention's backward pass does.
      blockProbabilities(h, n, r0, r1, q + off, k + off, scale, p.data());
      // dP = dO V^T;  dV += P^T dO.
      gemm(h.product(n, m, r1, h.d, h.act(), h.actT(), h.scores()),
           dout + off + r0 * width, v + off, dp.data());
      gemm(h.product(n, r1, h.d, m, h.scoresT(), h.act(), h.act(), add),
           p.data(), dout + off + r0 * width, dv + off);
      // dS = P (dP - rowsum(P dP)) / sqrt(D), zero above the diagonal (P
      // is).
      int64_t rows = n * heads * m;
#pragma omp parallel for schedule(static) if (rows * r1 > 16384)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t t = r0 + r % m, at = (r / m) * h.rows * seq + (r % m) * seq;
        T *pr = p.data() + at, *dpr = dp.data() + at;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j <= t; ++j)
          dot += pr[j] * dpr[j];
        for (int64_t j = 0; j < r1; ++j)
          dpr[j] = pr[j] * (dpr[j] - dot) * scale;
      }
      // dQ = dS K (this block's rows);  dK += dS^T Q.
      gemm(h.product(n, m, h.d, r1, h.scores(), h.act(), h.act()), dp.data(),
           k + off, dq + off + r0 * width);
      gemm(h.product(n, r1, h.d, m, h.scoresT(), h.act(), h.act(), add),
           dp.data(), q + off + r0 * width, dk + off);
    }
  }
}

// Attention from a subset of the sequence's positions (context
// parallelism): Q is B x Tq x C, K and V B x Tk x C in sequence order, and
// query row i attends keys [0, pos[i]]. The same blocked products as
// above, with each block of query rows multiplying the keys up to its
// largest position.

namespace {
struct PositionViews {
  int64_t chunk, seqQ, seqK, width, heads, d, rows;
  PositionViews(int64_t batch, int64_t seqQ, int64_t seqK, int64_t width,
                int64_t heads)
      : seqQ(seqQ), seqK(seqK), width(width), heads(heads), d(width / heads) {
    rows = seqQ >= 128 ? 32 : seqQ;
    int64_t perElement = heads * rows * seqK * 8;
    chunk = std::clamp<int64_t>((int64_t(8) << 20) / perElement, 1, batch);
  }
  MatrixStrides q() const { return {seqQ * width, d, width, 1}; }
  MatrixStrides k() const { return {seqK * width, d, width, 1}; }
  MatrixStrides kT() const { return {seqK * width, d, 1, width}; }
  MatrixStrides scores() const {
    return {heads * rows * seqK, rows * seqK, seqK, 1};
  }
  MatrixStrides scoresT() const {
    return {heads * rows * seqK, rows * seqK, 1, seqK};
  }
  int64_t scratch() const { return chunk * heads * rows * seqK; }
  GemmProblem product(int64_t batch, int64_t m, int64_t n, int64_t k,
                      MatrixStrides a, MatrixStrides b, MatrixStrides c,
                      bool accumulate = false) const {
    return headsProduct(batch, heads, m, n, k, a, b, c, accumulate);
  }
  /// The keys rows [r0, r1) reach: [0, max position + 1).
  static int64_t keys(const int32_t *pos, int64_t r0, int64_t r1) {
    int64_t last = 0;
    for (int64_t r = r0; r < r1; ++r)
      last = std::max<int64_t>(last, pos[r]);
    return last + 1;
  }
};

/// P of query rows [r0, r1) against keys [0, keys) (q, k at the chunk).
template <typename T>
void positionedProbabilities(const PositionViews &h, int64_t n, int64_t r0,
                             int64_t r1, int64_t keys, const int32_t *pos,
                             const T *q, const T *k, T scale, T *p) {
  gemm(h.product(n, r1 - r0, keys, h.d, h.q(), h.kT(), h.scores()),
       q + r0 * h.width, k, p);
  int64_t m = r1 - r0, rows = n * h.heads * m;
#pragma omp parallel for schedule(static) if (rows * keys > 16384)
  for (int64_t r = 0; r < rows; ++r)
    causalSoftmaxRow(p + (r / m) * h.rows * h.seqK + (r % m) * h.seqK,
                     pos[r0 + r % m], keys, scale);
}
} // namespace

template <typename T>
void positionedAttention(const T *q, const T *k, const T *v, const int32_t *pos,
                         int64_t batch, int64_t seqQ, int64_t seqK,
                         int64_t width, int64_t heads, T *out) {
  if constexpr (std::is_same_v<T, float>)
    if (positionedAttentionAvx512(q, k, v, pos, batch, seqQ, seqK, width, heads,
                                  out))
      return;
  PositionViews h(batch, seqQ, seqK, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch());
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b);
    int64_t offQ = b * seqQ * width, offK = b * seqK * width;
    for (int64_t r0 = 0; r0 < seqQ; r0 += h.rows) {
      int64_t r1 = std::min(seqQ, r0 + h.rows);
      int64_t keys = PositionViews::keys(pos, r0, r1);
      positionedProbabilities(h, n, r0, r1, keys, pos, q + offQ, k + offK,
                              scale, p.data());
      gemm(h.product(n, r1 - r0, h.d, keys, h.scores(), h.k(), h.q()), p.data(),
           v + offK, out + offQ + r0 * width);
    }
  }
}

template <typename T>
void positionedAttentionGrad(const T *q, const T *k, const T *v, const T *dout,
                             const int32_t *pos, int64_t batch, int64_t seqQ,
                             int64_t seqK, int64_t width, int64_t heads, T *dq,
                             T *dk, T *dv) {
  if constexpr (std::is_same_v<T, float>)
    if (positionedAttentionGradAvx512(q, k, v, dout, pos, batch, seqQ, seqK,
                                      width, heads, dq, dk, dv))
      return;
  PositionViews h(batch, seqQ, seqK, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch()), dp(h.scratch());
  std::fill(dk, dk + batch * seqK * width, T(0));
  std::fill(dv, dv + batch * seqK * width, T(0));
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b);
    int64_t offQ = b * seqQ * width, offK = b * seqK * width;
    for (int64_t r0 = 0; r0 < seqQ; r0 += h.rows) {
      int64_t r1 = std::min(seqQ, r0 + h.rows), m = r1 - r0;
      int64_t keys = PositionViews::keys(pos, r0, r1);
      positionedProbabilities(h, n, r0, r1, keys, pos, q + offQ, k + offK,
                              scale, p.data());
      const T *dO = dout + offQ + r0 * width;
      // dP = dO V^T;  dV += P^T dO.
      gemm(h.product(n, m, keys, h.d, h.q(), h.kT(), h.scores()), dO, v + offK,
           dp.data());
      gemm(h.product(n, keys, h.d, m, h.scoresT(), h.q(), h.k(), true),
           p.data(), dO, dv + offK);
      // dS = P (dP - rowsum(P dP)) / sqrt(D) (zero where P is).
      int64_t rows = n * heads * m;
#pragma omp parallel for schedule(static) if (rows * keys > 16384)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t at = (r / m) * h.rows * seqK + (r % m) * seqK;
        T *pr = p.data() + at, *dpr = dp.data() + at;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < keys; ++j)
          dot += pr[j] * dpr[j];
        for (int64_t j = 0; j < keys; ++j)
          dpr[j] = pr[j] * (dpr[j] - dot) * scale;
      }
      // dQ = dS K;  dK += dS^T Q.
      gemm(h.product(n, m, h.d, keys, h.scores(), h.k(), h.q()), dp.data(),
           k + offK, dq + offQ + r0 * width);
      gemm(h.product(n, keys, h.d, m, h.scoresT(), h.q(), h.k(), true),
           dp.data(), q + offQ + r0 * width, dk + offK);
    }
  }
}

// Ring attention's steps: queries at positions qpos against a block of
// keys at ascending positions kpos. Query i sees the block's first
// limit[i] + 1 keys (those at positions <= qpos[i]), so the blocked
// products of positioned attention apply with these limits; a row that
// sees none (limit -1) gets a zero output and lse -inf. The log-sum-exp
// (of the scaled scores) is kept per batch element, query and head.

namespace {
/// limit[i]: the index of the last key query i sees, -1 for none.
std::vector<int32_t> blockLimits(const int32_t *qpos, const int32_t *kpos,
                                 int64_t seqQ, int64_t seqK) {
  std::vector<int32_t> limit(seqQ);
  for (int64_t i = 0; i < seqQ; ++i)
    limit[i] = static_cast<int32_t>(
                   std::upper_bound(kpos, kpos + seqK, qpos[i]) - kpos) -
               1;
  return limit;
}

/// The keys rows [r0, r1) reach: the largest limit + 1 (0: none).
int64_t blockKeys(const std::vector<int32_t> &limit, int64_t r0, int64_t r1) {
  int64_t last = -1;
  for (int64_t r = r0; r < r1; ++r)
    last = std::max<int64_t>(last, limit[r]);
  return last + 1;
}

/// P of query rows [r0, r1) against the block's first `keys` keys, each
/// row normalized over the keys it sees; with `lse`, each row's
/// log-sum-exp is stored at lse[(b * seqQ + row) * heads + head] (b the
/// chunk's first batch element).
template <typename T>
void blockProbabilities(const PositionViews &h, int64_t n, int64_t r0,
                        int64_t r1, int64_t keys,
                        const std::vector<int32_t> &limit, const T *q,
                        const T *k, T scale, T *p, T *lse, int64_t b) {
  gemm(h.product(n, r1 - r0, keys, h.d, h.q(), h.kT(), h.scores()),
       q + r0 * h.width, k, p);
  int64_t m = r1 - r0, rows = n * h.heads * m;
#pragma omp parallel for schedule(static) if (rows * keys > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = r0 + r % m, bh = r / m;
    T *row = p + bh * h.rows * h.seqK + (r % m) * h.seqK;
    int64_t t = limit[i];
    T logSum = -std::numeric_limits<T>::infinity();
    if (t < 0) {
      std::fill(row, row + keys, T(0));
    } else {
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j <= t; ++j) {
        row[j] *= scale;
        mx = std::max(mx, row[j]);
      }
      T sum = 0;
      for (int64_t j = 0; j <= t; ++j)
        sum += row[j] = std::exp(row[j] - mx);
      T inv = T(1) / sum;
      for (int64_t j = 0; j <= t; ++j)
        row[j] *= inv;
      std::fill(row + t + 1, row + keys, T(0));
      logSum = mx + std::log(sum);
    }
    if (lse)
      lse[((b + bh / h.heads) * h.seqQ + i) * h.heads + bh % h.heads] = logSum;
  }
}
} // namespace

template <typename T>
void blockAttention(const T *q, const T *k, const T *v, const int32_t *qpos,
                    const int32_t *kpos, int64_t batch, int64_t seqQ,
                    int64_t seqK, int64_t width, int64_t heads, T *out,
                    T *lse) {
  std::vector<int32_t> limit = blockLimits(qpos, kpos, seqQ, seqK);
  if constexpr (std::is_same_v<T, float>)
    if (positionedAttentionAvx512(q, k, v, limit.data(), batch, seqQ, seqK,
                                  width, heads, out, lse))
      return;
  PositionViews h(batch, seqQ, seqK, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch());
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b);
    int64_t offQ = b * seqQ * width, offK = b * seqK * width;
    for (int64_t r0 = 0; r0 < seqQ; r0 += h.rows) {
      int64_t r1 = std::min(seqQ, r0 + h.rows);
      int64_t keys = blockKeys(limit, r0, r1);
      if (keys == 0) {
        // No row of the block sees a key: zero output, lse -inf.
        for (int64_t e = 0; e < n; ++e) {
          std::fill(out + offQ + (e * seqQ + r0) * width,
                    out + offQ + (e * seqQ + r1) * width, T(0));
          std::fill(lse + ((b + e) * seqQ + r0) * heads,
                    lse + ((b + e) * seqQ + r1) * heads,
                    -std::numeric_limits<T>::infinity());
        }
        continue;
      }
      blockProbabilities(h, n, r0, r1, keys, limit, q + offQ, k + offK, scale,
                         p.data(), lse, b);
      gemm(h.product(n, r1 - r0, h.d, keys, h.scores(), h.k(), h.q()), p.data(),
           v + offK, out + offQ + r0 * width);
    }
  }
}

template <typename T>
void blockAttentionGrad(const T *q, const T *k, const T *v, const int32_t *qpos,
                        const int32_t *kpos, const T *dout, const T *dlse,
                        int64_t batch, int64_t seqQ, int64_t seqK,
                        int64_t width, int64_t heads, T *dq, T *dk, T *dv) {
  std::vector<int32_t> limit = blockLimits(qpos, kpos, seqQ, seqK);
  if constexpr (std::is_same_v<T, float>)
    if (positionedAttentionGradAvx512(q, k, v, dout, limit.data(), batch, seqQ,
                                      seqK, width, heads, dq, dk, dv, dlse))
      return;
  PositionViews h(batch, seqQ, seqK, width, heads);
  T scale = T(1) / std::sqrt(T(h.d));
  std::vector<T> p(h.scratch()), dp(h.scratch());
  std::fill(dk, dk + batch * seqK * width, T(0));
  std::fill(dv, dv + batch * seqK * width, T(0));
  for (int64_t b = 0; b < batch; b += h.chunk) {
    int64_t n = std::min(h.chunk, batch - b);
    int64_t offQ = b * seqQ * width, offK = b * seqK * width;
    for (int64_t r0 = 0; r0 < seqQ; r0 += h.rows) {
      int64_t r1 = std::min(seqQ, r0 + h.rows), m = r1 - r0;
      int64_t keys = blockKeys(limit, r0, r1);
      if (keys == 0) {
        for (int64_t e = 0; e < n; ++e)
          std::fill(dq + offQ + (e * seqQ + r0) * width,
                    dq + offQ + (e * seqQ + r1) * width, T(0));
        continue;
      }
      blockProbabilities<T>(h, n, r0, r1, keys, limit, q + offQ, k + offK,
                            scale, p.data(), nullptr, b);
      const T *dO = dout + offQ + r0 * width;
      // dP = dO V^T;  dV += P^T dO.
      gemm(h.product(n, m, keys, h.d, h.q(), h.kT(), h.scores()), dO, v + offK,
           dp.data());
      gemm(h.product(n, keys, h.d, m, h.scoresT(), h.q(), h.k(), true),
           p.data(), dO, dv + offK);
      // dS = P (dP - rowsum(P dP) + dlse) / sqrt(D) (zero where P is).
      int64_t rows = n * heads * m;
#pragma omp parallel for schedule(static) if (rows * keys > 16384)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t bh = r / m, i = r0 + r % m;
        int64_t at = bh * h.rows * seqK + (r % m) * seqK;
        T *pr = p.data() + at, *dpr = dp.data() + at;
        T dot = 0;
        for (int64_t j = 0; j < keys; ++j)
          dot += pr[j] * dpr[j];
        dot -= dlse[((b + bh / heads) * seqQ + i) * heads + bh % heads];
        for (int64_t j = 0; j < keys; ++j)
          dpr[j] = pr[j] * (dpr[j] - dot) * scale;
      }
      // dQ = dS K;  dK += dS^T Q.
      gemm(h.product(n, m, h.d, keys, h.scores(), h.k(), h.q()), dp.data(),
           k + offK, dq + offQ + r0 * width);
      gemm(h.product(n, keys, h.d, m, h.scoresT(), h.q(), h.k(), true),
           dp.data(), q + offQ + r0 * width, dk + offK);
    }
  }
}

/// The two blocks' weights of one row and head: w = exp(lse_x - lse).
template <typename T>
static void mergeWeights(T la, T lb, T &wa, T &wb, T &lse) {
  T mx = std::max(la, lb);
  if (mx == -std::numeric_limits<T>::infinity()) {
    wa = wb = 0;
    lse = mx;
    return;
  }
  T ea = std::exp(la - mx), eb = std::exp(lb - mx), s = ea + eb;
  wa = ea / s;
  wb = eb / s;
  lse = mx + std::log(s);
}

template <typename T>
void attentionMerge(const T *a, const T *lseA, const T *b, const T *lseB,
                    int64_t rows, int64_t width, int64_t heads, T *out,
                    T *lse) {
  int64_t d = width / heads;
#pragma omp parallel for schedule(static) if (rows * width > 65536)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t hd = 0; hd < heads; ++hd) {
      int64_t at = r * heads + hd, off = r * width + hd * d;
      T wa, wb, l;
      mergeWeights(lseA[at], lseB[at], wa, wb, l);
      for (int64_t e = 0; e < d; ++e)
        out[off + e] = wa * a[off + e] + wb * b[off + e];
      lse[at] = l;
    }
}

template <typename T>
void attentionMergeGrad(const T *a, const T *lseA, const T *b, const T *lseB,
                        const T *dout, const T *dlse, int64_t rows,
                        int64_t width, int64_t heads, T *da, T *dlseA, T *db,
                        T *dlseB) {
  int64_t d = width / heads;
#pragma omp parallel for schedule(static) if (rows * width > 65536)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t hd = 0; hd < heads; ++hd) {
      int64_t at = r * heads + hd, off = r * width + hd * d;
      T wa, wb, l;
      mergeWeights(lseA[at], lseB[at], wa, wb, l);
      // d out / d lse_a = w_a (a - out), likewise for b.
      T sa = 0, sb = 0;
      for (int64_t e = 0; e < d; ++e) {
        T g = dout[off + e], o = wa * a[off + e] + wb * b[off + e];
        sa += g * (a[off + e] - o);
        sb += g * (b[off + e] - o);
        da[off + e] = wa * g;
        db[off + e] = wb * g;
      }
      dlseA[at] = wa * (dlse[at] + sa);
      dlseB[at] = wb * (dlse[at] + sb);
    }
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// log(sum(exp(row))) computed stably.
template <typename T>
static T logSumExp(const T *row, int64_t n) {
  T m = rowMax(row, n);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += fastExp(row[i] - m);
  return m + std::log(sum);
}

/// The loss of a step part: the kept rows' sum over `normalizer` when one
/// is given (> 0; < 0 means no real token anywhere: 0), else their mean
/// (0 when every row is ignored, rather than 0/0).
template <typename T>
static T normalizedLoss(T total, int64_t count, double normalizer) {
  if (normalizer != 0)
    return normalizer > 0 ? T(total / normalizer) : T(0);
  return count ? total / T(count) : T(0);
}

/// The gradient of that loss with respect to each kept row's term.
template <typename T>
static T lossGradScale(T dloss, int64_t count, double normalizer) {
  if (normalizer != 0)
    return normalizer > 0 ? T(dloss / normalizer) : T(0);
  return count ? dloss / T(count) : T(0);
}

/// Rows whose label is kept.
static int64_t keptRows(const int32_t *labels, int64_t rows, bool hasIgnore,
                        int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += !(hasIgnore && labels[r] == ignoreIndex);
  return count;
}

template <typename T>
T crossEntropy(const T *logits, const int32_t *labels, int64_t rows,
               int64_t vocab, bool hasIgnore, int64_t ignoreIndex,
               double normalizer, int64_t &badLabel) {
  badLabel = -1;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels[r];
    if (!(hasIgnore && label == ignoreIndex) && (label < 0 || label >= vocab)) {
      badLabel = r;
      return T(0);
    }
  }
  // Each row's term in parallel, then their sum in row order, so the loss
  // does not depend on the number of threads.
  std::vector<T> terms(rows, T(0));
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels[r];
    if (hasIgnore && label == ignoreIndex)
      continue;
    const T *row = logits + r * vocab;
    T lse;
    if constexpr (std::is_same_v<T, float>) {
      if (!logSumExpAvx512(row, vocab, lse))
        lse = logSumExp(row, vocab);
    } else {
      lse = logSumExp(row, vocab);
    }
    terms[r] = lse - row[label];
  }
  T total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += terms[r];
  return normalizedLoss(total, keptRows(labels, rows, hasIgnore, ignoreIndex),
                        normalizer);
}

template <typename T>
void crossEntropyGrad(const T *logits, const int32_t *labels, T dloss,
                      int64_t rows, int64_t vocab, bool hasIgnore,
                      int64_t ignoreIndex, double normalizer, T *dlogits) {
  T scale = lossGradScale(dloss, keptRows(labels, rows, hasIgnore, ignoreIndex),
                          normalizer);
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    T *drow = dlogits + r * vocab;
    int64_t label = labels[r];
    if ((hasIgnore && label == ignoreIndex) || label < 0 || label >= vocab) {
      std::fill(drow, drow + vocab, T(0));
      continue;
    }
    const T *row = logits + r * vocab;
    if constexpr (std::is_same_v<T, float>) {
      T lse;
      if (logSumExpAvx512(row, vocab, lse) &&
          scaledSoftmaxAvx512(row, vocab, lse, scale, drow)) {
        drow[label] -= scale;
        continue;
      }
    }
    T lse = logSumExp(row, vocab);
    for (int64_t c = 0; c < vocab; ++c)
      drow[c] = fastExp(row[c] - lse) * scale;
    drow[label] -= scale;
  }
}

template <typename T>
void rowMax(const T *x, int64_t rows, int64_t vocab, T *max) {
  for (int64_t r = 0; r < rows; ++r)
    max[r] = rowMax(x + r * vocab, vocab);
}

template <typename T>
void vocabPartials(const T *logits, const T *max, const int32_t *labels,
                   int64_t rows, int64_t vocab, int64_t offset, int64_t valid,
                   T *sumExp, T *target) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = logits + r * vocab;
    T m = max[r], s = 0;
    for (int64_t j = 0; j < valid; ++j)
      s += fastExp(row[j] - m);
    sumExp[r] = s;
    int64_t local = int64_t(labels[r]) - offset;
    target[r] = local >= 0 && local < vocab ? row[local] : T(0);
  }
}

template <typename T>
void vocabPartialsGrad(const T *logits, const T *max, const int32_t *labels,
                       int64_t rows, int64_t vocab, int64_t offset,
                       int64_t valid, const T *dSumExp, const T *dTarget,
                       T *dlogits) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = logits + r * vocab;
    T *drow = dlogits + r * vocab;
    T m = max[r], ds = dSumExp[r];
    for (int64_t j = 0; j < valid; ++j)
      drow[j] = fastExp(row[j] - m) * ds;
    std::fill(drow + valid, drow + vocab, T(0));
    int64_t local = int64_t(labels[r]) - offset;
    if (local >= 0 && local < vocab)
      drow[local] += dTarget[r];
  }
}

template <typename T>
T vocabLoss(const T *max, const T *sumExp, const T *target,
            const int32_t *labels, int64_t rows, bool hasIgnore,
            int64_t ignoreIndex, double normalizer) {
  T total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (hasIgnore && labels[r] == ignoreIndex)
      continue;
    total += std::log(sumExp[r]) + max[r] - target[r];
    ++count;
  }
  return normalizedLoss(total, count, normalizer);
}

template <typename T>
void vocabLossGrad(const T *sumExp, const int32_t *labels, int64_t rows,
                   bool hasIgnore, int64_t ignoreIndex, double normalizer,
                   T dloss, T *dSumExp, T *dTarget) {
  T scale = lossGradScale(dloss, keptRows(labels, rows, hasIgnore, ignoreIndex),
                          normalizer);
  for (int64_t r = 0; r < rows; ++r) {
    bool kept = !(hasIgnore && labels[r] == ignoreIndex);
    dSumExp[r] = kept ? scale / sumExp[r] : T(0);
    dTarget[r] = kept ? -scale : T(0);
  }
}

//===----------------------------------------------------------------------===//
// Reductions, broadcasts and data movement
//===----------------------------------------------------------------------===//

static std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

static int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// For each element of `full` (shape `fullShape`), the index of the element
/// of the reduced tensor it maps to when `dims` are dropped.
template <typename F>
static void forEachReduced(const std::vector<int64_t> &fullShape,
                           const std::vector<int64_t> &dims, F f) {
  size_t rank = fullShape.size();
  std::vector<bool> dropped(rank, false);
  for (int64_t d : dims)
    dropped[d] = true;
  std::vector<int64_t> reducedShape;
  for (size_t d = 0; d < rank; ++d)
    if (!dropped[d])
      reducedShape.push_back(fullShape[d]);
  std::vector<int64_t> reducedStrides = stridesOf(reducedShape);
  // The stride in the reduced tensor of each full dimension (0 if dropped).
  std::vector<int64_t> map(rank, 0);
  for (size_t d = 0, r = 0; d < rank; ++d)
    if (!dropped[d])
      map[d] = reducedStrides[r++];
  std::vector<int64_t> index(rank, 0);
  int64_t n = product(fullShape), reduced = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, reduced);
    // Advance the multi-index.
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      reduced += map[d];
      if (++index[d] < fullShape[d])
        break;
      reduced -= map[d] * fullShape[d];
      index[d] = 0;
    }
  }
}

template <typename T>
void reduceSum(const T *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &dims, T *y) {
  int64_t outN = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      outN *= shape[d];
  std::fill(y, y + outN, T(0));
  if (product(shape) == 0)
    return; // an empty sum (a reduced dimension of size 0)
  // Fast paths: leading dimensions (bias gradients) or trailing ones, as
  // rows x columns.
  int64_t rank = static_cast<int64_t>(shape.size()), k = dims.size();
  bool leading = true, trailing = true;
  for (int64_t i = 0; i < k; ++i) {
    leading &= dims[i] == i;
    trailing &= dims[i] == rank - k + i;
  }
  if (k > 0 && (leading || trailing)) {
    int64_t rows = 1;
    for (int64_t d = 0; d < (leading ? k : rank - k); ++d)
      rows *= shape[d];
    int64_t cols = rows ? product(shape) / rows : 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T *row = x + r * cols;
      if (leading) {
        for (int64_t c = 0; c < cols; ++c)
          y[c] += row[c];
      } else {
        T sum = 0;
        for (int64_t c = 0; c < cols; ++c)
          sum += row[c];
        y[r] = sum;
      }
    }
    return;
  }
  forEachReduced(shape, dims, [&](int64_t i, int64_t r) { y[r] += x[i]; });
}

template <typename T>
void broadcast(const T *x, const std::vector<int64_t> &outShape,
               const std::vector<int64_t> &dims, T *y) {
  forEachReduced(outShape, dims, [&](int64_t i, int64_t r) { y[i] = x[r]; });
}

void transpose(const void *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm, int64_t elementSize, void *y) {
  size_t rank = shape.size();
  std::vector<int64_t> inStrides = stridesOf(shape), outShape(rank);
  for (size_t i = 0; i < rank; ++i)
    outShape[i] = shape[perm[i]];
  std::vector<int64_t> index(rank, 0);
  int64_t n = product(shape), src = 0;
  auto *in = static_cast<const char *>(x);
  auto *out = static_cast<char *>(y);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * elementSize, in + src * elementSize, elementSize);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      src += inStrides[perm[d]];
      if (++index[d] < outShape[d])
        break;
      src -= inStrides[perm[d]] * outShape[d];
      index[d] = 0;
    }
  }
}

void sliceAlongAxis(const std::vector<const void *> &inputs,
                    const std::vector<void *> &outputs,
                    const std::vector<int64_t> &shape, int64_t axis,
                    const std::vector<int64_t> &sizes, int64_t elementSize,
                    bool concat) {
  int64_t outer = 1, inner = elementSize;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t full = shape[axis];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t offset = 0;
    for (size_t p = 0; p < sizes.size(); ++p) {
      int64_t bytes = sizes[p] * inner;
      if (bytes == 0) // an empty piece: nothing to copy, maybe no buffer
        continue;
      if (concat)
        std::memcpy(static_cast<char *>(outputs[0]) +
                        (o * full + offset) * inner,
                    static_cast<const char *>(inputs[p]) + o * bytes, bytes);
      else
        std::memcpy(static_cast<char *>(outputs[p]) + o * bytes,
                    static_cast<const char *>(inputs[0]) +
                        (o * full + offset) * inner,
                    bytes);
      offset += sizes[p];
    }
  }
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

template <typename T>
double globalNorm(const std::vector<std::pair<const T *, int64_t>> &tensors) {
  // Fixed chunks of every tensor, summed in double across the threads,
  // then added in order: the result does not depend on the number of
  // threads, and GPT-2's 124M squares take one pass of the memory bus.
  constexpr int64_t chunk = int64_t(1) << 16;
  std::vector<std::pair<const T *, int64_t>> pieces;
  for (auto [data, n] : tensors)
    for (int64_t i = 0; i < n; i += chunk)
      pieces.push_back({data + i, std::min(chunk, n - i)});
  std::vector<double> sums(pieces.size(), 0.0);
  int64_t count = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t p = 0; p < count; ++p) {
    const T *data = pieces[p].first;
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < pieces[p].second; ++i)
      sum += static_cast<double>(data[i]) * data[i];
    sums[p] = sum;
  }
  double sum = 0;
  for (double x : sums)
    sum += x;
  return std::sqrt(sum);
}

double clipScale(double norm, double maxNorm) {
  if (maxNorm <= 0)
    return 1.0;
  return std::min(1.0, maxNorm / (norm + 1e-6));
}

LossScaleState updateLossScale(LossScaleState state, bool found, double growth,
                               double backoff, int64_t interval) {
  if (found)
    return {static_cast<float>(state.scale * backoff), 0, state.updates};
  LossScaleState next{state.scale, state.good + 1, state.updates + 1};
  if (next.good >= interval) {
    float grown = static_cast<float>(state.scale * growth);
    if (std::isfinite(grown))
      next.scale = grown;
    next.good = 0;
  }
  return next;
}

double learningRate(int64_t step, double peak, double min, int64_t warmup,
                    int64_t total, int decay) {
  if (step < warmup)
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  double span = static_cast<double>(total - warmup);
  double progress = span > 0 ? static_cast<double>(step - warmup) / span : 1.0;
  progress = std::clamp(progress, 0.0, 1.0);
  double coefficient = decay == 0   ? 0.5 * (1.0 + std::cos(M_PI * progress))
                       : decay == 1 ? 1.0 - progress
                                    : 1.0;
  return min + coefficient * (peak - min);
}

template <typename T>
void adamw(const T *pIn, const T *gIn, const T *mIn, const T *vIn, int64_t n,
           double lr, int64_t step, double scale, double beta1, double beta2,
           double eps, double weightDecay, T *newPOut, T *newMOut, T *newVOut) {
  // The executor never passes overlapping buffers (outputs are fresh SSA
  // values); saying so lets the loop vectorize.
  const T *__restrict p = pIn, *__restrict g = gIn, *__restrict m = mIn,
                      *__restrict v = vIn;
  T *__restrict newP = newPOut, *__restrict newM = newMOut,
                *__restrict newV = newVOut;
  int64_t t = step + 1;
  T stepSize = static_cast<T>(lr / (1.0 - std::pow(beta1, t)));
  T bc2Sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t)));
  T decay = static_cast<T>(1.0 - lr * weightDecay);
  T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  T s = static_cast<T>(scale), e = static_cast<T>(eps);
  // GCC 12 leaves this loop scalar without the pragma ("no vectype" for
  // the loads), which made AdamW latency-bound on its divisions and square
  // roots: 0.21 s for GPT-2 small's 124M parameters instead of 0.06 s at
  // memory speed. Every iteration touches only index i (also in place).
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T grad = g[i] * s;
    T mi = m[i] + (T(1) - b1) * (grad - m[i]);
    T vi = v[i] * b2 + (T(1) - b2) * grad * grad;
    T denom = std::sqrt(vi) / bc2Sqrt + e;
    newP[i] = p[i] * decay - stepSize * mi / denom;
    newM[i] = mi;
    newV[i] = vi;
  }
}

static int threadCount = 0; // 0: every core

// One OpenMP pool runs oneDNN's GEMMs and the runtime's own loops.
void setNumThreads(int threads) {
  threadCount = std::max(threads, 0);
  omp_set_num_threads(numThreads());
}

int numThreads() {
  if (threadCount)
    return threadCount;
  // OpenMP's own default where the user set it; else the process's cores
  // (its affinity mask and cgroup quota, Cores.h).
  static const int initial = [] {
    // At most the cores: libgomp cannot start 100,000 threads.
    int cores = readCoreBudget().cores();
    if (const char *omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
      int threads = std::clamp(omp_get_max_threads(), 1, cores);
      omp_set_num_threads(threads);
      return threads;
    }
    return cores;
  }();
  return initial;
}

void multiAdamW(const std::vector<AdamWTensor> &tensors, double lr,
                int64_t step, double scale, double beta1, double beta2,
                double eps, int64_t minParallel) {
  std::vector<int64_t> start(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i)
    start[i + 1] = start[i] + tensors[i].n;
  int64_t total = start.back();
#pragma omp parallel if (total >= minParallel)
  {
    int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (total + threads - 1) / threads;
    int64_t begin = std::min(total, id * chunk),
            end = std::min(total, begin + chunk);
    // The tensors overlapping [begin, end), each from its first element in
    // the range to its last.
    size_t i =
        std::upper_bound(start.begin(), start.end(), begin) - start.begin() - 1;
    for (; i < tensors.size() && start[i] < end; ++i) {
      const AdamWTensor &t = tensors[i];
      int64_t from = std::max(begin, start[i]) - start[i];
      int64_t to = std::min(end, start[i + 1]) - start[i];
      if (to > from)
        adamw(t.p + from, t.g + from, t.m + from, t.v + from, to - from, lr,
              step, scale, beta1, beta2, eps, t.weightDecay, t.newP + from,
              t.newM + from, t.newV + from);
    }
  }
}

//===----------------------------------------------------------------------===//
// Instantiations
//===----------------------------------------------------------------------===//

#define GPTC_INSTANTIATE(T)                                                    \
  template int64_t embedding<T>(const int32_t *, int64_t, const T *, int64_t,  \
                                int64_t, T *, bool, int64_t);                  \
  template int64_t embeddingGrad<T>(const int32_t *, int64_t, const T *,       \
                                    int64_t, int64_t, T *, bool, int64_t);     \
  template void rowMax<T>(const T *, int64_t, int64_t, T *);                   \
  template void vocabPartials<T>(const T *, const T *, const int32_t *,        \
                                 int64_t, int64_t, int64_t, int64_t, T *,      \
                                 T *);                                         \
  template void vocabPartialsGrad<T>(const T *, const T *, const int32_t *,    \
                                     int64_t, int64_t, int64_t, int64_t,       \
                                     const T *, const T *, T *);               \
  template T vocabLoss<T>(const T *, const T *, const T *, const int32_t *,    \
                          int64_t, bool, int64_t, double);                     \
  template void vocabLossGrad<T>(const T *, const int32_t *, int64_t, bool,    \
                                 int64_t, double, T, T *, T *);                \
  template void linear<T>(const T *, const T *, const T *, int64_t, int64_t,   \
                          int64_t, T *);                                       \
  template void matmul<T>(const T *, const T *, int64_t, int64_t, int64_t,     \
                          int64_t, bool, bool, T *);                           \
  template void layerNorm<T>(const T *, const T *, const T *, int64_t,         \
                             int64_t, double, T *);                            \
  template void layerNormGrad<T>(const T *, const T *, const T *, int64_t,     \
                                 int64_t, double, T *, T *, T *);              \
  template void gelu<T>(const T *, int64_t, T *);                              \
  template void unary<T>(UnaryFunction, const T *, int64_t, T *);              \
  template void binary<T>(BinaryFunction, const T *, const T *, int64_t, T *); \
  template void geluGrad<T>(const T *, const T *, int64_t, T *);               \
  template void geluExact<T>(const T *, int64_t, T *);                         \
  template void geluExactGrad<T>(const T *, const T *, int64_t, T *);          \
  template void softmax<T>(const T *, int64_t, int64_t, T *);                  \
  template void softmaxGrad<T>(const T *, const T *, int64_t, int64_t, T *);   \
  template void add<T>(const T *, const T *, int64_t, T *);                    \
  template void causalAttention<T>(const T *, const T *, const T *, int64_t,   \
                                   int64_t, int64_t, int64_t, T *);            \
  template void causalAttentionGrad<T>(const T *, const T *, const T *,        \
                                       const T *, int64_t, int64_t, int64_t,   \
                                       int64_t, T *, T *, T *);                \
  template void positionedAttention<T>(const T *, const T *, const T *,        \
                                       const int32_t *, int64_t, int64_t,      \
                                       int64_t, int64_t, int64_t, T *);        \
  template void positionedAttentionGrad<T>(                                    \
      const T *, const T *, const T *, const T *, const int32_t *, int64_t,    \
      int64_t, int64_t, int64_t, int64_t, T *, T *, T *);                      \
  template void blockAttention<T>(                                             \
      const T *, const T *, const T *, const int32_t *, const int32_t *,       \
      int64_t, int64_t, int64_t, int64_t, int64_t, T *, T *);                  \
  template void blockAttentionGrad<T>(                                         \
      const T *, const T *, const T *, const int32_t *, const int32_t *,       \
      const T *, const T *, int64_t, int64_t, int64_t, int64_t, int64_t, T *,  \
      T *, T *);                                                               \
  template void attentionMerge<T>(const T *, const T *, const T *, const T *,  \
                                  int64_t, int64_t, int64_t, T *, T *);        \
  template void attentionMergeGrad<T>(                                         \
      const T *, const T *, const T *, const T *, const T *, const T *,        \
      int64_t, int64_t, int64_t, T *, T *, T *, T *);                          \
  template T crossEntropy<T>(const T *, const int32_t *, int64_t, int64_t,     \
                             bool, int64_t, double, int64_t &);                \
  template void crossEntropyGrad<T>(const T *, const int32_t *, T, int64_t,    \
                                    int64_t, bool, int64_t, double, T *);      \
  template void reduceSum<T>(const T *, const std::vector<int64_t> &,          \
                             const std::vector<int64_t> &, T *);               \
  template void broadcast<T>(const T *, const std::vector<int64_t> &,          \
                             const std::vector<int64_t> &, T *);               \
  template double globalNorm<T>(                                               \
      const std::vector<std::pair<const T *, int64_t>> &);                     \
  template void adamw<T>(const T *, const T *, const T *, const T *, int64_t,  \
                         double, int64_t, double, double, double, double,      \
                         double, T *, T *, T *);

GPTC_INSTANTIATE(float)
GPTC_INSTANTIATE(double)

// Mixed precision's bf16 GEMMs.
template void linear<BFloat16>(const BFloat16 *, const BFloat16 *,
                               const BFloat16 *, int64_t, int64_t, int64_t,
                               BFloat16 *);
template void matmul<BFloat16>(const BFloat16 *, const BFloat16 *, int64_t,
                               int64_t, int64_t, int64_t, bool, bool,
                               BFloat16 *);

} // namespace gptc::cpu
