//===- Dispatch.cpp - The CPU executor's kernels by op ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Executor::runKernel: each kernel of the artifact to its implementation
// (lib/Runtime/CPU/Kernels.cpp, Gemm.cpp, Avx512.cpp) on its element type,
// after checking the element counts the implementation relies on. Generated
// kernels, accumulation and collectives have their own files.
//
//===----------------------------------------------------------------------===//

#include "KernelCall.h"

#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

using namespace gptc;
using namespace gptc::runtime;
using detail::Call;
using program::DType;
using program::Kernel;
using program::OpKind;

namespace {
/// The normalizer input of a loss kernel (a scalar float): its value, -1
/// when it is not positive (no real token anywhere), 0 without one.
static bool readNormalizer(Call &c, const Tensor *n, double &normalizer) {
  normalizer = 0;
  if (!n)
    return true;
  if (!c.expect(n->numElements() == 1 &&
                    (n->dtype == program::F32 || n->dtype == program::F64),
                "expects a scalar float normalizer"))
    return false;
  normalizer =
      n->dtype == program::F32 ? n->data<float>()[0] : n->data<double>()[0];
  if (!(normalizer > 0))
    normalizer = -1;
  return true;
}

template <typename T>
bool isType(const Tensor &t) {
  if constexpr (std::is_same_v<T, cpu::BFloat16>)
    return t.dtype == program::BF16;
  else if constexpr (std::is_same_v<T, cpu::Half>)
    return t.dtype == program::F16;
  else
    return t.dtype == (std::is_same_v<T, float> ? program::F32 : program::F64);
}

/// Checks that `dims` are increasing dimensions of `full` and that
/// `reduced` has the elements left once they are summed; sets `n` to that
/// count.
static bool reducedElements(Call &c, const Tensor &full,
                            const std::vector<int64_t> &dims,
                            const Tensor &reduced, int64_t &n) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(full.shape.size()) ||
        (i && dims[i] <= dims[i - 1]))
      return c.fail("invalid dimensions");
  // The kept dimensions' product (a reduced dimension of size 0, an empty
  // sum, still leaves the others).
  n = 1;
  for (size_t d = 0; d < full.shape.size(); ++d)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) ==
        dims.end())
      n *= full.shape[d];
  return c.expect(n == reduced.numElements(), "operand shapes do not match");
}

/// LINEAR and MATMUL for element type T (float, double or bf16).
template <typename T>
static bool runGemm(Call &c) {
  using namespace gptc::cpu;
  auto &in = c.in;
  auto &out = c.out;
  if (c.kernel.op() == program::LINEAR) {
    const Tensor &x = *in[0], &w = *in[1];
    const Tensor *b = in.size() > 2 ? in[2] : nullptr;
    int64_t kk = c.lastDim(x);
    if (!c.expect(w.shape.size() == 2 && w.shape[1] == kk && kk > 0 &&
                      (!b || b->numElements() == w.shape[0]) &&
                      out[0]->numElements() ==
                          x.numElements() / kk * w.shape[0],
                  "operand shapes do not match"))
      return false;
    linear(x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr,
           x.numElements() / kk, w.shape[0], kk, out[0]->data<T>());
    return true;
  }
  const Tensor &a = *in[0], &b = *in[1];
  size_t r = a.shape.size();
  if (!c.expect(r >= 2 && b.shape.size() == r, "operand shapes do not match"))
    return false;
  bool ta = c.kernel.matmul().transpose_lhs(),
       tb = c.kernel.matmul().transpose_rhs();
  int64_t m = ta ? a.shape[r - 1] : a.shape[r - 2];
  int64_t kk = ta ? a.shape[r - 2] : a.shape[r - 1];
  int64_t n = tb ? b.shape[r - 2] : b.shape[r - 1];
  int64_t batch = m * kk != 0 ? a.numElements() / (m * kk) : 0;
  if (!c.expect(b.numElements() == batch * kk * n &&
                    out[0]->numElements() == batch * m * n,
                "operand shapes do not match"))
    return false;
  matmul(a.data<T>(), b.data<T>(), batch, m, n, kk, ta, tb, out[0]->data<T>());
  return true;
}

/// One element converted: rounded to nearest even into bf16 and f16,
/// exactly out of them, static_cast between f32 and f64.
template <typename To, typename From>
static To elementCast(From x) {
  if constexpr (std::is_same_v<To, cpu::BFloat16>)
    return cpu::toBFloat16(x);
  else if constexpr (std::is_same_v<To, cpu::Half>)
    return cpu::toHalf(x);
  else if constexpr (std::is_same_v<From, cpu::BFloat16> ||
                     std::is_same_v<From, cpu::Half>)
    return static_cast<To>(cpu::toFloat(x));
  else
    return static_cast<To>(x);
}

/// `in` converted elementwise into `out` (same element count).
template <typename From, typename To>
static void convert(const Tensor &in, Tensor &out) {
  const From *src = in.data<From>();
  To *dst = out.data<To>();
  int64_t n = in.numElements();
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = elementCast<To>(src[i]);
}

/// Sums the 16-bit `x` over `dims` into `y`, in float.
template <typename Low>
static bool reduceSumLow(Call &c, const Tensor &x, Tensor &y,
                         const std::vector<int64_t> &dims) {
  int64_t n;
  if (!reducedElements(c, x, dims, y, n))
    return false;
  const Low *in = x.data<Low>();
  Low *res = y.data<Low>();
  // The bias gradient's case, a sum over the leading dimensions: rows in
  // order, blocks of columns across the threads, in float.
  bool leading = true;
  for (size_t i = 0; i < dims.size(); ++i)
    leading &= dims[i] == static_cast<int64_t>(i);
  auto narrow = [](float f) {
    if constexpr (std::is_same_v<Low, cpu::BFloat16>)
      return cpu::toBFloat16(f);
    else
      return cpu::toHalf(f);
  };
  if (leading && n > 0) {
    int64_t rows = x.numElements() / n;
    constexpr int64_t block = 64;
    int64_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (x.numElements() >= 65536)
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t c0 = b * block, c1 = std::min(n, c0 + block);
      float acc[block] = {};
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = c0; col < c1; ++col)
          acc[col - c0] += cpu::toFloat(in[r * n + col]);
      for (int64_t col = c0; col < c1; ++col)
        res[col] = narrow(acc[col - c0]);
    }
    return true;
  }
  std::vector<float> wide(x.numElements()), sum(y.numElements());
  for (int64_t i = 0, e = x.numElements(); i < e; ++i)
    wide[i] = cpu::toFloat(in[i]);
  cpu::reduceSum(wide.data(), x.shape, dims, sum.data());
  for (int64_t i = 0, e = y.numElements(); i < e; ++i)
    res[i] = narrow(sum[i]);
  return true;
}

template <typename T>
bool runFloat(Call &c);

/// Attention's positions (its last input, integers), which 16-bit kernels
/// read as they are.
static bool isAttentionPositions(const Call &c, const Tensor *t) {
  program::OpKind op = c.kernel.op();
  bool grad = op == program::CAUSAL_ATTENTION_GRAD;
  return (op == program::CAUSAL_ATTENTION || grad) &&
         c.in.size() == (grad ? 5u : 4u) && t == c.in.back() &&
         t->dtype == program::I32;
}

/// A kernel on 16-bit operands run by `run` in fp32: the bf16 and fp16
/// operands widened exactly, the others (attention's positions, a ring
/// step's fp32 gradients) as they are; the 16-bit results rounded to
/// nearest even, the others written directly. The fp32 copies live in
/// scratch the thread keeps from call to call (a fresh allocation each
/// time cost page faults on every step).
static bool runWidened(Call &c, bool (*run)(Call &)) {
  thread_local std::vector<float> scratch;
  auto low = [](const Tensor *t) {
    return t->dtype == program::BF16 || t->dtype == program::F16;
  };
  size_t floats = 0;
  for (const Tensor *t : c.in)
    floats += low(t) ? static_cast<size_t>(t->numElements()) : 0;
  for (const Tensor *t : c.out)
    floats += low(t) ? static_cast<size_t>(t->numElements()) : 0;
  if (scratch.size() < floats)
    scratch.resize(floats);
  std::byte *next = reinterpret_cast<std::byte *>(scratch.data());
  std::vector<Tensor> wide;
  wide.reserve(c.in.size() + c.out.size());
  auto view = [&](const Tensor &like) {
    wide.push_back(Tensor::view(program::F32, like.shape, next));
    next += like.numElements() * sizeof(float);
    return &wide.back();
  };
  Call f32{{}, {}, c.kernel, c.error};
  for (const Tensor *t : c.in) {
    if (!low(t)) {
      f32.in.push_back(t);
      continue;
    }
    Tensor *w = view(*t);
    if (t->dtype == program::BF16)
      convert<cpu::BFloat16, float>(*t, *w);
    else
      convert<cpu::Half, float>(*t, *w);
    f32.in.push_back(w);
  }
  for (Tensor *t : c.out)
    f32.out.push_back(low(t) ? view(*t) : t);
  if (!run(f32))
    return false;
  for (size_t i = 0; i < c.out.size(); ++i) {
    if (c.out[i]->dtype == program::BF16)
      convert<float, cpu::BFloat16>(*f32.out[i], *c.out[i]);
    else if (c.out[i]->dtype == program::F16)
      convert<float, cpu::Half>(*f32.out[i], *c.out[i]);
  }
  return true;
}

/// The bf16 kernels of mixed precision: the GEMMs (bf16 operands, fp32
/// accumulation), the bias gradient's row sum (accumulated in float), and
/// attention (its fp32 kernels on the widened operands, the results
/// rounded to bf16: the GPU's tensor cores round the probabilities to
/// bf16 as well, so the two agree to bf16's precision, not bit for bit).
static bool runBFloat16(Call &c) {
  using cpu::BFloat16;
  for (const Tensor *t : c.in)
    if (t->dtype != program::BF16 && !isAttentionPositions(c, t))
      return c.fail("mixes element types");
  switch (c.kernel.op()) {
  case program::LINEAR:
  case program::MATMUL:
    return runGemm<BFloat16>(c);
  case program::REDUCE_SUM:
    return reduceSumLow<BFloat16>(c, *c.in[0], *c.out[0], c.dims());
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD:
    return runWidened(c, runFloat<float>);
  default:
    return c.fail("has no bf16 kernel (mixed precision runs only GEMMs, "
                  "their bias sums and attention in bf16)");
  }
}

/// The fp16 kernels of mixed precision. oneDNN has fp16 matrix products
/// only on CPUs with AVX512-FP16, so the GEMM widens its operands to fp32
/// (exactly), multiplies in fp32 and rounds the result to fp16: fp16
/// numerics (fp16 operands and result, fp32 accumulation) at fp32 speed.
/// fp16 is the GPU's mixed precision; on the CPU bf16 is the fast one.
static bool runHalf(Call &c) {
  for (const Tensor *t : c.in)
    if (t->dtype != program::F16 && !isAttentionPositions(c, t))
      return c.fail("mixes element types");
  switch (c.kernel.op()) {
  case program::LINEAR:
  case program::MATMUL:
    return runWidened(c, runGemm<float>);
  case program::REDUCE_SUM:
    return reduceSumLow<cpu::Half>(c, *c.in[0], *c.out[0], c.dims());
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD:
    return runWidened(c, runFloat<float>);
  default:
    return c.fail("has no fp16 kernel (mixed precision runs only GEMMs, "
                  "their bias sums and attention in fp16)");
  }
}

//===----------------------------------------------------------------------===//
// GEMMs with epilogues (gptc.fused_gemm)
//===----------------------------------------------------------------------===//

/// `y = f(a [, b])` elementwise in float for T = float, double or a 16-bit
/// type (widened exactly, rounded once), `f` taking float or double arrays
/// as the runtime's gelu kernels do. 16-bit values go in chunks across the
/// threads, each widened while it is in cache.
template <typename T, typename F>
static void mapWide(const T *a, const T *b, T *y, int64_t n, F f) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    f(a, b, y, n);
  } else {
    constexpr int64_t chunk = 2048;
    int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < chunks; ++i) {
      float wa[chunk], wb[chunk], wy[chunk];
      int64_t begin = i * chunk, len = std::min(chunk, n - begin);
      for (int64_t j = 0; j < len; ++j)
        wa[j] = cpu::toFloat(a[begin + j]);
      if (b)
        for (int64_t j = 0; j < len; ++j)
          wb[j] = cpu::toFloat(b[begin + j]);
      f(wa, b ? wb : nullptr, wy, len);
      for (int64_t j = 0; j < len; ++j) {
        if constexpr (std::is_same_v<T, cpu::BFloat16>)
          y[begin + j] = cpu::toBFloat16(wy[j]);
        else
          y[begin + j] = cpu::toHalf(wy[j]);
      }
    }
  }
}

/// The bias gradient `db = x` summed over its leading dimensions (every
/// one but the last), as REDUCE_SUM computes it for type T.
template <typename T>
static bool biasSum(Call &c, const Tensor &x, Tensor &db) {
  std::vector<int64_t> dims(x.shape.size() > 0 ? x.shape.size() - 1 : 0);
  std::iota(dims.begin(), dims.end(), 0);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    int64_t n;
    if (!reducedElements(c, x, dims, db, n))
      return false;
    cpu::reduceSum(x.data<T>(), x.shape, dims, db.data<T>());
    return true;
  } else {
    return reduceSumLow<T>(c, x, db, dims);
  }
}

/// The product of a GEMM with an epilogue, into `target`, by the kernels
/// of its element type (fp16 widened to fp32, as without an epilogue).
template <typename T>
static bool runProduct(Call &c, std::vector<const Tensor *> in,
                       Tensor &target) {
  Call product{std::move(in), {&target}, c.kernel, c.error};
  if constexpr (std::is_same_v<T, cpu::Half>)
    return runWidened(product, runGemm<float>);
  else
    return runGemm<T>(product);
}

/// LINEAR/MATMUL with `matmul.epilogue` for element type T: the product,
/// then the epilogue over its result, computed as the fused region's ops
/// are (the GELU on the stored, rounded product).
template <typename T>
static bool runGemmEpilogue(Call &c) {
  using MP = program::MatmulParams;
  auto &in = c.in;
  auto &out = c.out;
  for (const Tensor *t : in)
    if (!isType<T>(*t))
      return c.fail("mixes element types");
  for (const Tensor *t : out)
    if (!isType<T>(*t))
      return c.fail("mixes element types");
  using Wide = std::conditional_t<std::is_same_v<T, double>, double, float>;
  switch (c.kernel.matmul().epilogue()) {
  case MP::GELU_AUX: {
    // x, w [, b] -> act, pre.
    Tensor &act = *out[0], &pre = *out[1];
    if (!c.expect(act.numElements() == pre.numElements(),
                  "operand shapes do not match") ||
        !runProduct<T>(c, in, pre))
      return false;
    mapWide(pre.data<T>(), static_cast<const T *>(nullptr), act.data<T>(),
            pre.numElements(),
            [](const Wide *a, const Wide *, Wide *y, int64_t n) {
              cpu::gelu<Wide>(a, n, y);
            });
    return true;
  }
  case MP::DGELU:
  case MP::DGELU_BGRAD: {
    // lhs, rhs, pre -> d [, db]: the product into d's buffer, then the
    // gradient in place.
    bool bias = c.kernel.matmul().epilogue() == MP::DGELU_BGRAD;
    const Tensor &pre = *in[2];
    Tensor &d = *out[0];
    if (!c.expect(d.numElements() == pre.numElements() &&
                      (!bias || out[1]->numElements() == c.lastDim(d)),
                  "operand shapes do not match") ||
        !runProduct<T>(c, {in[0], in[1]}, d))
      return false;
    mapWide(pre.data<T>(), d.data<T>(), d.data<T>(), d.numElements(),
            [](const Wide *x, const Wide *g, Wide *y, int64_t n) {
              cpu::geluGrad<Wide>(x, g, n, y);
            });
    return !bias || biasSum<T>(c, d, *out[1]);
  }
  case MP::BGRAD: {
    // dy, x -> dw, db (dy summed over its rows).
    if (!c.expect(in[0]->shape.size() == 2 &&
                      out[1]->numElements() == c.lastDim(*in[0]),
                  "operand shapes do not match") ||
        !runProduct<T>(c, in, *out[0]))
      return false;
    return biasSum<T>(c, *in[0], *out[1]);
  }
  default:
    return c.fail("has an unknown GEMM epilogue");
  }
}

/// Runs the floating-point kernels for element type T.
/// Attention from some of the sequence's positions (the last input, i32):
/// queries B x Tq x C, keys and values B x Tk x C.
template <typename T>
static bool runPositionedAttention(Call &c, bool grad, int64_t heads) {
  const std::vector<const Tensor *> &in = c.in;
  const std::vector<Tensor *> &out = c.out;
  const Tensor &q = *in[0], &key = *in[1], &pos = *in.back();
  bool shapes = key.shape.size() == 3 && key.shape[0] == q.shape[0] &&
                key.shape[2] == q.shape[2] &&
                in[2]->numElements() == key.numElements() &&
                pos.dtype == program::I32 && pos.numElements() == q.shape[1] &&
                out[0]->numElements() == q.numElements() &&
                (!grad || (in[3]->numElements() == q.numElements() &&
                           out[1]->numElements() == key.numElements() &&
                           out[2]->numElements() == key.numElements()));
  if (!c.expect(shapes, "operand shapes do not match"))
    return false;
  int64_t seqK = key.shape[1];
  const int32_t *p = pos.data<int32_t>();
  for (int64_t i = 0; i < q.shape[1]; ++i)
    if (p[i] < 0 || p[i] >= seqK)
      return c.fail("position " + std::to_string(p[i]) + " of query row " +
                    std::to_string(i) + " is outside the keys [0, " +
                    std::to_string(seqK) + ")");
  if (!grad)
    cpu::positionedAttention(q.data<T>(), key.data<T>(), in[2]->data<T>(), p,
                             q.shape[0], q.shape[1], seqK, q.shape[2], heads,
                             out[0]->data<T>());
  else
    cpu::positionedAttentionGrad(q.data<T>(), key.data<T>(), in[2]->data<T>(),
                                 in[3]->data<T>(), p, q.shape[0], q.shape[1],
                                 seqK, q.shape[2], heads, out[0]->data<T>(),
                                 out[1]->data<T>(), out[2]->data<T>());
  return true;
}

/// One step of ring attention: query, key, value, query positions, key
/// positions [, d_output, d_lse].
template <typename T>
static bool runAttentionBlock(Call &c, bool grad, int64_t heads) {
  const std::vector<const Tensor *> &in = c.in;
  const std::vector<Tensor *> &out = c.out;
  const Tensor &q = *in[0], &key = *in[1], &qpos = *in[3], &kpos = *in[4];
  if (!c.expect(q.shape.size() == 3 && heads > 0 && q.shape[2] % heads == 0,
                "operand shapes do not match"))
    return false;
  int64_t batch = q.shape[0], seqQ = q.shape[1], seqK = 0;
  int64_t lseElements = batch * seqQ * heads;
  bool shapes =
      key.shape.size() == 3 && key.shape[0] == batch &&
      key.shape[2] == q.shape[2] && in[2]->numElements() == key.numElements() &&
      qpos.dtype == program::I32 && qpos.numElements() == seqQ &&
      kpos.dtype == program::I32 && kpos.numElements() == key.shape[1] &&
      (grad ? in[5]->numElements() == q.numElements() &&
                  in[6]->numElements() == lseElements &&
                  out[0]->numElements() == q.numElements() &&
                  out[1]->numElements() == key.numElements() &&
                  out[2]->numElements() == key.numElements()
            : out[0]->numElements() == q.numElements() &&
                  out[1]->numElements() == lseElements);
  if (!c.expect(shapes, "operand shapes do not match"))
    return false;
  seqK = key.shape[1];
  const int32_t *kp = kpos.data<int32_t>();
  for (int64_t j = 1; j < seqK; ++j)
    if (kp[j] <= kp[j - 1])
      return c.fail("key positions are not ascending (" +
                    std::to_string(kp[j - 1]) + " then " +
                    std::to_string(kp[j]) + ")");
  if (!grad)
    cpu::blockAttention(q.data<T>(), key.data<T>(), in[2]->data<T>(),
                        qpos.data<int32_t>(), kp, batch, seqQ, seqK, q.shape[2],
                        heads, out[0]->data<T>(), out[1]->data<T>());
  else
    cpu::blockAttentionGrad(
        q.data<T>(), key.data<T>(), in[2]->data<T>(), qpos.data<int32_t>(), kp,
        in[5]->data<T>(), in[6]->data<T>(), batch, seqQ, seqK, q.shape[2],
        heads, out[0]->data<T>(), out[1]->data<T>(), out[2]->data<T>());
  return true;
}

/// Ring attention's online softmax: a, lse_a, b, lse_b [, d_out, d_lse].
template <typename T>
static bool runAttentionMerge(Call &c, bool grad) {
  const std::vector<const Tensor *> &in = c.in;
  const std::vector<Tensor *> &out = c.out;
  const Tensor &a = *in[0], &lse = *in[1];
  bool shapes = a.shape.size() == 3 && lse.shape.size() == 3 &&
                lse.shape[0] == a.shape[0] && lse.shape[1] == a.shape[1] &&
                lse.shape[2] > 0 && a.shape[2] % lse.shape[2] == 0;
  for (size_t i = 0; shapes && i < in.size(); ++i)
    shapes = in[i]->numElements() == (i % 2 ? lse : a).numElements();
  for (size_t i = 0; shapes && i < out.size(); ++i)
    shapes = out[i]->numElements() == (i % 2 ? lse : a).numElements();
  if (!c.expect(shapes, "operand shapes do not match"))
    return false;
  int64_t rows = a.shape[0] * a.shape[1];
  if (!grad)
    cpu::attentionMerge(a.data<T>(), lse.data<T>(), in[2]->data<T>(),
                        in[3]->data<T>(), rows, a.shape[2], lse.shape[2],
                        out[0]->data<T>(), out[1]->data<T>());
  else
    cpu::attentionMergeGrad(a.data<T>(), lse.data<T>(), in[2]->data<T>(),
                            in[3]->data<T>(), in[4]->data<T>(),
                            in[5]->data<T>(), rows, a.shape[2], lse.shape[2],
                            out[0]->data<T>(), out[1]->data<T>(),
                            out[2]->data<T>(), out[3]->data<T>());
  return true;
}

template <typename T>
bool runFloat(Call &c) {
  using namespace gptc::cpu;
  const Kernel &k = c.kernel;
  auto &in = c.in;
  auto &out = c.out;
  // The cross-entropy's normalizer (a token count) may be of any float type.
  size_t typed = k.op() == program::CROSS_ENTROPY        ? 2
                 : k.op() == program::CROSS_ENTROPY_GRAD ? 3
                 : k.op() == program::VOCAB_LOSS         ? 4
                 : k.op() == program::VOCAB_LOSS_GRAD    ? 3
                                                         : in.size();
  for (size_t i = 0; i < std::min(typed, in.size()); ++i)
    if (in[i]->dtype != program::I32 && !isType<T>(*in[i]))
      return c.fail("mixes element types");
  switch (k.op()) {
  case program::EMBEDDING: {
    const Tensor &ids = *in[0], &table = *in[1];
    if (!c.expect(ids.dtype == program::I32 && table.shape.size() == 2 &&
                      out[0]->numElements() ==
                          ids.numElements() * table.shape[1],
                  "operand shapes do not match"))
      return false;
    bool block = in.size() > 2;
    if (block &&
        !c.expect(in[2]->dtype == program::I32 && in[2]->numElements() == 1,
                  "expects an i32 offset"))
      return false;
    int64_t bad =
        embedding(ids.data<int32_t>(), ids.numElements(), table.data<T>(),
                  table.shape[0], table.shape[1], out[0]->data<T>(), block,
                  block ? in[2]->data<int32_t>()[0] : 0);
    if (bad >= 0)
      return c.fail("token id " + std::to_string(ids.data<int32_t>()[bad]) +
                    " at position " + std::to_string(bad) +
                    " is outside the vocabulary [0, " +
                    std::to_string(table.shape[0]) + ")");
    return true;
  }
  case program::EMBEDDING_GRAD: {
    const Tensor &ids = *in[0], &grad = *in[1];
    Tensor &table = *out[0];
    if (!c.expect(ids.dtype == program::I32 && table.shape.size() == 2 &&
                      grad.numElements() == ids.numElements() * table.shape[1],
                  "operand shapes do not match"))
      return false;
    bool block = in.size() > 2;
    if (block &&
        !c.expect(in[2]->dtype == program::I32 && in[2]->numElements() == 1,
                  "expects an i32 offset"))
      return false;
    int64_t bad =
        embeddingGrad(ids.data<int32_t>(), ids.numElements(), grad.data<T>(),
                      table.shape[0], table.shape[1], table.data<T>(), block,
                      block ? in[2]->data<int32_t>()[0] : 0);
    if (bad >= 0)
      return c.fail("token id outside the vocabulary at position " +
                    std::to_string(bad));
    return true;
  }
  case program::ROW_MAX: {
    int64_t vocab = c.lastDim(*in[0]);
    if (!c.expect(vocab > 0 &&
                      out[0]->numElements() * vocab == in[0]->numElements(),
                  "operand shapes do not match"))
      return false;
    rowMax(in[0]->data<T>(), out[0]->numElements(), vocab, out[0]->data<T>());
    return true;
  }
  case program::VOCAB_PARTIALS:
  case program::VOCAB_PARTIALS_GRAD: {
    const Tensor &logits = *in[0], &max = *in[1], &labels = *in[2],
                 &offset = *in[3];
    int64_t vocab = c.lastDim(logits), rows = max.numElements();
    bool grad = k.op() == program::VOCAB_PARTIALS_GRAD;
    if (!c.expect(
            vocab > 0 && rows * vocab == logits.numElements() &&
                labels.dtype == program::I32 && labels.numElements() == rows &&
                offset.dtype == program::I32 && offset.numElements() == 1 &&
                (!grad || (in[4]->numElements() == rows &&
                           in[5]->numElements() == rows)),
            "operand shapes do not match"))
      return false;
    int64_t first = offset.data<int32_t>()[0];
    int64_t limit =
        k.vocab().has_vocab_size() ? k.vocab().vocab_size() : int64_t(-1);
    int64_t valid =
        limit < 0 ? vocab : std::clamp<int64_t>(limit - first, 0, vocab);
    if (grad)
      vocabPartialsGrad(logits.data<T>(), max.data<T>(), labels.data<int32_t>(),
                        rows, vocab, first, valid, in[4]->data<T>(),
                        in[5]->data<T>(), out[0]->data<T>());
    else
      vocabPartials(logits.data<T>(), max.data<T>(), labels.data<int32_t>(),
                    rows, vocab, first, valid, out[0]->data<T>(),
                    out[1]->data<T>());
    return true;
  }
  case program::VOCAB_LOSS:
  case program::VOCAB_LOSS_GRAD: {
    bool grad = k.op() == program::VOCAB_LOSS_GRAD;
    const Tensor &sum = grad ? *in[0] : *in[1];
    const Tensor &labels = grad ? *in[1] : *in[3];
    size_t plain = grad ? 3 : 4;
    int64_t rows = sum.numElements();
    if (!c.expect(labels.dtype == program::I32 && labels.numElements() == rows,
                  "operand shapes do not match"))
      return false;
    std::optional<int64_t> ignore = c.ignoreIndex();
    double normalizer;
    if (!readNormalizer(c, in.size() > plain ? in[plain] : nullptr, normalizer))
      return false;
    if (grad)
      vocabLossGrad(sum.data<T>(), labels.data<int32_t>(), rows,
                    ignore.has_value(), ignore.value_or(0), normalizer,
                    in[2]->data<T>()[0], out[0]->data<T>(), out[1]->data<T>());
    else
      out[0]->data<T>()[0] =
          vocabLoss(in[0]->data<T>(), sum.data<T>(), in[2]->data<T>(),
                    labels.data<int32_t>(), rows, ignore.has_value(),
                    ignore.value_or(0), normalizer);
    return true;
  }
  case program::LINEAR:
  case program::MATMUL:
    return runGemm<T>(c);
  case program::LAYER_NORM: {
    const Tensor &x = *in[0];
    int64_t cols = c.lastDim(x);
    if (!c.expect(cols > 0 && in[1]->numElements() == cols &&
                      in[2]->numElements() == cols &&
                      out[0]->numElements() == x.numElements(),
                  "operand shapes do not match"))
      return false;
    layerNorm(x.data<T>(), in[1]->data<T>(), in[2]->data<T>(),
              x.numElements() / cols, cols, k.norm().epsilon(),
              out[0]->data<T>());
    return true;
  }
  case program::LAYER_NORM_GRAD: {
    const Tensor &x = *in[0];
    int64_t cols = c.lastDim(x);
    if (!c.expect(cols > 0 && in[1]->numElements() == cols &&
                      in[2]->numElements() == x.numElements() &&
                      out[0]->numElements() == x.numElements() &&
                      out[1]->numElements() == cols &&
                      out[2]->numElements() == cols,
                  "operand shapes do not match"))
      return false;
    layerNormGrad(x.data<T>(), in[1]->data<T>(), in[2]->data<T>(),
                  x.numElements() / cols, cols, k.norm().epsilon(),
                  out[0]->data<T>(), out[1]->data<T>(), out[2]->data<T>());
    return true;
  }
  case program::GELU:
  case program::GELU_GRAD:
  case program::ADD:
  case program::SOFTMAX:
  case program::SOFTMAX_GRAD: {
    int64_t n = out[0]->numElements();
    for (const Tensor *t : in)
      if (t->numElements() != n)
        return c.fail("operand shapes do not match");
    int64_t cols = c.lastDim(*out[0]);
    T *y = out[0]->data<T>();
    switch (k.op()) {
    case program::GELU:
      if (k.elementwise().gelu_exact())
        geluExact(in[0]->data<T>(), n, y);
      else
        gelu(in[0]->data<T>(), n, y);
      break;
    case program::GELU_GRAD:
      if (k.elementwise().gelu_exact())
        geluExactGrad(in[0]->data<T>(), in[1]->data<T>(), n, y);
      else
        geluGrad(in[0]->data<T>(), in[1]->data<T>(), n, y);
      break;
    case program::ADD:
      add(in[0]->data<T>(), in[1]->data<T>(), n, y);
      break;
    case program::SOFTMAX:
      if (cols)
        softmax(in[0]->data<T>(), n / cols, cols, y);
      break;
    default:
      if (cols)
        softmaxGrad(in[0]->data<T>(), in[1]->data<T>(), n / cols, cols, y);
      break;
    }
    return true;
  }
  case program::UNARY:
  case program::BINARY: {
    int64_t n = out[0]->numElements();
    for (const Tensor *t : in)
      if (t->numElements() != n)
        return c.fail("operand shapes do not match");
    if (k.op() == program::UNARY) {
      std::optional<UnaryFunction> fn = unaryFunction(k.elementwise().unary());
      if (!fn)
        return c.fail("has an unknown unary function " +
                      std::to_string(k.elementwise().unary()));
      unary(*fn, in[0]->data<T>(), n, out[0]->data<T>());
    } else {
      std::optional<BinaryFunction> fn =
          binaryFunction(k.elementwise().binary());
      if (!fn)
        return c.fail("has an unknown binary function " +
                      std::to_string(k.elementwise().binary()));
      binary(*fn, in[0]->data<T>(), in[1]->data<T>(), n, out[0]->data<T>());
    }
    return true;
  }
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD: {
    const Tensor &q = *in[0];
    int64_t heads = k.attention().num_heads();
    if (!c.expect(q.shape.size() == 3 && heads > 0 && q.shape[2] % heads == 0,
                  "operand shapes do not match"))
      return false;
    bool grad = k.op() == program::CAUSAL_ATTENTION_GRAD;
    if (in.size() == (grad ? 5u : 4u))
      return runPositionedAttention<T>(c, grad, heads);
    for (const Tensor *t : in)
      if (t->numElements() != q.numElements())
        return c.fail("operand shapes do not match");
    for (const Tensor *t : out)
      if (t->numElements() != q.numElements())
        return c.fail("operand shapes do not match");
    if (k.op() == program::CAUSAL_ATTENTION)
      causalAttention(q.data<T>(), in[1]->data<T>(), in[2]->data<T>(),
                      q.shape[0], q.shape[1], q.shape[2], heads,
                      out[0]->data<T>());
    else
      causalAttentionGrad(q.data<T>(), in[1]->data<T>(), in[2]->data<T>(),
                          in[3]->data<T>(), q.shape[0], q.shape[1], q.shape[2],
                          heads, out[0]->data<T>(), out[1]->data<T>(),
                          out[2]->data<T>());
    return true;
  }
  case program::ATTENTION_BLOCK:
  case program::ATTENTION_BLOCK_GRAD:
    return runAttentionBlock<T>(c, k.op() == program::ATTENTION_BLOCK_GRAD,
                                k.attention().num_heads());
  case program::ATTENTION_MERGE:
  case program::ATTENTION_MERGE_GRAD:
    return runAttentionMerge<T>(c, k.op() == program::ATTENTION_MERGE_GRAD);
  case program::CROSS_ENTROPY:
  case program::CROSS_ENTROPY_GRAD: {
    const Tensor &logits = *in[0], &labels = *in[1];
    std::optional<int64_t> ignore = c.ignoreIndex();
    int64_t vocab = c.lastDim(logits);
    bool grad = k.op() == program::CROSS_ENTROPY_GRAD;
    if (!c.expect(labels.dtype == program::I32 && vocab > 0 &&
                      labels.numElements() * vocab == logits.numElements() &&
                      (grad ? in[2]->numElements() == 1 &&
                                  out[0]->numElements() == logits.numElements()
                            : out[0]->numElements() == 1),
                  "operand shapes do not match"))
      return false;
    // The normalizer, when given: divide by it instead of the count.
    double normalizer;
    if (!readNormalizer(c, in.size() == (grad ? 4u : 3u) ? in.back() : nullptr,
                        normalizer))
      return false;
    if (!grad) {
      int64_t bad;
      T loss = crossEntropy(logits.data<T>(), labels.data<int32_t>(),
                            labels.numElements(), vocab, ignore.has_value(),
                            ignore.value_or(0), normalizer, bad);
      if (bad >= 0)
        return c.fail("label " + std::to_string(labels.data<int32_t>()[bad]) +
                      " at position " + std::to_string(bad) +
                      " is outside the vocabulary [0, " +
                      std::to_string(vocab) + ")");
      out[0]->data<T>()[0] = loss;
    } else {
      crossEntropyGrad(logits.data<T>(), labels.data<int32_t>(),
                       in[2]->data<T>()[0], labels.numElements(), vocab,
                       ignore.has_value(), ignore.value_or(0), normalizer,
                       out[0]->data<T>());
    }
    return true;
  }
  case program::REDUCE_SUM:
  case program::BROADCAST: {
    std::vector<int64_t> dims = c.dims();
    const Tensor &full = k.op() == program::REDUCE_SUM ? *in[0] : *out[0];
    const Tensor &reduced = k.op() == program::REDUCE_SUM ? *out[0] : *in[0];
    int64_t n;
    if (!reducedElements(c, full, dims, reduced, n))
      return false;
    if (k.op() == program::REDUCE_SUM)
      reduceSum(in[0]->data<T>(), in[0]->shape, dims, out[0]->data<T>());
    else
      broadcast(in[0]->data<T>(), out[0]->shape, dims, out[0]->data<T>());
    return true;
  }
  default:
    return c.fail("is not a floating-point kernel");
  }
}
/// ADAMW and MULTI_ADAMW: inputs params[n], grads[n], m[n], v[n], lr,
/// step, scale [, skip]; outputs params'[n], m'[n], v'[n] (ADAMW: n = 1).
static bool runAdamW(Call &c) {
  const Kernel &k = c.kernel;
  bool multi = k.op() == program::MULTI_ADAMW;
  int64_t n = static_cast<int64_t>(c.out.size()) / 3;
  int64_t scalars = static_cast<int64_t>(c.in.size()) - 4 * n;
  if (n < 1 || static_cast<int64_t>(c.out.size()) != 3 * n ||
      (scalars != 3 && scalars != 4) ||
      (multi && k.multi_adamw().weight_decays_size() != n))
    return c.fail("expects 4 tensors, lr, step and scale (and a skip flag) "
                  "per update and one weight decay per parameter");
  DType dtype = c.in[0]->dtype;
  for (int64_t i = 0; i < n; ++i) {
    int64_t size = c.in[i]->numElements();
    for (int64_t j = 0; j < 4; ++j)
      if (c.in[j * n + i]->dtype != dtype ||
          c.in[j * n + i]->numElements() != size)
        return c.fail("operand shapes do not match");
    for (int64_t j = 0; j < 3; ++j)
      if (c.out[j * n + i]->dtype != dtype ||
          c.out[j * n + i]->numElements() != size)
        return c.fail("operand shapes do not match");
  }
  const Tensor &lr = *c.in[4 * n], &step = *c.in[4 * n + 1],
               &scale = *c.in[4 * n + 2];
  if (lr.dtype != program::F32 || step.dtype != program::I32 ||
      scale.dtype != program::F32 || lr.numElements() != 1 ||
      step.numElements() != 1 || scale.numElements() != 1)
    return c.fail("expects scalar lr, step and scale");
  if (scalars == 4) {
    // fp16's overflow flag: a skipped step keeps the state as it is.
    const Tensor &skip = *c.in[4 * n + 3];
    if (skip.dtype != program::F32 || skip.numElements() != 1)
      return c.fail("expects a scalar f32 skip flag");
    if (skip.data<float>()[0] != 0.0f) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          // p' from p, m' from m, v' from v.
          const Tensor &from = *c.in[(j == 0 ? 0 : j + 1) * n + i];
          Tensor &to = *c.out[j * n + i];
          if (to.raw() != from.raw())
            std::memcpy(to.raw(), from.raw(), from.byteSize());
        }
      return true;
    }
  }
  double beta1 = multi ? k.multi_adamw().beta1() : k.adamw().beta1();
  double beta2 = multi ? k.multi_adamw().beta2() : k.adamw().beta2();
  double eps = multi ? k.multi_adamw().eps() : k.adamw().eps();
  auto decay = [&](int64_t i) {
    return multi ? k.multi_adamw().weight_decays(static_cast<int>(i))
                 : k.adamw().weight_decay();
  };
  double lrv = lr.data<float>()[0], sv = scale.data<float>()[0];
  int64_t t = step.data<int32_t>()[0];
  if (dtype == program::F32) {
    std::vector<cpu::AdamWTensor> tensors;
    for (int64_t i = 0; i < n; ++i)
      tensors.push_back(
          {c.in[i]->data<float>(), c.in[n + i]->data<float>(),
           c.in[2 * n + i]->data<float>(), c.in[3 * n + i]->data<float>(),
           c.out[i]->data<float>(), c.out[n + i]->data<float>(),
           c.out[2 * n + i]->data<float>(), c.in[i]->numElements(), decay(i)});
    cpu::multiAdamW(tensors, lrv, t, sv, beta1, beta2, eps);
    return true;
  }
  if (dtype != program::F64)
    return c.fail("expects f32 or f64 parameters");
  for (int64_t i = 0; i < n; ++i)
    cpu::adamw(c.in[i]->data<double>(), c.in[n + i]->data<double>(),
               c.in[2 * n + i]->data<double>(), c.in[3 * n + i]->data<double>(),
               c.in[i]->numElements(), lrv, t, sv, beta1, beta2, eps, decay(i),
               c.out[i]->data<double>(), c.out[n + i]->data<double>(),
               c.out[2 * n + i]->data<double>());
  return true;
}

} // namespace

bool Executor::runKernel(const Kernel &k, std::string &error) {
  Call c{{}, {}, k, error};
  if (k.op() == program::ACCUMULATE)
    return runAccumulate(k, error);
  if (k.op() == program::COMPILED)
    return runCompiled(k, error);
  if (k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX ||
      k.op() == program::SHARD_OFFSET || k.op() == program::ALL_GATHER ||
      k.op() == program::REDUCE_SCATTER || k.op() == program::ALL_SLICE ||
      k.op() == program::SHIFT)
    return runCollective(k, error);
  for (int32_t id : k.inputs())
    c.in.push_back(bound[id] ? bound[id] : &values[id]);
  for (int32_t id : k.outputs())
    c.out.push_back(&values[id]);
  Tensor &out = *c.out[0];

  // Type-generic kernels.
  switch (k.op()) {
  case program::CONSTANT:
    if (static_cast<int64_t>(k.constant().data().size()) != out.byteSize())
      return c.fail("constant data has the wrong size");
    if (out.byteSize()) // an empty tensor may have no buffer
      std::memcpy(out.raw(), k.constant().data().data(), out.byteSize());
    return true;
  case program::IOTA:
    if (out.dtype != program::I32 || k.axis().axis() < 0 ||
        k.axis().axis() >= static_cast<int64_t>(out.shape.size()))
      return c.fail("invalid iota");
    cpu::iota(out.data<int32_t>(), out.shape, k.axis().axis());
    return true;
  case program::RESHAPE:
    if (c.in[0]->byteSize() != out.byteSize())
      return c.fail("operand sizes do not match");
    // The buffer plan stores a reshape where its operand is: a view.
    if (out.raw() != c.in[0]->raw() && out.byteSize())
      std::memcpy(out.raw(), c.in[0]->raw(), out.byteSize());
    return true;
  case program::TRANSPOSE: {
    std::vector<int64_t> perm = c.dims();
    const Tensor &x = *c.in[0];
    std::vector<bool> seen(perm.size(), false);
    bool ok = perm.size() == x.shape.size() && x.dtype == out.dtype &&
              x.numElements() == out.numElements();
    for (int64_t p : perm) {
      ok &= p >= 0 && p < static_cast<int64_t>(perm.size()) && !seen[p];
      if (ok)
        seen[p] = true;
    }
    if (!ok)
      return c.fail("invalid permutation");
    cpu::transpose(x.raw(), x.shape, perm, elementSize(x.dtype), out.raw());
    return true;
  }
  case program::SPLIT:
  case program::CONCAT: {
    bool concat = k.op() == program::CONCAT;
    const Tensor &full = concat ? out : *c.in[0];
    int64_t axis = k.axis().axis();
    if (axis < 0 || axis >= static_cast<int64_t>(full.shape.size()))
      return c.fail("invalid axis");
    std::vector<int64_t> sizes;
    int64_t total = 0;
    std::vector<const void *> ins;
    std::vector<void *> outs;
    auto piece = [&](const Tensor &t) {
      if (t.shape.size() != full.shape.size() || t.dtype != full.dtype)
        return false;
      for (size_t d = 0; d < t.shape.size(); ++d)
        if (static_cast<int64_t>(d) != axis && t.shape[d] != full.shape[d])
          return false;
      sizes.push_back(t.shape[axis]);
      total += t.shape[axis];
      return true;
    };
    for (const Tensor *t :
         concat ? c.in
                : std::vector<const Tensor *>(c.out.begin(), c.out.end()))
      if (!piece(*t))
        return c.fail("operand shapes do not match");
    if (total != full.shape[axis])
      return c.fail("operand shapes do not match");
    for (const Tensor *t : c.in)
      ins.push_back(t->raw());
    for (Tensor *t : c.out)
      outs.push_back(t->raw());
    cpu::sliceAlongAxis(ins, outs, full.shape, axis, sizes,
                        elementSize(full.dtype), concat);
    return true;
  }
  case program::GLOBAL_NORM:
  case program::SUM_SQUARES: {
    if (out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects a scalar f32 result");
    std::vector<std::pair<const float *, int64_t>> f32;
    std::vector<std::pair<const double *, int64_t>> f64;
    for (const Tensor *t : c.in) {
      if (t->dtype == program::F32)
        f32.push_back({t->data<float>(), t->numElements()});
      else if (t->dtype == program::F64)
        f64.push_back({t->data<double>(), t->numElements()});
      else
        return c.fail("expects floating-point inputs");
    }
    double a = cpu::globalNorm(f32), b = cpu::globalNorm(f64);
    double squares = a * a + b * b;
    out.data<float>()[0] = static_cast<float>(
        k.op() == program::GLOBAL_NORM ? std::sqrt(squares) : squares);
    return true;
  }
  case program::SQRT: {
    const Tensor &x = *c.in[0];
    if (x.dtype != program::F32 || x.numElements() != 1 ||
        out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects scalar f32 operands");
    out.data<float>()[0] = std::sqrt(x.data<float>()[0]);
    return true;
  }
  case program::COUNT_TOKENS: {
    const Tensor &labels = *c.in[0];
    if (labels.dtype != program::I32 || out.dtype != program::F32 ||
        out.numElements() != 1)
      return c.fail("expects i32 labels and a scalar f32 result");
    std::optional<int64_t> ignore = c.ignoreIndex();
    int64_t n = 0;
    const int32_t *l = labels.data<int32_t>();
    for (int64_t i = 0, e = labels.numElements(); i < e; ++i)
      n += !(ignore && l[i] == *ignore);
    out.data<float>()[0] = static_cast<float>(n);
    return true;
  }
  case program::CLIP_SCALE: {
    const Tensor &norm = *c.in[0];
    if (norm.dtype != program::F32 || norm.numElements() != 1 ||
        out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects scalar f32 operands");
    if (c.in.size() < 2) {
      out.data<float>()[0] = static_cast<float>(
          cpu::clipScale(norm.data<float>()[0], k.clip().max_norm()));
      return true;
    }
    // With a loss scale S: the factor from a scaled gradient to the
    // clipped true one.
    const Tensor &ls = *c.in[1];
    if (ls.dtype != program::F32 || ls.numElements() != 1)
      return c.fail("expects scalar f32 operands");
    double scale = ls.data<float>()[0];
    out.data<float>()[0] = static_cast<float>(
        cpu::clipScale(norm.data<float>()[0] / scale, k.clip().max_norm()) /
        scale);
    return true;
  }
  case program::DIV: {
    const Tensor &a = *c.in[0], &b = *c.in[1];
    if (a.dtype != program::F32 || b.dtype != program::F32 ||
        a.numElements() != 1 || b.numElements() != 1 ||
        out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects scalar f32 operands");
    out.data<float>()[0] = a.data<float>()[0] / b.data<float>()[0];
    return true;
  }
  case program::FOUND_INF: {
    const Tensor &x = *c.in[0];
    if (out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects a scalar f32 result");
    bool found = false;
    int64_t n = x.numElements();
    if (x.dtype == program::F32) {
      const float *p = x.data<float>();
      for (int64_t i = 0; i < n; ++i)
        found |= !std::isfinite(p[i]);
    } else if (x.dtype == program::F64) {
      const double *p = x.data<double>();
      for (int64_t i = 0; i < n; ++i)
        found |= !std::isfinite(p[i]);
    } else {
      return c.fail("expects an f32 or f64 operand");
    }
    out.data<float>()[0] = found ? 1.0f : 0.0f;
    return true;
  }
  case program::LOSS_SCALE_UPDATE: {
    const Tensor &scale = *c.in[0], &good = *c.in[1], &updates = *c.in[2],
                 &found = *c.in[3];
    for (const Tensor *t : c.in)
      if (t->numElements() != 1)
        return c.fail("expects scalar operands");
    if (scale.dtype != program::F32 || good.dtype != program::I32 ||
        updates.dtype != program::I32 || found.dtype != program::F32 ||
        c.out[0]->dtype != program::F32 || c.out[1]->dtype != program::I32 ||
        c.out[2]->dtype != program::I32)
      return c.fail("expects f32 scale and flag, i32 counters");
    const program::LossScaleParams &params = k.loss_scale();
    cpu::LossScaleState next =
        cpu::updateLossScale({scale.data<float>()[0], good.data<int32_t>()[0],
                              updates.data<int32_t>()[0]},
                             found.data<float>()[0] != 0.0f, params.growth(),
                             params.backoff(), params.interval());
    c.out[0]->data<float>()[0] = next.scale;
    c.out[1]->data<int32_t>()[0] = next.good;
    c.out[2]->data<int32_t>()[0] = next.updates;
    return true;
  }
  case program::LEARNING_RATE: {
    const Tensor &step = *c.in[0];
    if (step.dtype != program::I32 || step.numElements() != 1 ||
        out.dtype != program::F32 || out.numElements() != 1)
      return c.fail("expects an i32 step and an f32 result");
    const program::ScheduleParams &s = k.schedule();
    out.data<float>()[0] = static_cast<float>(
        cpu::learningRate(step.data<int32_t>()[0], s.peak(), s.min(),
                          s.warmup(), s.total(), static_cast<int>(s.decay())));
    return true;
  }
  case program::ADAMW:
  case program::MULTI_ADAMW:
    return runAdamW(c);
  case program::CAST: {
    const Tensor &x = *c.in[0];
    if (x.numElements() != out.numElements())
      return c.fail("operand shapes do not match");
    if (x.dtype == out.dtype) {
      if (out.byteSize())
        std::memcpy(out.raw(), x.raw(), out.byteSize());
    } else if (x.dtype == program::F32 && out.dtype == program::F64) {
      convert<float, double>(x, out);
    } else if (x.dtype == program::F64 && out.dtype == program::F32) {
      convert<double, float>(x, out);
    } else if (x.dtype == program::F32 && out.dtype == program::BF16) {
      convert<float, cpu::BFloat16>(x, out);
    } else if (x.dtype == program::BF16 && out.dtype == program::F32) {
      convert<cpu::BFloat16, float>(x, out);
    } else if (x.dtype == program::F32 && out.dtype == program::F16) {
      convert<float, cpu::Half>(x, out);
    } else if (x.dtype == program::F16 && out.dtype == program::F32) {
      convert<cpu::Half, float>(x, out);
    } else {
      return c.fail(std::string("no cast from ") + dtypeName(x.dtype) + " to " +
                    dtypeName(out.dtype) + " on the CPU yet");
    }
    return true;
  }
  default:
    break;
  }

  // A GEMM with an epilogue, for the element type of its operands.
  if (k.has_matmul() && k.matmul().epilogue() != program::MatmulParams::NONE) {
    if (out.dtype == program::F32)
      return runGemmEpilogue<float>(c);
    if (out.dtype == program::F64)
      return runGemmEpilogue<double>(c);
    if (out.dtype == program::BF16)
      return runGemmEpilogue<cpu::BFloat16>(c);
    if (out.dtype == program::F16)
      return runGemmEpilogue<cpu::Half>(c);
    return c.fail(std::string("no CPU GEMM for ") + dtypeName(out.dtype));
  }

  // Ring steps on 16-bit operands give fp32 outputs and take fp32
  // gradients.
  if ((k.op() == program::ATTENTION_BLOCK ||
       k.op() == program::ATTENTION_BLOCK_GRAD) &&
      (c.in[0]->dtype == program::BF16 || c.in[0]->dtype == program::F16))
    return runWidened(c, runFloat<float>);

  // Floating-point kernels, on the element type of their first output.
  if (out.dtype == program::F32)
    return runFloat<float>(c);
  if (out.dtype == program::F64)
    return runFloat<double>(c);
  if (out.dtype == program::BF16)
    return runBFloat16(c);
  if (out.dtype == program::F16)
    return runHalf(c);
  return c.fail(std::string("no CPU kernel for ") + dtypeName(out.dtype));
}
