//===- Executor.cpp - Run a compiled gptc function on the CPU --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `create` checks everything a kernel relies on (ids in range, dtypes, the
// arity of every kernel, the element counts of related operands), so that
// a corrupt or hand-edited artifact is an error, not an out-of-bounds
// access. `run` then dispatches each kernel on its floating-point type.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Executor.h"

#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Communicator.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <omp.h>
#include <optional>
#include <type_traits>

using namespace gptc;
using namespace gptc::runtime;
using program::DType;
using program::Kernel;
using program::OpKind;

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

int64_t runtime::elementSize(DType dtype) {
  switch (dtype) {
  case program::F64:
  case program::I64:
    return 8;
  case program::F32:
  case program::I32:
    return 4;
  case program::BF16:
  case program::F16:
    return 2;
  default:
    return 0;
  }
}

const char *runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case program::F32:
    return "f32";
  case program::F64:
    return "f64";
  case program::I32:
    return "i32";
  case program::I64:
    return "i64";
  case program::BF16:
    return "bf16";
  case program::F16:
    return "f16";
  default:
    return "?";
  }
}

static int64_t product(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  size = numElements() * elementSize(dtype);
  storage.resize(size);
  ptr = storage.data();
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, std::byte *data) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.size = t.numElements() * elementSize(dtype);
  t.ptr = data;
  return t;
}

Tensor::Tensor(const Tensor &other)
    : dtype(other.dtype), shape(other.shape),
      storage(other.ptr, other.ptr + other.size), size(other.size) {
  ptr = storage.data();
}

Tensor &Tensor::operator=(const Tensor &other) {
  if (this != &other)
    *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor &&other) noexcept
    : dtype(other.dtype), shape(std::move(other.shape)),
      storage(std::move(other.storage)), size(other.size) {
  // A moved vector keeps its buffer; a view keeps pointing at the arena.
  ptr = storage.empty() ? other.ptr : storage.data();
  other.ptr = nullptr;
  other.size = 0;
}

Tensor &Tensor::operator=(Tensor &&other) noexcept {
  if (this == &other)
    return *this;
  dtype = other.dtype;
  shape = std::move(other.shape);
  storage = std::move(other.storage);
  size = other.size;
  ptr = storage.empty() ? other.ptr : storage.data();
  other.ptr = nullptr;
  other.size = 0;
  return *this;
}

int64_t Tensor::numElements() const { return product(shape); }

//===----------------------------------------------------------------------===//
// Checking a function
//===----------------------------------------------------------------------===//

namespace {
/// Inputs (minimum, maximum) and outputs of a kernel.
struct Arity {
  int minInputs, maxInputs, outputs;
};
} // namespace

/// The `params` message each op carries (PARAMS_NOT_SET: none).
static Kernel::ParamsCase paramsOf(OpKind op) {
  switch (op) {
  case program::CONSTANT:
    return Kernel::kConstant;
  case program::IOTA:
  case program::SPLIT:
  case program::CONCAT:
    return Kernel::kAxis;
  case program::MATMUL:
    return Kernel::kMatmul;
  case program::LAYER_NORM:
  case program::LAYER_NORM_GRAD:
    return Kernel::kNorm;
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD:
    return Kernel::kAttention;
  case program::CROSS_ENTROPY:
  case program::CROSS_ENTROPY_GRAD:
  case program::VOCAB_LOSS:
  case program::VOCAB_LOSS_GRAD:
  case program::COUNT_TOKENS:
    return Kernel::kLabels;
  case program::TRANSPOSE:
  case program::REDUCE_SUM:
  case program::BROADCAST:
    return Kernel::kDims;
  case program::CLIP_SCALE:
    return Kernel::kClip;
  case program::LEARNING_RATE:
    return Kernel::kSchedule;
  case program::ADAMW:
    return Kernel::kAdamw;
  case program::ALL_REDUCE:
  case program::ALL_REDUCE_MAX:
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
  case program::ALL_SLICE:
    return Kernel::kCollective;
  case program::SHARD_OFFSET:
    return Kernel::kShardOffset;
  case program::VOCAB_PARTIALS:
  case program::VOCAB_PARTIALS_GRAD:
    return Kernel::kVocab;
  case program::LOSS_SCALE_UPDATE:
    return Kernel::kLossScale;
  case program::COMPILED:
    return Kernel::kCompiled;
  case program::ACCUMULATE:
    return Kernel::kAccumulate;
  default:
    return Kernel::PARAMS_NOT_SET;
  }
}

static bool arityOf(OpKind op, Arity &arity) {
  switch (op) {
  case program::CONSTANT:
  case program::IOTA:
  case program::SHARD_OFFSET:
    arity = {0, 0, 1};
    return true;
  case program::GELU:
  case program::SOFTMAX:
  case program::RESHAPE:
  case program::TRANSPOSE:
  case program::CAST:
  case program::REDUCE_SUM:
  case program::BROADCAST:
    arity = {1, 1, 1};
    return true;
  case program::CROSS_ENTROPY:
  case program::EMBEDDING:
    arity = {2, 3, 1};
    return true;
  case program::CROSS_ENTROPY_GRAD:
    arity = {3, 4, 1};
    return true;
  case program::ADD:
  case program::MATMUL:
  case program::GELU_GRAD:
  case program::SOFTMAX_GRAD:
    arity = {2, 2, 1};
    return true;
  case program::LINEAR:
  case program::EMBEDDING_GRAD:
    arity = {2, 3, 1};
    return true;
  case program::VOCAB_PARTIALS:
    arity = {4, 4, 2};
    return true;
  case program::VOCAB_PARTIALS_GRAD:
    arity = {6, 6, 1};
    return true;
  case program::VOCAB_LOSS:
    arity = {4, 5, 1};
    return true;
  case program::VOCAB_LOSS_GRAD:
    arity = {3, 4, 2};
    return true;
  case program::LAYER_NORM:
    arity = {3, 3, 1};
    return true;
  case program::CAUSAL_ATTENTION:
    arity = {3, 3, 1};
    return true;
  case program::LAYER_NORM_GRAD:
    arity = {3, 3, 3};
    return true;
  case program::CAUSAL_ATTENTION_GRAD:
    arity = {4, 4, 3};
    return true;
  case program::SPLIT:
    arity = {1, 1, -1};
    return true;
  case program::GLOBAL_NORM:
    arity = {1, -1, 1};
    return true;
  case program::LEARNING_RATE:
  case program::FOUND_INF:
    arity = {1, 1, 1};
    return true;
  case program::CLIP_SCALE:
    arity = {1, 2, 1};
    return true;
  case program::DIV:
    arity = {2, 2, 1};
    return true;
  case program::LOSS_SCALE_UPDATE:
    arity = {4, 4, 3};
    return true;
  case program::ADAMW:
    arity = {7, 8, 3};
    return true;
  case program::ALL_REDUCE:
  case program::ALL_REDUCE_MAX:
  case program::ROW_MAX:
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
  case program::ALL_SLICE:
  case program::COUNT_TOKENS:
  case program::SQRT:
    arity = {1, 1, 1};
    return true;
  case program::SUM_SQUARES:
    arity = {1, -1, 1};
    return true;
  case program::ACCUMULATE:
    arity = {1, -1, -1};
    return true;
  case program::CONCAT:
    arity = {1, -1, 1};
    return true;
  case program::COMPILED:
    arity = {0, -1, -1};
    return true;
  default:
    return false;
  }
}

Executor::Executor(const program::Function &function) : function(function) {}

std::unique_ptr<Executor> Executor::create(const program::Function &function,
                                           std::string &error,
                                           const KernelLibrary *kernels) {
  auto fail = [&](const std::string &message) {
    error = "function '" + function.name() + "': " + message;
    return nullptr;
  };
  std::unique_ptr<Executor> exec(new Executor(function));
  int64_t count = function.values_size();
  exec->values.resize(count);
  exec->bound.assign(count, nullptr);
  int64_t arenaBytes = function.arena_bytes();
  if (arenaBytes < 0)
    return fail("negative arena size");
  if (arenaBytes > 0) {
    size_t rounded = (static_cast<size_t>(arenaBytes) + 63) / 64 * 64;
    exec->arena.reset(static_cast<std::byte *>(std::aligned_alloc(64, rounded)));
    if (!exec->arena)
      return fail("cannot allocate an arena of " + std::to_string(arenaBytes) +
                  " bytes");
  }
  for (int64_t i = 0; i < count; ++i) {
    const program::Value &v = function.values(i);
    if (v.id() != i)
      return fail("value #" + std::to_string(i) + " has id " +
                  std::to_string(v.id()));
    if (elementSize(v.type().dtype()) == 0)
      return fail("value #" + std::to_string(i) + " has no known dtype");
    std::vector<int64_t> shape(v.type().shape().begin(),
                               v.type().shape().end());
    int64_t n = 1;
    for (int64_t d : shape)
      if (d < 0 || __builtin_mul_overflow(n, d, &n))
        return fail("value #" + std::to_string(i) + " has an invalid shape");
    if (v.offset() >= 0) {
      int64_t bytes = n * elementSize(v.type().dtype());
      if (v.offset() + bytes > arenaBytes || v.offset() % 64 != 0)
        return fail("value #" + std::to_string(i) +
                    " is planned outside the arena");
      exec->values[i] = Tensor::view(v.type().dtype(), std::move(shape),
                                     exec->arena.get() + v.offset());
    } else {
      // Unplanned: the function's inputs (bound by the caller at run
      // time) and outputs (usually written into the caller's buffers)
      // get storage only when a run needs it, so that a training step's
      // state is not held twice.
      exec->values[i] = Tensor::view(v.type().dtype(), std::move(shape),
                                     nullptr);
    }
  }
  auto validId = [&](int32_t id) { return id >= 0 && id < count; };
  for (int32_t id : function.inputs())
    if (!validId(id))
      return fail("input id " + std::to_string(id) + " out of range");
  for (int32_t id : function.outputs())
    if (!validId(id))
      return fail("output id " + std::to_string(id) + " out of range");
  for (const Kernel &k : function.kernels()) {
    Arity arity;
    if (!arityOf(k.op(), arity))
      return fail("kernel at " + k.location() + " has an unknown op");
    int nin = k.inputs_size(), nout = k.outputs_size();
    if (nin < arity.minInputs ||
        (arity.maxInputs >= 0 && nin > arity.maxInputs) ||
        (arity.outputs >= 0 && nout != arity.outputs) || nout == 0)
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " has the wrong number of operands");
    if (k.params_case() != paramsOf(k.op()))
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " does not carry its op's parameters");
    for (int32_t id : k.inputs())
      if (!validId(id))
        return fail("kernel at " + k.location() + " reads value " +
                    std::to_string(id) + " out of range");
    for (int32_t id : k.outputs())
      if (!validId(id))
        return fail("kernel at " + k.location() + " writes value " +
                    std::to_string(id) + " out of range");
  }
  // The entry points of generated kernels, checked against the values.
  for (const Kernel &k : exec->function.kernels()) {
    if (k.op() != program::COMPILED)
      continue;
    const program::CompiledParams &compiled = k.compiled();
    const std::string &symbol = compiled.symbol();
    if (!kernels)
      return fail("kernel '" + symbol + "' at " + k.location() +
                  " is generated code, but the program has no kernel library");
    auto entry = kernels->lookup(symbol);
    if (!entry)
      return fail("the kernel library has no kernel '" + symbol + "'");
    if (compiled.extent() < 1)
      return fail("kernel '" + symbol + "' has no parallel extent");
    for (int32_t id : k.outputs()) {
      const Tensor &t = exec->values[id];
      if (t.shape.empty() || t.shape[0] != compiled.extent())
        return fail("kernel '" + symbol +
                    "' writes a value whose "
                    "dimension 0 is not its parallel extent");
    }
    exec->entries[&k] = entry;
  }
  // The functions ACCUMULATE runs per microbatch.
  for (const Kernel &k : exec->function.kernels()) {
    if (k.op() != program::ACCUMULATE)
      continue;
    const program::AccumulateParams &a = k.accumulate();
    if (a.microbatches() < 1 || a.stacked_inputs() < 0 ||
        a.stacked_inputs() > k.inputs_size() ||
        a.body().inputs_size() != k.inputs_size() ||
        a.body().outputs_size() != k.outputs_size())
      return fail("ACCUMULATE at " + k.location() + " is malformed");
    std::unique_ptr<Executor> body = create(a.body(), error, kernels);
    if (!body)
      return nullptr;
    exec->bodies[&k] = std::move(body);
  }
  return exec;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

namespace {
/// The operands of one kernel call, resolved to tensors.
struct Call {
  std::vector<const Tensor *> in;
  std::vector<Tensor *> out;
  const Kernel &kernel;
  std::string &error;

  bool fail(const std::string &message) {
    error = kernel.location() + ": " + program::OpKind_Name(kernel.op()) +
            ": " + message;
    return false;
  }
  bool expect(bool condition, const char *message) {
    return condition || fail(message);
  }
  int64_t lastDim(const Tensor &t) const {
    return t.shape.empty() ? 1 : t.shape.back();
  }
  /// The dimensions of TRANSPOSE, REDUCE_SUM and BROADCAST.
  std::vector<int64_t> dims() const {
    return {kernel.dims().dims().begin(), kernel.dims().dims().end()};
  }
  /// The ignored label of a loss kernel, or none.
  std::optional<int64_t> ignoreIndex() const {
    if (!kernel.labels().has_ignore_index())
      return std::nullopt;
    return kernel.labels().ignore_index();
  }
};

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
  normalizer = n->dtype == program::F32 ? n->data<float>()[0]
                                        : n->data<double>()[0];
  if (!(normalizer > 0))
    normalizer = -1;
  return true;
}

template <typename T> bool isType(const Tensor &t) {
  return t.dtype == (std::is_same_v<T, float> ? program::F32 : program::F64);
}

/// Checks that `dims` are increasing dimensions of `full` and that
/// `reduced` has the elements left once they are summed; sets `n` to that
/// count.
static bool reducedElements(Call &c, const Tensor &full,
                            const std::vector<int64_t> &dims,
                            const Tensor &reduced, int64_t &n) {
  n = full.numElements();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(full.shape.size()) ||
        (i && dims[i] <= dims[i - 1]))
      return c.fail("invalid dimensions");
    n = full.shape[dims[i]] ? n / full.shape[dims[i]] : 0;
  }
  return c.expect(n == reduced.numElements(), "operand shapes do not match");
}

/// LINEAR and MATMUL for element type T (float, double or bf16).
template <typename T> static bool runGemm(Call &c) {
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
  matmul(a.data<T>(), b.data<T>(), batch, m, n, kk, ta, tb,
         out[0]->data<T>());
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
static bool reduceSumLow(Call &c, const Tensor &x, Tensor &y) {
  std::vector<int64_t> dims = c.dims();
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

/// The bf16 kernels of mixed precision: the GEMMs (bf16 operands, fp32
/// accumulation) and the bias gradient's row sum (accumulated in float).
static bool runBFloat16(Call &c) {
  using cpu::BFloat16;
  for (const Tensor *t : c.in)
    if (t->dtype != program::BF16)
      return c.fail("mixes element types");
  switch (c.kernel.op()) {
  case program::LINEAR:
  case program::MATMUL:
    return runGemm<BFloat16>(c);
  case program::REDUCE_SUM:
    return reduceSumLow<BFloat16>(c, *c.in[0], *c.out[0]);
  default:
    return c.fail("has no bf16 kernel (mixed precision runs only GEMMs and "
                  "their bias sums in bf16)");
  }
}

/// The fp16 kernels of mixed precision. oneDNN has fp16 matrix products
/// only on CPUs with AVX512-FP16, so the GEMM widens its operands to fp32
/// (exactly), multiplies in fp32 and rounds the result to fp16: fp16
/// numerics (fp16 operands and result, fp32 accumulation) at fp32 speed.
/// fp16 is the GPU's mixed precision; on the CPU bf16 is the fast one.
static bool runHalf(Call &c) {
  for (const Tensor *t : c.in)
    if (t->dtype != program::F16)
      return c.fail("mixes element types");
  switch (c.kernel.op()) {
  case program::LINEAR:
  case program::MATMUL: {
    auto widen = [](const Tensor &t) {
      Tensor w(program::F32, t.shape);
      convert<cpu::Half, float>(t, w);
      return w;
    };
    std::vector<Tensor> wide;
    wide.reserve(c.in.size() + 1);
    Call f32{{}, {}, c.kernel, c.error};
    for (const Tensor *t : c.in) {
      wide.push_back(widen(*t));
      f32.in.push_back(&wide.back());
    }
    wide.emplace_back(program::F32, c.out[0]->shape);
    f32.out.push_back(&wide.back());
    if (!runGemm<float>(f32))
      return false;
    convert<float, cpu::Half>(wide.back(), *c.out[0]);
    return true;
  }
  case program::REDUCE_SUM:
    return reduceSumLow<cpu::Half>(c, *c.in[0], *c.out[0]);
  default:
    return c.fail("has no fp16 kernel (mixed precision runs only GEMMs and "
                  "their bias sums in fp16)");
  }
}

/// Runs the floating-point kernels for element type T.
template <typename T> bool runFloat(Call &c) {
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
    if (block && !c.expect(in[2]->dtype == program::I32 &&
                               in[2]->numElements() == 1,
                           "expects an i32 offset"))
      return false;
    int64_t bad = embedding(ids.data<int32_t>(), ids.numElements(),
                            table.data<T>(), table.shape[0], table.shape[1],
                            out[0]->data<T>(), block,
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
    if (block && !c.expect(in[2]->dtype == program::I32 &&
                               in[2]->numElements() == 1,
                           "expects an i32 offset"))
      return false;
    int64_t bad = embeddingGrad(ids.data<int32_t>(), ids.numElements(),
                                grad.data<T>(), table.shape[0], table.shape[1],
                                table.data<T>(), block,
                                block ? in[2]->data<int32_t>()[0] : 0);
    if (bad >= 0)
      return c.fail("token id outside the vocabulary at position " +
                    std::to_string(bad));
    return true;
  }
  case program::ROW_MAX: {
    int64_t vocab = c.lastDim(*in[0]);
    if (!c.expect(vocab > 0 && out[0]->numElements() * vocab ==
                                   in[0]->numElements(),
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
    if (!c.expect(vocab > 0 && rows * vocab == logits.numElements() &&
                      labels.dtype == program::I32 &&
                      labels.numElements() == rows &&
                      offset.dtype == program::I32 &&
                      offset.numElements() == 1 &&
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
      vocabPartialsGrad(logits.data<T>(), max.data<T>(),
                        labels.data<int32_t>(), rows, vocab, first, valid,
                        in[4]->data<T>(), in[5]->data<T>(), out[0]->data<T>());
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
    if (!readNormalizer(c, in.size() > plain ? in[plain] : nullptr,
                        normalizer))
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
      gelu(in[0]->data<T>(), n, y);
      break;
    case program::GELU_GRAD:
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
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD: {
    const Tensor &q = *in[0];
    int64_t heads = k.attention().num_heads();
    if (!c.expect(q.shape.size() == 3 && heads > 0 && q.shape[2] % heads == 0,
                  "operand shapes do not match"))
      return false;
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

/// Converts between floating-point types.
} // namespace

/// Elements before and after `axis` of `shape`.
static void aroundAxis(const std::vector<int64_t> &shape, int64_t axis,
                       int64_t &outer, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis)
      outer *= shape[d];
    else if (d > axis)
      inner *= shape[d];
  }
}

bool runtime::BlockLayout::isSplit() const {
  for (const auto &a : axes)
    if (!a.empty())
      return true;
  return false;
}

std::vector<int64_t>
runtime::BlockLayout::blockShape(const std::vector<int64_t> &grid) const {
  std::vector<int64_t> block(shape);
  for (size_t d = 0; d < block.size() && d < axes.size(); ++d)
    block[d] /= groupSize(grid, axes[d]);
  return block;
}

/// Copies block `index` along `axis` (blocks of `block.shape[axis]`) from
/// `whole` into `block`, or back when `toWhole`.
static void copyBlock(Tensor &whole, Tensor &block, int64_t axis,
                      int64_t index, bool toWhole) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(block.shape.size()); ++d) {
    if (d < axis)
      outer *= block.shape[d];
    else if (d > axis)
      inner *= block.shape[d];
  }
  int64_t esize = elementSize(block.dtype);
  int64_t chunk = block.shape[axis] * inner * esize;
  int64_t wholeRow = whole.shape[axis] * inner * esize;
  for (int64_t o = 0; o < outer; ++o) {
    std::byte *w = whole.raw() + o * wholeRow + index * chunk;
    std::byte *b = block.raw() + o * chunk;
    if (toWhole)
      std::memcpy(w, b, chunk);
    else
      std::memcpy(b, w, chunk);
  }
}

Tensor runtime::sliceBlock(const Tensor &whole, const BlockLayout &layout,
                           const std::vector<int64_t> &grid, int64_t rank) {
  Tensor current = whole;
  for (size_t d = 0; d < layout.axes.size(); ++d) {
    const std::vector<int64_t> &axes = layout.axes[d];
    int64_t n = groupSize(grid, axes);
    if (n == 1)
      continue;
    std::vector<int64_t> shape = current.shape;
    shape[d] /= n;
    Tensor next(current.dtype, shape);
    copyBlock(current, next, static_cast<int64_t>(d),
              groupIndex(grid, axes, rank), false);
    current = std::move(next);
  }
  return current;
}

bool runtime::gatherBlocks(const Tensor &block, const BlockLayout &layout,
                           const std::vector<int64_t> &grid,
                           Communicator *comm, Tensor &whole,
                           std::string &error) {
  Tensor current = block;
  for (size_t d = 0; d < layout.axes.size(); ++d) {
    const std::vector<int64_t> &axes = layout.axes[d];
    int64_t n = groupSize(grid, axes);
    if (n == 1)
      continue;
    if (!comm) {
      error = "gathering a sharded tensor needs a communicator";
      return false;
    }
    Tensor packed(current.dtype, {n * current.numElements()});
    if (!comm->allGather(current.raw(), packed.raw(), current.numElements(),
                         current.dtype, grid, axes, error))
      return false;
    std::vector<int64_t> shape = current.shape;
    shape[d] *= n;
    Tensor next(current.dtype, shape);
    for (int64_t r = 0; r < n; ++r) {
      Tensor piece = Tensor::view(current.dtype, current.shape,
                                  packed.raw() + r * current.byteSize());
      copyBlock(next, piece, static_cast<int64_t>(d), r, true);
    }
    current = std::move(next);
  }
  whole = std::move(current);
  return true;
}

bool Executor::runCollective(const Kernel &k, std::string &error) {
  Call c{{}, {}, k, error};
  std::vector<int64_t> grid(function.grid_shape().begin(),
                            function.grid_shape().end());
  if (k.op() == program::SHARD_OFFSET) {
    Tensor &y = values[k.outputs(0)];
    const program::ShardOffsetParams &params = k.shard_offset();
    std::vector<int64_t> axes(params.grid_axes().begin(),
                              params.grid_axes().end());
    for (int64_t a : axes)
      if (a < 0 || a >= static_cast<int64_t>(grid.size()))
        return c.fail("grid axis out of range");
    int64_t ranks = groupSize(grid, axes);
    if (y.dtype != program::I32 || y.numElements() != 1)
      return c.fail("expects an i32 scalar result");
    if (ranks > 1 && !communicator)
      return c.fail("runs over " + std::to_string(ranks) +
                    " devices and needs a communicator: run under mpirun");
    int64_t me = ranks > 1 ? groupIndex(grid, axes, communicator->rank()) : 0;
    y.data<int32_t>()[0] = static_cast<int32_t>(me * params.block());
    return true;
  }
  const Tensor &x = *(bound[k.inputs(0)] ? bound[k.inputs(0)]
                                         : &values[k.inputs(0)]);
  Tensor &y = values[k.outputs(0)];
  bool reduce = k.op() == program::ALL_REDUCE ||
                k.op() == program::ALL_REDUCE_MAX;
  const program::CollectiveParams &params = k.collective();
  std::vector<int64_t> axes(params.grid_axes().begin(),
                            params.grid_axes().end());
  for (int64_t a : axes)
    if (a < 0 || a >= static_cast<int64_t>(grid.size()))
      return c.fail("grid axis out of range");
  int64_t ranks = groupSize(grid, axes);
  if (x.dtype != y.dtype)
    return c.fail("operand types do not match");
  if (reduce) {
    if (x.numElements() != y.numElements())
      return c.fail("operand shapes do not match");
    std::memcpy(y.raw(), x.raw(), y.byteSize());
    if (ranks == 1)
      return true;
    if (!communicator)
      return c.fail("sums over " + std::to_string(ranks) +
                    " devices and needs a communicator: run under mpirun");
    std::string why;
    bool ok = k.op() == program::ALL_REDUCE
                  ? communicator->allReduceSum(y.raw(), y.numElements(),
                                               y.dtype, grid, axes, why)
                  : communicator->allReduceMax(y.raw(), y.numElements(),
                                               y.dtype, grid, axes, why);
    return ok || c.fail(why);
  }

  // Gather, scatter and slice move blocks along `axis` of the whole tensor.
  int64_t axis = params.axis();
  bool gather = k.op() == program::ALL_GATHER;
  const Tensor &whole = gather ? y : x;
  const Tensor &block = gather ? x : y;
  if (axis < 0 || axis >= static_cast<int64_t>(whole.shape.size()) ||
      whole.shape.size() != block.shape.size())
    return c.fail("tensor axis out of range");
  for (size_t d = 0; d < whole.shape.size(); ++d)
    if (whole.shape[d] !=
        block.shape[d] * (static_cast<int64_t>(d) == axis ? ranks : 1))
      return c.fail("operand shapes do not match the group of " +
                    std::to_string(ranks) + " devices");
  if (ranks > 1 && !communicator)
    return c.fail("runs over " + std::to_string(ranks) +
                  " devices and needs a communicator: run under mpirun");
  int64_t outer, inner;
  aroundAxis(block.shape, axis, outer, inner);
  // One row of a block along the axis and below it.
  int64_t chunk = block.shape[axis] * inner * elementSize(x.dtype);
  int64_t blockBytes = block.byteSize();
  int64_t me = communicator ? groupIndex(grid, axes, communicator->rank()) : 0;
  if (k.op() == program::ALL_SLICE || ranks == 1) {
    if (gather && ranks == 1) {
      std::memcpy(y.raw(), x.raw(), y.byteSize());
      return true;
    }
    if (k.op() == program::REDUCE_SCATTER) {
      std::memcpy(y.raw(), x.raw(), y.byteSize());
      return true;
    }
    // This rank's block.
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.raw() + o * chunk,
                  x.raw() + (o * ranks + me) * chunk, chunk);
    return true;
  }
  // Blocks are contiguous when nothing lies before the axis; otherwise they
  // are packed (rank-major) around the call.
  std::string why;
  if (gather) {
    if (outer == 1)
      return communicator->allGather(x.raw(), y.raw(), x.numElements(),
                                     x.dtype, grid, axes, why) ||
             c.fail(why);
    std::vector<std::byte> packed(y.byteSize());
    if (!communicator->allGather(x.raw(), packed.data(), x.numElements(),
                                 x.dtype, grid, axes, why))
      return c.fail(why);
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(y.raw() + (o * ranks + r) * chunk,
                    packed.data() + r * blockBytes + o * chunk, chunk);
    return true;
  }
  if (outer == 1)
    return communicator->reduceScatterSum(x.raw(), y.raw(), y.numElements(),
                                          x.dtype, grid, axes, why) ||
           c.fail(why);
  std::vector<std::byte> packed(x.byteSize());
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(packed.data() + r * blockBytes + o * chunk,
                  x.raw() + (o * ranks + r) * chunk, chunk);
  return communicator->reduceScatterSum(packed.data(), y.raw(),
                                        y.numElements(), x.dtype, grid, axes,
                                        why) ||
         c.fail(why);
}

bool Executor::runAccumulate(const Kernel &k, std::string &error) {
  Call c{{}, {}, k, error};
  Executor &body = *bodies.at(&k);
  int64_t micro = k.accumulate().microbatches(),
          stacked = k.accumulate().stacked_inputs();
  std::vector<Tensor> slices(stacked);
  std::vector<const Tensor *> in;
  for (int i = 0; i < k.inputs_size(); ++i) {
    int32_t id = k.inputs(i);
    in.push_back(bound[id] ? bound[id] : &values[id]);
  }
  std::vector<const Tensor *> args(in);
  std::vector<Tensor> parts;
  for (int64_t j = 0; j < micro; ++j) {
    // Microbatch j of each stacked input: a view, no copy.
    for (int64_t i = 0; i < stacked; ++i) {
      const Tensor &whole = *in[i];
      if (whole.shape.empty() || whole.shape[0] % micro != 0)
        return c.fail("input does not hold the microbatches");
      std::vector<int64_t> shape = whole.shape;
      shape[0] /= micro;
      int64_t bytes = whole.byteSize() / micro;
      slices[i] = Tensor::view(whole.dtype, shape,
                               const_cast<std::byte *>(whole.raw()) + j * bytes);
      args[i] = &slices[i];
    }
    if (!body.run(args, parts, error))
      return false;
    for (int o = 0; o < k.outputs_size(); ++o) {
      Tensor &sum = values[k.outputs(o)];
      const Tensor &part = parts[o];
      if (part.dtype != sum.dtype || part.numElements() != sum.numElements())
        return c.fail("body output does not match the result");
      if (j == 0) {
        std::memcpy(sum.raw(), part.raw(), sum.byteSize());
      } else if (sum.dtype == program::F32) {
        float *y = sum.data<float>();
        const float *x = part.data<float>();
        for (int64_t e = 0, n = sum.numElements(); e < n; ++e)
          y[e] += x[e];
      } else if (sum.dtype == program::F64) {
        double *y = sum.data<double>();
        const double *x = part.data<double>();
        for (int64_t e = 0, n = sum.numElements(); e < n; ++e)
          y[e] += x[e];
      } else {
        return c.fail("sums only floating-point values");
      }
    }
  }
  // The profile shows the body's kernels, not one ACCUMULATE block.
  if (profiling && !body.seconds.empty()) {
    double inner = 0;
    for (size_t kind = 0; kind < body.seconds.size(); ++kind) {
      seconds[kind] += body.seconds[kind];
      calls[kind] += body.calls[kind];
      inner += body.seconds[kind];
      body.seconds[kind] = 0;
      body.calls[kind] = 0;
    }
    seconds[program::ACCUMULATE] -= inner;
  }
  return true;
}

void Executor::setCommunicator(Communicator *c) {
  communicator = c;
  for (auto &[kernel, body] : bodies)
    body->setCommunicator(c);
}

void Executor::enableProfiling() {
  profiling = true;
  for (auto &[kernel, body] : bodies)
    body->enableProfiling();
}

bool Executor::runCompiled(const Kernel &k, std::string &error) {
  // Buffers: the inputs', then the outputs'; the kernel's shapes are
  // compiled in and were checked when the executor was created.
  std::vector<void *> buffers;
  int64_t bytes = 0;
  for (int32_t id : k.inputs()) {
    const Tensor &t = bound[id] ? *bound[id] : values[id];
    buffers.push_back(const_cast<std::byte *>(t.raw()));
    bytes += t.byteSize();
  }
  for (int32_t id : k.outputs()) {
    buffers.push_back(values[id].raw());
    bytes += values[id].byteSize();
  }
  auto entry = entries.at(&k);
  int64_t extent = k.compiled().extent();
  // Contiguous blocks of rows, one per thread, when the kernel moves
  // enough bytes to pay for waking the pool.
  bool parallel = extent > 1 && bytes >= (int64_t(1) << 17);
#pragma omp parallel if (parallel)
  {
    int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (extent + threads - 1) / threads;
    int64_t begin = std::min(extent, id * chunk);
    int64_t end = std::min(extent, begin + chunk);
    if (begin < end)
      entry(buffers.data(), begin, end);
  }
  (void)error;
  return true;
}

bool Executor::runKernel(const Kernel &k, std::string &error) {
  Call c{{}, {}, k, error};
  if (k.op() == program::ACCUMULATE)
    return runAccumulate(k, error);
  if (k.op() == program::COMPILED)
    return runCompiled(k, error);
  if (k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX ||
      k.op() == program::SHARD_OFFSET || k.op() == program::ALL_GATHER ||
      k.op() == program::REDUCE_SCATTER || k.op() == program::ALL_SLICE)
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
    if (out.raw() != c.in[0]->raw())
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
    cpu::transpose(x.raw(), x.shape, perm, elementSize(x.dtype),
                   out.raw());
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
    for (const Tensor *t : concat ? c.in : std::vector<const Tensor *>(
                                             c.out.begin(), c.out.end()))
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
  case program::ADAMW: {
    const Tensor &p = *c.in[0];
    int64_t n = p.numElements();
    for (int i = 1; i < 4; ++i)
      if (c.in[i]->dtype != p.dtype || c.in[i]->numElements() != n)
        return c.fail("operand shapes do not match");
    for (Tensor *t : c.out)
      if (t->dtype != p.dtype || t->numElements() != n)
        return c.fail("operand shapes do not match");
    const Tensor &lr = *c.in[4], &step = *c.in[5], &scale = *c.in[6];
    if (lr.dtype != program::F32 || step.dtype != program::I32 ||
        scale.dtype != program::F32 || lr.numElements() != 1 ||
        step.numElements() != 1 || scale.numElements() != 1)
      return c.fail("expects scalar lr, step and scale");
    const program::AdamWParams &h = k.adamw();
    if (c.in.size() > 7) {
      // fp16's overflow flag: a skipped step keeps the state as it is.
      const Tensor &skip = *c.in[7];
      if (skip.dtype != program::F32 || skip.numElements() != 1)
        return c.fail("expects a scalar f32 skip flag");
      if (skip.data<float>()[0] != 0.0f) {
        for (int i = 0; i < 3; ++i) {
          const Tensor &from = *c.in[i == 0 ? 0 : i + 1];
          if (c.out[i]->raw() != from.raw())
            std::memcpy(c.out[i]->raw(), from.raw(), from.byteSize());
        }
        return true;
      }
    }
    double lrv = lr.data<float>()[0], sv = scale.data<float>()[0];
    int64_t t = step.data<int32_t>()[0];
    if (p.dtype == program::F32)
      cpu::adamwParallel(p.data<float>(), c.in[1]->data<float>(),
                         c.in[2]->data<float>(), c.in[3]->data<float>(), n, lrv,
                         t, sv, h.beta1(), h.beta2(), h.eps(), h.weight_decay(),
                         c.out[0]->data<float>(), c.out[1]->data<float>(),
                         c.out[2]->data<float>());
    else if (p.dtype == program::F64)
      cpu::adamw(p.data<double>(), c.in[1]->data<double>(),
                 c.in[2]->data<double>(), c.in[3]->data<double>(), n, lrv, t,
                 sv, h.beta1(), h.beta2(), h.eps(), h.weight_decay(),
                 c.out[0]->data<double>(), c.out[1]->data<double>(),
                 c.out[2]->data<double>());
    else
      return c.fail("expects f32 or f64 parameters");
    return true;
  }
  case program::CAST: {
    const Tensor &x = *c.in[0];
    if (x.numElements() != out.numElements())
      return c.fail("operand shapes do not match");
    if (x.dtype == out.dtype) {
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
      return c.fail(std::string("no cast from ") + dtypeName(x.dtype) +
                    " to " + dtypeName(out.dtype) + " on the CPU yet");
    }
    return true;
  }
  default:
    break;
  }

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

bool Executor::injectInfinityBefore(program::OpKind op) {
  for (int i = 0; i < function.kernels_size(); ++i)
    if (function.kernels(i).op() == op && function.kernels(i).inputs_size()) {
      poisonKernel = i;
      return true;
    }
  return false;
}

bool Executor::canOverwriteInput(int output, int input) const {
  if (output < 0 || output >= function.outputs_size() || input < 0 ||
      input >= function.inputs_size())
    return false;
  int32_t in = function.inputs(input), out = function.outputs(output);
  if (in == out)
    return false;
  int writer = -1, lastRead = -1;
  for (int i = 0; i < function.kernels_size(); ++i) {
    const Kernel &k = function.kernels(i);
    for (int32_t id : k.outputs())
      if (id == out)
        writer = i;
    for (int32_t id : k.inputs())
      if (id == in)
        lastRead = i;
  }
  if (writer < 0)
    return false;
  if (lastRead < writer)
    return true;
  // The writer reads the input itself: safe when it reads each element
  // before writing it at the same index.
  return lastRead == writer &&
         function.kernels(writer).op() == program::ADAMW;
}

bool Executor::run(const std::vector<const Tensor *> &inputs,
                   std::vector<Tensor> &outputs, std::string &error) {
  if (static_cast<int>(inputs.size()) != function.inputs_size()) {
    error = "function '" + function.name() + "' takes " +
            std::to_string(function.inputs_size()) + " inputs, got " +
            std::to_string(inputs.size());
    return false;
  }
  std::fill(bound.begin(), bound.end(), nullptr);
  for (int i = 0; i < function.inputs_size(); ++i) {
    int32_t id = function.inputs(i);
    const Tensor &expected = values[id];
    if (inputs[i]->dtype != expected.dtype ||
        inputs[i]->shape != expected.shape) {
      error = "input #" + std::to_string(i) + " ('" +
              function.values(id).name() + "') has the wrong type";
      return false;
    }
    bound[id] = inputs[i];
  }
  // Outputs the caller provides buffers for are computed in place: their
  // values become views of those buffers for this run. A value returned
  // twice, or an input returned as is, takes the copying path below.
  int nout = function.outputs_size();
  std::vector<bool> inPlace(nout, false);
  std::vector<Tensor> saved;
  if (static_cast<int>(outputs.size()) == nout) {
    std::vector<int> uses(values.size(), 0);
    for (int32_t id : function.outputs())
      ++uses[id];
    for (int i = 0; i < nout; ++i) {
      int32_t id = function.outputs(i);
      Tensor &o = outputs[i];
      if (uses[id] != 1 || bound[id] || o.dtype != values[id].dtype ||
          o.shape != values[id].shape || !o.raw())
        continue;
      inPlace[i] = true;
    }
    saved.resize(nout);
    for (int i = 0; i < nout; ++i)
      if (inPlace[i]) {
        int32_t id = function.outputs(i);
        saved[i] = std::move(values[id]);
        values[id] = Tensor::view(outputs[i].dtype, outputs[i].shape,
                                  outputs[i].raw());
      }
  }
  auto restore = [&] {
    for (int i = 0; i < static_cast<int>(saved.size()); ++i)
      if (inPlace[i])
        values[function.outputs(i)] = std::move(saved[i]);
  };
  // Storage for the unplanned values this run writes itself (kept for
  // the next runs).
  for (size_t id = 0; id < values.size(); ++id)
    if (!values[id].raw() && !bound[id] && values[id].byteSize() > 0)
      values[id] = Tensor(values[id].dtype, values[id].shape);
  if (poisonKernel >= 0) {
    // Fault injection: the poisoned kernel's first input gets +inf.
    int at = poisonKernel;
    poisonKernel = -1;
    for (int i = 0; i < function.kernels_size(); ++i) {
      if (i == at) {
        const Kernel &k = function.kernels(i);
        int32_t id = k.inputs(0);
        Tensor &t = values[id];
        if (bound[id] || !t.raw() || t.numElements() == 0 ||
            (t.dtype != program::F32 && t.dtype != program::F64)) {
          error = "cannot inject an infinity into the input of " +
                  program::OpKind_Name(k.op());
          restore();
          return false;
        }
        if (t.dtype == program::F32)
          t.data<float>()[0] = std::numeric_limits<float>::infinity();
        else
          t.data<double>()[0] = std::numeric_limits<double>::infinity();
      }
      if (!runKernel(function.kernels(i), error)) {
        restore();
        return false;
      }
    }
  } else if (!profiling) {
    for (const Kernel &k : function.kernels())
      if (!runKernel(k, error)) {
        restore();
        return false;
      }
  } else {
    seconds.resize(program::OpKind_ARRAYSIZE, 0.0);
    calls.resize(program::OpKind_ARRAYSIZE, 0);
    for (const Kernel &k : function.kernels()) {
      auto start = std::chrono::steady_clock::now();
      if (!runKernel(k, error)) {
        restore();
        return false;
      }
      seconds[k.op()] += std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
      ++calls[k.op()];
    }
  }
  restore();
  outputs.resize(nout);
  for (int i = 0; i < nout; ++i) {
    if (inPlace[i])
      continue;
    int32_t id = function.outputs(i);
    outputs[i] = bound[id] ? *bound[id] : values[id];
  }
  return true;
}
