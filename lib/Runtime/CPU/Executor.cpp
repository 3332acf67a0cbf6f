//===- Executor.cpp - Run a compiled gptc function on the CPU --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `create` checks everything a kernel relies on (ids in range, dtypes, the
// arity of every kernel and its parameter message, the element counts of
// related operands), so that a corrupt or hand-edited artifact is an
// error, not an out-of-bounds access. `run` binds the inputs and runs the
// kernels in order: generated ones and accumulation here, the others in
// Dispatch.cpp and Collectives.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelCall.h"

#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/KernelProfile.h"
#include "gptc/Runtime/Trace.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <omp.h>

using namespace gptc;
using namespace gptc::runtime;
using detail::Call;
using program::DType;
using program::Kernel;
using program::OpKind;

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
  case program::ATTENTION_BLOCK:
  case program::ATTENTION_BLOCK_GRAD:
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
  case program::MULTI_ADAMW:
    return Kernel::kMultiAdamw;
  case program::UNARY:
  case program::BINARY:
    return Kernel::kElementwise;
  case program::ALL_REDUCE:
  case program::ALL_REDUCE_MAX:
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
  case program::ALL_SLICE:
  case program::SHIFT:
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
  case program::UNARY:
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
  case program::BINARY:
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
    // The queries' positions last, with context parallelism.
    arity = {3, 4, 1};
    return true;
  case program::LAYER_NORM_GRAD:
    arity = {3, 3, 3};
    return true;
  case program::CAUSAL_ATTENTION_GRAD:
    arity = {4, 5, 3};
    return true;
  case program::ATTENTION_BLOCK:
    arity = {5, 5, 2};
    return true;
  case program::ATTENTION_BLOCK_GRAD:
    arity = {7, 7, 3};
    return true;
  case program::ATTENTION_MERGE:
    arity = {4, 4, 2};
    return true;
  case program::ATTENTION_MERGE_GRAD:
    arity = {6, 6, 4};
    return true;
  case program::SHIFT:
    arity = {1, 1, 1};
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
  case program::MULTI_ADAMW:
    arity = {7, -1, -1}; // 4n + 3 [+ 1] inputs, 3n outputs
    return true;
  case program::ALL_REDUCE: // n inputs, n outputs (a bucket)
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
    arity = {1, -1, -1};
    return true;
  case program::ALL_REDUCE_MAX:
  case program::ROW_MAX:
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
    exec->arena.reset(
        static_cast<std::byte *>(std::aligned_alloc(64, rounded)));
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
      int64_t bytes, end;
      if (__builtin_mul_overflow(
              n, static_cast<int64_t>(elementSize(v.type().dtype())), &bytes) ||
          __builtin_add_overflow(v.offset(), bytes, &end) || end > arenaBytes ||
          v.offset() % 64 != 0)
        return fail("value #" + std::to_string(i) +
                    " is planned outside the arena");
      exec->values[i] = Tensor::view(v.type().dtype(), std::move(shape),
                                     exec->arena.get() + v.offset());
    } else {
      // Unplanned: the function's inputs (bound by the caller at run
      // time) and outputs (usually written into the caller's buffers)
      // get storage only when a run needs it, so that a training step's
      // state is not held twice.
      exec->values[i] =
          Tensor::view(v.type().dtype(), std::move(shape), nullptr);
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
    // A GEMM with an epilogue (gptc.fused_gemm) reads and writes more.
    using MP = program::MatmulParams;
    MP::Epilogue epilogue = k.has_matmul() ? k.matmul().epilogue() : MP::NONE;
    if (epilogue != MP::NONE) {
      bool linear = k.op() == program::LINEAR;
      if (linear && epilogue == MP::GELU_AUX && !k.matmul().transpose_lhs() &&
          !k.matmul().transpose_rhs())
        arity = {2, 3, 2};
      else if (!linear && k.op() == program::MATMUL &&
               (epilogue == MP::DGELU || epilogue == MP::DGELU_BGRAD))
        arity = {3, 3, epilogue == MP::DGELU ? 1 : 2};
      else if (!linear && k.op() == program::MATMUL && epilogue == MP::BGRAD)
        arity = {2, 2, 2};
      else
        return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                    k.location() + " has the epilogue " +
                    MP::Epilogue_Name(epilogue) + ", which it does not take");
    }
    int nin = k.inputs_size(), nout = k.outputs_size();
    if (nin < arity.minInputs ||
        (arity.maxInputs >= 0 && nin > arity.maxInputs) ||
        (arity.outputs >= 0 && nout != arity.outputs) || nout == 0)
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " has the wrong number of operands");
    // GELU's elementwise parameters (the exact form) are optional.
    bool optionalParams =
        (k.op() == program::GELU || k.op() == program::GELU_GRAD) &&
        k.params_case() == Kernel::kElementwise;
    if (k.params_case() != paramsOf(k.op()) && !optionalParams &&
        !(epilogue != MP::NONE && k.params_case() == Kernel::kMatmul))
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " does not carry its op's parameters");
    bool bucketable = k.op() == program::ALL_REDUCE ||
                      k.op() == program::ALL_GATHER ||
                      k.op() == program::REDUCE_SCATTER;
    if (bucketable && nin != nout)
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " needs one output per input");
    if (bucketable && k.op() != program::ALL_REDUCE && nin > 1 &&
        k.collective().axis() != 0)
      return fail("kernel " + program::OpKind_Name(k.op()) + " at " +
                  k.location() + " is a bucket along axis " +
                  std::to_string(k.collective().axis()) +
                  " (buckets gather and scatter along axis 0)");
    if (k.op() == program::MULTI_ADAMW) {
      // n parameters: 4n tensors, lr, step, scale [, skip] -> 3n results,
      // one weight decay each.
      int n = nout / 3, extra = nin - 4 * n;
      if (nout % 3 != 0 || (extra != 3 && extra != 4) ||
          k.multi_adamw().weight_decays_size() != n)
        return fail("kernel MULTI_ADAMW at " + k.location() +
                    " needs 4 "
                    "tensors, lr, step and scale (and a skip flag) per update "
                    "and one weight decay per parameter");
    }
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
    body->viewOutputs = true;
    exec->bodies[&k] = std::move(body);
  }
  // The collectives a run may keep in flight over later kernels: those
  // with at least one kernel between them and their first use.
  exec->overlapWait.assign(static_cast<size_t>(function.kernels_size()), 0);
  for (const ScheduledCollective &c :
       scheduleCollectives(exec->function, /*oneStream=*/false))
    if (c.waitBefore > c.kernel + 1)
      exec->overlapWait[c.kernel] = c.waitBefore;
  exec->callerBuffer.assign(exec->values.size(), 0);
  return exec;
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
      slices[i] = Tensor::view(
          whole.dtype, shape, const_cast<std::byte *>(whole.raw()) + j * bytes);
      args[i] = &slices[i];
    }
    // Views of the body's own outputs (viewOutputs), not copies.
    parts.clear();
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
  return true;
}

void Executor::setCommunicator(Communicator *c) {
  communicator = c;
  for (auto &[kernel, body] : bodies)
    body->setCommunicator(c);
}

void Executor::enableProfiling() {
  profiling = true;
  times.reset(function);
  // The bodies' kernels, in the order of their ACCUMULATE kernels.
  for (int i = 0; i < function.kernels_size(); ++i) {
    auto it = bodies.find(&function.kernels(i));
    if (it == bodies.end())
      continue;
    it->second->enableProfiling();
    times.addBody(it->second->times);
  }
}

std::vector<KernelTime> Executor::profile() const { return times.kernels(); }

void Executor::setTrace(TraceRecorder *t) {
  trace = t;
  for (auto &[kernel, body] : bodies)
    body->setTrace(t);
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

bool Executor::injectInfinityBefore(program::OpKind op) {
  for (int i = 0; i < function.kernels_size(); ++i)
    if (function.kernels(i).op() == op && function.kernels(i).inputs_size()) {
      poisonKernel = i;
      return true;
    }
  return false;
}

FunctionRunner::~FunctionRunner() = default;
Backend::~Backend() = default;

namespace {
/// The CPU backend: Executors over the program's kernel library.
class CpuBackend : public Backend {
public:
  std::string describe() const override { return "cpu"; }
  std::unique_ptr<FunctionRunner>
  createRunner(const program::Function &function, std::string &error) override {
    return Executor::create(function, error, kernels.get());
  }
  /// The generated kernels (outliving the executors, which the trainer
  /// destroys first).
  std::unique_ptr<KernelLibrary> kernels;
};
} // namespace

std::unique_ptr<Backend>
gptc::runtime::createCpuBackend(const program::Program &program,
                                std::string &error) {
  auto backend = std::make_unique<CpuBackend>();
  if (!program.kernel_library().empty()) {
    backend->kernels = KernelLibrary::load(program.kernel_library(), error);
    if (!backend->kernels)
      return nullptr;
  }
  return backend;
}

bool gptc::runtime::canOverwriteInput(const program::Function &function,
                                      int output, int input) {
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
  // before writing it at the same index. MULTI_ADAMW walks its tensors in
  // parallel: only a tensor's own update may overwrite it.
  if (lastRead != writer)
    return false;
  const Kernel &k = function.kernels(writer);
  if (k.op() == program::ADAMW)
    return true;
  if (k.op() != program::MULTI_ADAMW)
    return false;
  int n = k.outputs_size() / 3, outPos = -1;
  for (int i = 0; i < k.outputs_size(); ++i)
    if (k.outputs(i) == out)
      outPos = i;
  if (n == 0 || outPos < 0)
    return false;
  // Every tensor position the input is read at must be the output's.
  for (int i = 0; i < k.inputs_size(); ++i)
    if (k.inputs(i) == in && (i >= 4 * n || i % n != outPos % n))
      return false;
  return true;
}

bool Executor::waitInFlight(size_t at, std::string &error, bool failed) {
  // After a failure every collective in flight is waited for (the buffers
  // must outlive them) and their errors are dropped: the first one is
  // reported.
  bool timed = profiling || trace;
  for (size_t i = 0; i < inFlight.size();) {
    InFlight &f = inFlight[i];
    if (!failed && f.waitBefore != at) {
      ++i;
      continue;
    }
    double start = timed ? TraceRecorder::now() : 0;
    std::string why;
    bool ok = true;
    for (int64_t r : f.requests)
      ok = communicator->wait(r, why) && ok;
    const Kernel &k = function.kernels(static_cast<int>(f.kernel));
    if (!ok && !failed) {
      error = "kernel at " + k.location() + ": " + why;
      inFlight.erase(inFlight.begin() + static_cast<std::ptrdiff_t>(i));
      std::string ignored;
      waitInFlight(at, ignored, /*failed=*/true);
      return false;
    }
    if (timed) {
      // The time this run waited for it counts as the collective's: what
      // the overlap left exposed.
      double end = TraceRecorder::now();
      times.add(static_cast<int>(f.kernel), (end - start) * 1e-6,
                /*again=*/true);
      if (trace)
        trace->slice(kernelName(k) + " (wait)", "kernel", start, end, 1,
                     k.location());
    }
    inFlight.erase(inFlight.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return true;
}

bool Executor::runKernels(std::string &error) {
  size_t count = static_cast<size_t>(function.kernels_size());
  bool overlap = communicator && communicator->overlapsCollectives();
  bool timed = profiling || trace;
  int poison = poisonKernel;
  poisonKernel = -1;
  for (size_t i = 0; i < count; ++i) {
    const Kernel &k = function.kernels(static_cast<int>(i));
    if (!inFlight.empty() && !waitInFlight(i, error))
      return false;
    if (static_cast<int>(i) == poison) {
      // Fault injection: the poisoned kernel's first input gets +inf.
      int32_t id = k.inputs(0);
      Tensor &t = values[id];
      if (bound[id] || !t.raw() || t.numElements() == 0 ||
          (t.dtype != program::F32 && t.dtype != program::F64)) {
        error = "cannot inject an infinity into the input of " +
                program::OpKind_Name(k.op());
        std::string ignored;
        waitInFlight(count, ignored, /*failed=*/true);
        return false;
      }
      if (t.dtype == program::F32)
        t.data<float>()[0] = std::numeric_limits<float>::infinity();
      else
        t.data<double>()[0] = std::numeric_limits<double>::infinity();
    }
    // An ACCUMULATE's own time leaves out its body's kernels, which the
    // body's profile lists.
    auto body = timed ? bodies.find(&k) : bodies.end();
    double inner =
        body != bodies.end() ? body->second->times.totalSeconds() : 0.0;
    double start = timed ? TraceRecorder::now() : 0;
    bool async = overlap && overlapWait[i] != 0;
    if (async) {
      for (int32_t id : k.inputs())
        async = async && !callerBuffer[id];
      for (int32_t id : k.outputs())
        async = async && !callerBuffer[id];
    }
    bool ok;
    if (async) {
      std::vector<int64_t> requests;
      ok = runCollective(k, error, &requests);
      if (ok && !requests.empty())
        inFlight.push_back({overlapWait[i], i, std::move(requests)});
    } else {
      ok = runKernel(k, error);
    }
    if (!ok) {
      std::string ignored;
      waitInFlight(count, ignored, /*failed=*/true);
      return false;
    }
    if (timed) {
      double end = TraceRecorder::now();
      if (body != bodies.end())
        inner = body->second->times.totalSeconds() - inner;
      times.add(static_cast<int>(i), (end - start) * 1e-6 - inner);
      if (trace)
        trace->slice(kernelName(k), "kernel", start, end, 1, k.location());
    }
    // MPI moves a started collective's data only inside its calls. The
    // time that takes (copies, sums) counts as the oldest collective's.
    if (!inFlight.empty()) {
      double start = timed ? TraceRecorder::now() : 0;
      communicator->progress();
      if (timed)
        times.add(static_cast<int>(inFlight.front().kernel),
                  (TraceRecorder::now() - start) * 1e-6, /*again=*/true);
    }
  }
  return waitInFlight(count, error);
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
        values[id] =
            Tensor::view(outputs[i].dtype, outputs[i].shape, outputs[i].raw());
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
  for (int32_t id : function.inputs())
    callerBuffer[id] = 1;
  for (int i = 0; i < nout; ++i)
    if (inPlace[i])
      callerBuffer[function.outputs(i)] = 1;
  bool ok = runKernels(error);
  std::fill(callerBuffer.begin(), callerBuffer.end(), 0);
  if (!ok) {
    restore();
    return false;
  }
  restore();
  outputs.resize(nout);
  for (int i = 0; i < nout; ++i) {
    if (inPlace[i])
      continue;
    int32_t id = function.outputs(i);
    const Tensor &t = bound[id] ? *bound[id] : values[id];
    if (viewOutputs)
      outputs[i] =
          Tensor::view(t.dtype, t.shape, const_cast<std::byte *>(t.raw()));
    else
      outputs[i] = t;
  }
  return true;
}
