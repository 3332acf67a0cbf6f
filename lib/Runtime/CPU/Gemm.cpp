//===- Gemm.cpp - Matrix products of gptc's CPU runtime --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// float products run on oneDNN's matmul primitive (bf16 ones too, widened
// to float where this CPU's oneDNN has no bf16 matmul: before AVX-512).
// Building a primitive costs far more than running a small one, so each
// distinct problem (its shape, strides, accumulation and bias) builds one on
// first use and keeps it. oneDNN threads with OpenMP, the same pool the
// runtime's own loops use, so the two never oversubscribe the cores.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/ProcessMemory.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace gptc::cpu {

namespace {
using Key = std::array<int64_t, 20>;

Key keyOf(const GemmProblem &p) {
  return {p.batch0,   p.batch1,   p.m,          p.n,        p.k,
          p.a.batch0, p.a.batch1, p.a.row,      p.a.col,    p.b.batch0,
          p.b.batch1, p.b.row,    p.b.col,      p.c.batch0, p.c.batch1,
          p.c.row,    p.c.col,    p.accumulate, p.bias,     p.bf16};
}

/// The engine, the stream and the primitives built so far.
struct Library {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, bias;
    std::string implementation;
  };
  std::map<Key, Entry> primitives;

  static Library &get() {
    static Library library;
    return library;
  }

  Entry &lookup(const GemmProblem &p) {
    std::lock_guard<std::mutex> lock(mutex);
    Key key = keyOf(p);
    auto it = primitives.find(key);
    if (it != primitives.end())
      return it->second;
    using md = dnnl::memory::desc;
    using dt = dnnl::memory::data_type;
    dt type = p.bf16 ? dt::bf16 : dt::f32;
    auto view = [type](int64_t b0, int64_t b1, int64_t rows, int64_t cols,
                       MatrixStrides s) {
      // A batch dimension of extent 1 gets the stride a dense layout
      // would give it: oneDNN takes only its plain and transposed layouts
      // to its fast kernels, and a zero stride is neither.
      int64_t span = std::max(rows * s.row, cols * s.col);
      if (b1 == 1)
        s.batch1 = span;
      if (b0 == 1)
        s.batch0 = std::max(span, b1 * s.batch1);
      return md({b0, b1, rows, cols}, type, {s.batch0, s.batch1, s.row, s.col});
    };
    Entry e;
    e.a = view(p.batch0, p.batch1, p.m, p.k, p.a);
    e.b = view(p.batch0, p.batch1, p.k, p.n, p.b);
    e.c = view(p.batch0, p.batch1, p.m, p.n, p.c);
    if (p.bias)
      e.bias = md({1, 1, 1, p.n}, type, {p.n, p.n, p.n, 1});
    dnnl::primitive_attr attr;
    if (p.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::desc desc = p.bias ? dnnl::matmul::desc(e.a, e.b, e.bias, e.c)
                                     : dnnl::matmul::desc(e.a, e.b, e.c);
    dnnl::matmul::primitive_desc pd(desc, attr, engine);
    e.implementation = pd.impl_info_str();
    e.primitive = dnnl::matmul(pd);
    return primitives.emplace(key, std::move(e)).first->second;
  }
};
} // namespace

/// Runs `p` on oneDNN; `Element` is float or BFloat16.
template <typename Element>
static void runPrimitive(const GemmProblem &p, const Element *a,
                         const Element *b, Element *c, const Element *bias) {
  if (p.m == 0 || p.n == 0 || p.batch0 == 0 || p.batch1 == 0)
    return;
  if (p.k == 0) {
    // oneDNN rejects empty reductions; the product is zero.
    if (!p.accumulate)
      for (int64_t i = 0; i < p.batch0; ++i)
        for (int64_t j = 0; j < p.batch1; ++j)
          for (int64_t r = 0; r < p.m; ++r)
            for (int64_t q = 0; q < p.n; ++q)
              c[i * p.c.batch0 + j * p.c.batch1 + r * p.c.row + q * p.c.col] =
                  p.bias ? bias[q] : Element{};
    return;
  }
  Library &lib = Library::get();
  Library::Entry &e = lib.lookup(p);
  auto mem = [&](const dnnl::memory::desc &d, const Element *ptr) {
    return dnnl::memory(d, lib.engine, const_cast<Element *>(ptr));
  };
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, mem(e.a, a)},
                                                {DNNL_ARG_WEIGHTS, mem(e.b, b)},
                                                {DNNL_ARG_DST, mem(e.c, c)}};
  if (p.bias)
    args.emplace(DNNL_ARG_BIAS, mem(e.bias, bias));
  e.primitive.execute(lib.stream, args);
  lib.stream.wait();
}

void gemm(const GemmProblem &p, const float *a, const float *b, float *c,
          const float *bias) {
  GemmProblem q = p;
  q.bf16 = false;
  runPrimitive(q, a, b, c, bias);
}

/// Whether this CPU's oneDNN has a bf16 matmul (oneDNN 2.x needs AVX-512;
/// an AVX2 machine has none, and building the primitive throws).
static bool nativeBFloat16() {
  static const bool native = [] {
    try {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      using md = dnnl::memory::desc;
      using dt = dnnl::memory::data_type;
      using tag = dnnl::memory::format_tag;
      md a({1, 1, 16, 16}, dt::bf16, tag::abcd);
      dnnl::matmul::desc desc(a, a, a);
      dnnl::matmul::primitive_desc pd(desc, engine);
      return true;
    } catch (const dnnl::error &) {
      return false;
    }
  }();
  return native;
}

/// The float problem a bf16 one runs as without a native bf16 matmul: its
/// operands converted to dense float buffers.
static GemmProblem denseFloatProblem(const GemmProblem &p) {
  GemmProblem q = p;
  q.bf16 = false;
  q.a = {p.batch1 * p.m * p.k, p.m * p.k, p.k, 1};
  q.b = {p.batch1 * p.k * p.n, p.k * p.n, p.n, 1};
  q.c = {p.batch1 * p.m * p.n, p.m * p.n, p.n, 1};
  return q;
}

void gemm(const GemmProblem &p, const BFloat16 *a, const BFloat16 *b,
          BFloat16 *c, const BFloat16 *bias) {
  GemmProblem q = p;
  q.bf16 = true;
  if (nativeBFloat16())
    return runPrimitive(q, a, b, c, bias);
  gemmWidened(p, a, b, c, bias);
}

void gemmWidened(const GemmProblem &p, const BFloat16 *a, const BFloat16 *b,
                 BFloat16 *c, const BFloat16 *bias) {
  GemmProblem f = denseFloatProblem(p);
  std::vector<float> fa(p.batch0 * f.a.batch0), fb(p.batch0 * f.b.batch0),
      fc(p.batch0 * f.c.batch0), fbias(p.bias ? p.n : 0);
  for (int64_t i = 0; i < p.batch0; ++i)
    for (int64_t j = 0; j < p.batch1; ++j) {
      auto widen = [&](const BFloat16 *src, MatrixStrides s, float *dst,
                       MatrixStrides d, int64_t rows, int64_t cols) {
        src += i * s.batch0 + j * s.batch1;
        dst += i * d.batch0 + j * d.batch1;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t x = 0; x < cols; ++x)
            dst[r * d.row + x * d.col] = toFloat(src[r * s.row + x * s.col]);
      };
      widen(a, p.a, fa.data(), f.a, p.m, p.k);
      widen(b, p.b, fb.data(), f.b, p.k, p.n);
      if (p.accumulate)
        widen(c, p.c, fc.data(), f.c, p.m, p.n);
    }
  for (int64_t x = 0; x < static_cast<int64_t>(fbias.size()); ++x)
    fbias[x] = toFloat(bias[x]);
  runPrimitive(f, fa.data(), fb.data(), fc.data(),
               p.bias ? fbias.data() : nullptr);
  for (int64_t i = 0; i < p.batch0; ++i)
    for (int64_t j = 0; j < p.batch1; ++j) {
      BFloat16 *dst = c + i * p.c.batch0 + j * p.c.batch1;
      const float *src = fc.data() + i * f.c.batch0 + j * f.c.batch1;
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t x = 0; x < p.n; ++x)
          dst[r * p.c.row + x * p.c.col] = toBFloat16(src[r * f.c.row + x]);
    }
}

void gemm(const GemmProblem &p, const double *a, const double *b, double *c,
          const double *bias) {
  // The reference path: plain loops, accumulated in double.
  for (int64_t i = 0; i < p.batch0; ++i)
    for (int64_t j = 0; j < p.batch1; ++j) {
      const double *ab = a + i * p.a.batch0 + j * p.a.batch1;
      const double *bb = b + i * p.b.batch0 + j * p.b.batch1;
      double *cb = c + i * p.c.batch0 + j * p.c.batch1;
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t q = 0; q < p.n; ++q) {
          double sum = p.bias ? bias[q] : 0.0;
          for (int64_t x = 0; x < p.k; ++x)
            sum +=
                ab[r * p.a.row + x * p.a.col] * bb[x * p.b.row + q * p.b.col];
          double &out = cb[r * p.c.row + q * p.c.col];
          out = p.accumulate ? out + sum : sum;
        }
    }
}

GemmProblem linearProblem(int64_t m, int64_t n, int64_t k, bool bias) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {0, 0, k, 1};
  p.b = {0, 0, 1, k};
  p.c = {0, 0, n, 1};
  p.bias = bias;
  return p;
}

GemmProblem matmulProblem(int64_t batch, int64_t m, int64_t n, int64_t k,
                          bool ta, bool tb) {
  GemmProblem p;
  p.batch1 = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = ta ? MatrixStrides{0, m * k, 1, m} : MatrixStrides{0, m * k, k, 1};
  p.b = tb ? MatrixStrides{0, k * n, 1, k} : MatrixStrides{0, k * n, n, 1};
  p.c = {0, m * n, n, 1};
  return p;
}

int64_t gemmPrimitiveBytes(const std::vector<GemmProblem> &problems) {
  Library &lib = Library::get();
  int64_t total = 0;
  for (const GemmProblem &p : problems) {
    // Problems the runtime runs without a primitive, and products no
    // machine holds (oneDNN's sizes are 32-bit inside; a description with
    // a vocabulary of 2^32 must get its summary, not a crash).
    if (p.m == 0 || p.n == 0 || p.k == 0 || p.batch0 == 0 || p.batch1 == 0)
      continue;
    constexpr int64_t kLimit = std::numeric_limits<int32_t>::max();
    int64_t batch = p.batch0 * p.batch1;
    if (std::max({p.m, p.n, p.k, batch}) > kLimit ||
        std::max({p.m * p.k, p.k * p.n, p.m * p.n}) > kLimit / batch)
      continue;
    GemmProblem q = p.bf16 && !nativeBFloat16() ? denseFloatProblem(p) : p;
    {
      std::lock_guard<std::mutex> lock(lib.mutex);
      if (lib.primitives.count(keyOf(q)))
        continue;
    }
    int64_t before = runtime::heapBytesInUse();
    lib.lookup(q);
    total += std::max<int64_t>(0, runtime::heapBytesInUse() - before);
  }
  return total;
}

std::string gemmImplementation(const GemmProblem &problem) {
  if (problem.bf16 && !nativeBFloat16())
    return Library::get().lookup(denseFloatProblem(problem)).implementation +
           " (bf16 widened to f32: this CPU's oneDNN has no bf16 matmul)";
  return Library::get().lookup(problem).implementation;
}

int64_t gemmPrimitivesBuilt() {
  Library &lib = Library::get();
  std::lock_guard<std::mutex> lock(lib.mutex);
  return static_cast<int64_t>(lib.primitives.size());
}

} // namespace gptc::cpu
