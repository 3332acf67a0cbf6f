//===- CudaRunner.cpp - A function run on the GPU ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One function on the GPU: preparing it (launch plans, buffers, scratch)
// and running it (kernels, CUDA graphs, the profile) (CudaRunner.h says how the
// backend's files divide).
//
//===----------------------------------------------------------------------===//

#include "CudaRunner.h"

using namespace gptc;
using namespace gptc::runtime;
using namespace gptc::runtime::cudart;

//===----------------------------------------------------------------------===//
// Preparing a function
//===----------------------------------------------------------------------===//

std::unique_ptr<CudaRunner>
CudaRunner::create(CudaBackend &backend, const program::Function &function,
                   std::string &error) {
  std::unique_ptr<CudaRunner> r(new CudaRunner(backend, function));
  if (!r->prepare(error))
    return nullptr;
  return r;
}

void *CudaRunner::ownBuffer(int32_t id) {
  std::unique_ptr<DeviceBuffer> &b = own[id];
  if (!b) {
    b = std::make_unique<DeviceBuffer>();
    const program::Value &v = function.values(id);
    GPTC_CUDA_CHECK(api().cudaMalloc(
        &b->ptr,
        std::max<int64_t>(1, numElements(v) * elementSize(v.type().dtype()))));
    b->bytes = numElements(v) * elementSize(v.type().dtype());
  }
  return b->ptr;
}

bool CudaRunner::prepare(std::string &error) {
  auto fail = [&](const std::string &message) {
    error = "function '" + function.name() + "' on the GPU: " + message;
    return false;
  };
  int64_t count = function.values_size();
  if (function.arena_bytes() < 0)
    return fail("negative arena size");
  size_t arenaBytes = static_cast<size_t>(function.arena_bytes());
  if (injectedFault() == Fault::ShortArena) {
    // 4 bytes short of the end of the last value planned in it.
    int64_t end = 0;
    for (const program::Value &v : function.values())
      if (v.offset() >= 0)
        end = std::max(end, v.offset() +
                                numElements(v) * elementSize(v.type().dtype()));
    arenaBytes = static_cast<size_t>(std::max<int64_t>(end - 4, 0));
  }
  if (function.arena_bytes() > 0 && !arena.allocate(arenaBytes))
    return fail("cannot allocate an arena of " +
                std::to_string(function.arena_bytes()) + " bytes");
  ptr.assign(count, nullptr);
  for (int64_t i = 0; i < count; ++i) {
    const program::Value &v = function.values(i);
    if (v.id() != i)
      return fail("value #" + std::to_string(i) + " has id " +
                  std::to_string(v.id()));
    if (elementSize(v.type().dtype()) == 0)
      return fail("value #" + std::to_string(i) + " has no known dtype");
    for (int64_t d : v.type().shape())
      if (d < 0)
        return fail("value #" + std::to_string(i) + " has an invalid shape");
    int64_t bytes = numElements(v) * elementSize(v.type().dtype());
    if (v.offset() >= 0) {
      if (v.offset() + bytes > function.arena_bytes())
        return fail("value #" + std::to_string(i) +
                    " is planned outside the arena");
      ptr[i] = static_cast<std::byte *>(arena.ptr) + v.offset();
    }
  }
  home = ptr;
  auto validId = [&](int32_t id) { return id >= 0 && id < count; };
  for (int32_t id : function.inputs())
    if (!validId(id))
      return fail("input id out of range");
  for (int32_t id : function.outputs())
    if (!validId(id))
      return fail("output id out of range");
  // Unplanned intermediates get their own buffers now; inputs and outputs
  // are bound per run.
  std::vector<bool> bound(count, false);
  for (int32_t id : function.inputs())
    bound[id] = true;
  for (int32_t id : function.outputs())
    bound[id] = true;
  size_t scratchBytes = 0, statsFloats = 0;
  for (size_t index = 0; index < static_cast<size_t>(function.kernels_size());
       ++index) {
    const Kernel &k = function.kernels(static_cast<int>(index));
    std::string where = program::OpKind_Name(k.op()) + " at " + k.location();
    for (int32_t id : k.inputs())
      if (!validId(id))
        return fail(where + " reads a value out of range");
    for (int32_t id : k.outputs()) {
      if (!validId(id))
        return fail(where + " writes a value out of range");
      if (!ptr[id] && !bound[id])
        ptr[id] = ownBuffer(id);
    }
    auto dtypeOf = [&](int32_t id) {
      return function.values(id).type().dtype();
    };
    auto shapeOf = [&](int32_t id) {
      const auto &s = function.values(id).type().shape();
      return std::vector<int64_t>(s.begin(), s.end());
    };
    switch (k.op()) {
    case program::COMPILED: {
      const std::string &symbol = k.compiled().symbol();
      auto it = backend.plans.find(symbol);
      if (it == backend.plans.end())
        return fail("the CUDA image has no kernel '" + symbol + "' (" +
                    k.location() + ")");
      const program::CudaKernel &plan = *it->second;
      int64_t buffers = plan.num_operands() + plan.num_results();
      if (plan.num_operands() != k.inputs_size() ||
          plan.num_results() != k.outputs_size())
        return fail("kernel '" + symbol + "' has " +
                    std::to_string(k.inputs_size()) + " operands and " +
                    std::to_string(k.outputs_size()) +
                    " results; its launch plan another count");
      std::vector<int64_t> offsets;
      size_t temporaries = 0;
      for (int64_t bytes : plan.temporary_bytes()) {
        offsets.push_back(static_cast<int64_t>(temporaries));
        temporaries += (static_cast<size_t>(bytes) + 255) / 256 * 256;
      }
      scratchBytes = std::max(scratchBytes, temporaries);
      temporaryOffsets[index] = offsets;
      std::vector<Launch> ls;
      for (const program::CudaLaunch &l : plan.launches()) {
        Launch launch;
        launch.function = backend.functions.at(l.function());
        if (l.grid_size() != 3 || l.block_size() != 3)
          return fail("kernel '" + symbol + "' has a launch without 3-d sizes");
        for (int64_t d : l.grid())
          if (d < 1 || d > INT32_MAX)
            return fail("kernel '" + symbol + "' has an invalid grid");
        for (int64_t d : l.block())
          if (d < 1 || d > 1024)
            return fail("kernel '" + symbol + "' has an invalid block");
        launch.grid = dim3(static_cast<unsigned>(l.grid(0)),
                           static_cast<unsigned>(l.grid(1)),
                           static_cast<unsigned>(l.grid(2)));
        launch.block = dim3(static_cast<unsigned>(l.block(0)),
                            static_cast<unsigned>(l.block(1)),
                            static_cast<unsigned>(l.block(2)));
        for (int64_t a : l.args()) {
          if (a < 0 || a >= buffers + plan.temporary_bytes_size())
            return fail("kernel '" + symbol + "' passes buffer " +
                        std::to_string(a) + ", which it does not have");
          if (a < plan.num_operands())
            launch.args.push_back(k.inputs(static_cast<int>(a)));
          else if (a < buffers)
            launch.args.push_back(
                k.outputs(static_cast<int>(a - plan.num_operands())));
          else
            launch.args.push_back(-1 - (a - buffers));
        }
        ls.push_back(std::move(launch));
      }
      launches[index] = std::move(ls);
      break;
    }
    case program::LINEAR:
    case program::MATMUL: {
      auto g = std::make_unique<Gemm>();
      if (!prepareGemm(k, *g, error))
        return fail(where + ": " + error);
      gemms[index] = std::move(g);
      break;
    }
    case program::CAUSAL_ATTENTION:
    case program::CAUSAL_ATTENTION_GRAD: {
      bool grad = k.op() == program::CAUSAL_ATTENTION_GRAD;
      if (k.inputs_size() == (grad ? 5 : 4))
        return fail(where + ": attention from a part of the sequence "
                            "(context parallelism) has no GPU kernel yet; "
                            "a mesh with a cp axis runs on the CPU "
                            "(docs/Limitations.md)");
      if (k.inputs_size() != (grad ? 4 : 3) ||
          k.outputs_size() != (grad ? 3 : 1) || !k.has_attention())
        return fail(where + " is malformed");
      std::vector<int64_t> q = shapeOf(k.inputs(0));
      int64_t heads = k.attention().num_heads();
      if (q.size() != 3 || heads < 1 || q[2] % heads != 0)
        return fail(where + ": operand shapes do not match");
      program::DType dtype = dtypeOf(k.inputs(0));
      std::optional<cuda::AttentionType> type = attentionType(dtype);
      for (int32_t id : k.inputs())
        if (!type || shapeOf(id) != q || dtypeOf(id) != dtype)
          return fail(where + ": the GPU's attention takes [B, T, C] "
                              "operands of one shape and one type: f32, "
                              "bf16 or f16");
      for (int32_t id : k.outputs())
        if (shapeOf(id) != q || dtypeOf(id) != dtype)
          return fail(where + ": operand shapes do not match");
      if (!cuda::attentionSupportsHeadDim(q[2] / heads))
        return fail(where +
                    ": the GPU's attention takes heads 8, 16, 32, "
                    "64 or 128 wide, not " +
                    std::to_string(q[2] / heads));
      if (grad)
        statsFloats = std::max<size_t>(
            statsFloats, cuda::attentionScratchFloats(q[0], q[1], heads));
      break;
    }
    case program::EMBEDDING_GRAD: {
      if (k.inputs_size() < 2 || k.outputs_size() != 1)
        return fail(where + " is malformed");
      std::vector<int64_t> table = shapeOf(k.outputs(0));
      if (dtypeOf(k.inputs(0)) != program::I32 ||
          dtypeOf(k.inputs(1)) != program::F32 ||
          dtypeOf(k.outputs(0)) != program::F32 || table.size() != 2 ||
          numElements(function.values(k.inputs(1))) !=
              numElements(function.values(k.inputs(0))) * table[1] ||
          (k.inputs_size() > 2 && dtypeOf(k.inputs(2)) != program::I32))
        return fail(where + ": the GPU's embedding gradient takes i32 ids "
                            "and f32 gradients of matching shapes");
      break;
    }
    case program::RESHAPE:
      if (k.inputs_size() != 1 || k.outputs_size() != 1 ||
          numElements(function.values(k.inputs(0))) *
                  elementSize(dtypeOf(k.inputs(0))) !=
              numElements(function.values(k.outputs(0))) *
                  elementSize(dtypeOf(k.outputs(0))))
        return fail(where + ": operand sizes do not match");
      break;
    case program::ACCUMULATE: {
      const program::AccumulateParams &a = k.accumulate();
      if (!k.has_accumulate() || a.microbatches() < 1 ||
          a.stacked_inputs() < 0 || a.stacked_inputs() > k.inputs_size() ||
          a.body().inputs_size() != k.inputs_size() ||
          a.body().outputs_size() != k.outputs_size())
        return fail(where + " is malformed");
      for (int64_t i = 0; i < a.stacked_inputs(); ++i) {
        std::vector<int64_t> s = shapeOf(k.inputs(static_cast<int>(i)));
        if (s.empty() || s[0] % a.microbatches() != 0)
          return fail(where + ": an input does not hold the microbatches");
      }
      for (int32_t id : k.outputs()) {
        DType t = dtypeOf(id);
        if (t != program::F32 && t != program::F64 && t != program::BF16 &&
            t != program::F16)
          return fail(where + " sums only floating-point values");
      }
      std::unique_ptr<CudaRunner> body =
          CudaRunner::create(backend, a.body(), error);
      if (!body)
        return false;
      bodies[index] = std::move(body);
      break;
    }
    case program::ATTENTION_BLOCK:
    case program::ATTENTION_BLOCK_GRAD:
    case program::ATTENTION_MERGE:
    case program::ATTENTION_MERGE_GRAD:
    case program::SHIFT:
      return fail(where + ": ring attention (context parallelism) has no "
                          "GPU kernel yet; a mesh with a cp axis runs on the "
                          "CPU (docs/Limitations.md)");
    case program::ALL_REDUCE:
    case program::ALL_REDUCE_MAX:
    case program::ALL_GATHER:
    case program::REDUCE_SCATTER:
    case program::ALL_SLICE:
    case program::SHARD_OFFSET:
      if (!prepareCollective(k, index, error))
        return fail(where + ": " + error);
      break;
    default:
      return fail(where + " has no CUDA implementation (the GPU runs generated "
                          "kernels, GEMMs, attention, the embedding gradient, "
                          "reshapes, microbatch accumulation and "
                          "collectives)");
    }
  }
  waits.assign(function.kernels_size() + 1, {});
  for (const ScheduledCollective &c : scheduleCollectives(function)) {
    if (!comms.count(c.kernel))
      return fail("collective #" + std::to_string(c.kernel) +
                  " was not prepared");
    waits[c.waitBefore].push_back(c.kernel);
  }
  if (scratchBytes && !scratch.allocate(scratchBytes))
    return fail("cannot allocate the kernels' scratch");
  if (statsFloats && !attentionStats.allocate(statsFloats * sizeof(float)))
    return fail("cannot allocate attention's scratch");
  return true;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

void CudaRunner::runKernel(size_t index) {
  const Kernel &k = function.kernels(static_cast<int>(index));
  cudaStream_t stream = backend.stream;
  switch (k.op()) {
  case program::COMPILED: {
    const std::vector<int64_t> &offsets = temporaryOffsets[index];
    std::vector<void *> args;
    std::vector<void *> params;
    for (const Launch &l : launches[index]) {
      args.clear();
      for (int64_t a : l.args)
        args.push_back(a >= 0 ? ptr[a]
                              : static_cast<std::byte *>(scratch.ptr) +
                                    offsets[-1 - a]);
      params.clear();
      for (void *&a : args)
        params.push_back(&a);
      GPTC_CUDA_CHECK(
          api().cudaLaunchKernel(reinterpret_cast<const void *>(l.function),
                                 l.grid, l.block, params.data(), 0, stream));
    }
    return;
  }
  case program::LINEAR:
  case program::MATMUL: {
    Gemm &g = *gemms[index];
    float one = 1.f, zero = 0.f;
    // The bias vector: the bias read, or (fused) the bias gradient written.
    int32_t biasVector = g.fused && g.biasGradId >= 0 ? g.biasGradId : g.biasId;
    if (biasVector >= 0) {
      void *bias = ptr[biasVector];
      GPTC_CUBLAS_CHECK(api().cublasLtMatmulDescSetAttribute(
          g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (g.fused && g.auxId >= 0) {
      void *aux = ptr[g.auxId];
      GPTC_CUBLAS_CHECK(api().cublasLtMatmulDescSetAttribute(
          g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
          sizeof(aux)));
    }
    GPTC_CUBLAS_CHECK(api().cublasLtMatmul(
        backend.lt, g.desc, &one, ptr[g.aId], g.a, ptr[g.bId], g.b, &zero,
        ptr[g.cId], g.c, ptr[g.cId], g.c, &g.algo, backend.workspace.ptr,
        backend.workspace.bytes, stream));
    if (g.fused || g.epilogue == program::MatmulParams::NONE)
      return;
    // The epilogue cuBLASLt could not take, after the plain product.
    int64_t n = g.rows * g.cols;
    switch (g.epilogue) {
    case program::MatmulParams::GELU_AUX:
      GPTC_CUDA_CHECK(cuda::geluEpilogue(g.dtype, ptr[g.auxId],
                                         ptr[k.outputs(0)], n, stream));
      break;
    case program::MatmulParams::DGELU:
    case program::MatmulParams::DGELU_BGRAD:
      GPTC_CUDA_CHECK(
          cuda::dgeluEpilogue(g.dtype, ptr[g.auxId], ptr[g.cId], n, stream));
      if (g.biasGradId >= 0)
        GPTC_CUDA_CHECK(cuda::biasGradEpilogue(
            g.dtype, ptr[g.cId], g.rows, g.cols, ptr[g.biasGradId], stream));
      break;
    case program::MatmulParams::BGRAD: {
      // db sums dy (the lhs, [K, M]) over its rows.
      const program::Value &dy = function.values(k.inputs(0));
      int64_t m = g.rows;
      GPTC_CUDA_CHECK(cuda::biasGradEpilogue(g.dtype, ptr[k.inputs(0)],
                                             m ? numElements(dy) / m : 0, m,
                                             ptr[g.biasGradId], stream));
      break;
    }
    default:
      break;
    }
    return;
  }
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD: {
    const auto &value = function.values(k.inputs(0));
    const auto &s = value.type().shape();
    int64_t heads = k.attention().num_heads();
    cuda::AttentionType type = *attentionType(value.type().dtype());
    auto f = [&](int i) { return ptr[k.inputs(i)]; };
    auto o = [&](int i) { return ptr[k.outputs(i)]; };
    if (k.op() == program::CAUSAL_ATTENTION)
      GPTC_CUDA_CHECK(cuda::attentionForward(type, f(0), f(1), f(2), o(0), s[0],
                                             s[1], s[2], heads, stream));
    else
      GPTC_CUDA_CHECK(cuda::attentionBackward(
          type, f(0), f(1), f(2), f(3), o(0), o(1), o(2),
          static_cast<float *>(attentionStats.ptr), s[0], s[1], s[2], heads,
          stream));
    return;
  }
  case program::EMBEDDING_GRAD: {
    const auto &t = function.values(k.outputs(0)).type().shape();
    int64_t n = numElements(function.values(k.inputs(0)));
    GPTC_CUDA_CHECK(cuda::embeddingGrad(
        static_cast<const int32_t *>(ptr[k.inputs(0)]), n,
        static_cast<const float *>(ptr[k.inputs(1)]), t[0], t[1],
        k.inputs_size() > 2 ? static_cast<const int32_t *>(ptr[k.inputs(2)])
                            : nullptr,
        static_cast<float *>(ptr[k.outputs(0)]), stream));
    return;
  }
  case program::RESHAPE: {
    // The buffer plan stores a reshape where its operand is: then a view.
    void *in = ptr[k.inputs(0)], *out = ptr[k.outputs(0)];
    if (in != out) {
      const program::Value &v = function.values(k.outputs(0));
      GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
          out, in, numElements(v) * elementSize(v.type().dtype()),
          cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  case program::ACCUMULATE: {
    CudaRunner &body = *bodies[index];
    int64_t micro = k.accumulate().microbatches(),
            stacked = k.accumulate().stacked_inputs();
    std::vector<void *> in, out;
    std::string error;
    for (int64_t j = 0; j < micro; ++j) {
      in.clear();
      for (int i = 0; i < k.inputs_size(); ++i) {
        const program::Value &v = function.values(k.inputs(i));
        int64_t bytes = numElements(v) * elementSize(v.type().dtype());
        in.push_back(static_cast<std::byte *>(ptr[k.inputs(i)]) +
                     (i < stacked ? j * (bytes / micro) : 0));
      }
      // The first microbatch writes the sums; later ones write where the
      // body's plan puts its outputs (no buffer outside the plan) and are
      // added to them.
      out.clear();
      for (int o = 0; o < k.outputs_size(); ++o)
        out.push_back(j == 0 ? ptr[k.outputs(o)] : body.plannedOutput(o));
      if (!body.enqueue(in, out, error))
        cuda::fail(error.c_str(), "ACCUMULATE", __FILE__, __LINE__);
      if (j == 0)
        continue;
      for (int o = 0; o < k.outputs_size(); ++o) {
        const program::Value &v = function.values(k.outputs(o));
        GPTC_CUDA_CHECK(cuda::addInPlace(v.type().dtype(), ptr[k.outputs(o)],
                                         out[o], numElements(v), stream));
      }
    }
    return;
  }
  case program::ALL_REDUCE:
  case program::ALL_REDUCE_MAX:
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
    runCollective(index);
    return;
  case program::SHARD_OFFSET: {
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
        ptr[k.outputs(0)], comms[index]->offsetOnDevice.ptr, sizeof(int32_t),
        cudaMemcpyDeviceToDevice, stream));
    return;
  }
  case program::ALL_SLICE: {
    // This rank's block of each row: a strided copy on the compute stream.
    const Collective &c = *comms[index];
    const std::byte *x = static_cast<const std::byte *>(ptr[k.inputs(0)]);
    GPTC_CUDA_CHECK(api().cudaMemcpy2DAsync(
        ptr[k.outputs(0)], c.chunk, x + c.me * c.chunk, c.ranks * c.chunk,
        c.chunk, c.outer, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  default:
    // prepare() admits no other op.
    cuda::fail("unexpected op", program::OpKind_Name(k.op()).c_str(), __FILE__,
               __LINE__);
  }
}

bool CudaRunner::enqueue(const std::vector<void *> &in,
                         std::vector<void *> &out, std::string &error) {
  if (in.size() != static_cast<size_t>(function.inputs_size()) ||
      out.size() != static_cast<size_t>(function.outputs_size())) {
    error = "function '" + function.name() + "' takes " +
            std::to_string(function.inputs_size()) + " inputs and " +
            std::to_string(function.outputs_size()) + " outputs";
    return false;
  }
  for (size_t i = 0; i < in.size(); ++i)
    ptr[function.inputs(static_cast<int>(i))] = in[i];
  // An output that is an input passes it through (a copy after the run).
  std::vector<std::pair<void *, size_t>> passed(out.size(), {nullptr, 0});
  for (size_t i = 0; i < out.size(); ++i) {
    int32_t id = function.outputs(static_cast<int>(i));
    for (size_t j = 0; j < in.size(); ++j)
      if (function.inputs(static_cast<int>(j)) == id) {
        const program::Value &v = function.values(id);
        passed[i] = {in[j], numElements(v) * elementSize(v.type().dtype())};
      }
    if (!out[i])
      out[i] = ownBuffer(id);
    if (!passed[i].first)
      ptr[id] = out[i];
  }
  bool skipWait = injectedFault() == Fault::SkipWait;
  bool timed = profiling || trace;
  if (trace) {
    traceOriginHost = TraceRecorder::now();
    GPTC_CUDA_CHECK(api().cudaEventRecord(traceOrigin, backend.stream));
  }
  for (size_t index = 0; index < static_cast<size_t>(function.kernels_size());
       ++index) {
    const Kernel &k = function.kernels(static_cast<int>(index));
    for (size_t c : waits[index]) {
      if (skipWait) {
        skipWait = false;
        continue;
      }
      GPTC_CUDA_CHECK(
          api().cudaStreamWaitEvent(backend.stream, comms[c]->done, 0));
    }
    // The poison after the waits: a collective may still be writing the
    // poisoned tensor (a gradient's all-reduce) on the other stream.
    if (static_cast<int>(index) == poisonKernel) {
      poisonKernel = -1;
      int32_t target = k.inputs(poisonInput);
      const program::Value &v = function.values(target);
      float f = INFINITY;
      uint16_t bits = v.type().dtype() == program::BF16 ? 0x7f80 : 0x7c00;
      const void *src =
          v.type().dtype() == program::F64   ? static_cast<const void *>(poison)
          : v.type().dtype() == program::F32 ? static_cast<const void *>(&f)
                                             : static_cast<const void *>(&bits);
      GPTC_CUDA_CHECK(
          api().cudaMemcpyAsync(ptr[target], src, elementSize(v.type().dtype()),
                                cudaMemcpyHostToDevice, backend.stream));
      backend.synchronize(backend.stream);
    }
    if (!timed) {
      runKernel(index);
      continue;
    }
    // The device's time between events around the kernel's launches (no
    // synchronization per kernel). A collective runs on the communication
    // stream once the compute stream hands over: timed there, from a
    // compute stream that has drained, so that the time is its own.
    bool collective = isDeviceCollective(k.op());
    if (collective)
      backend.synchronize(backend.stream);
    cudaStream_t stream = collective ? backend.commStream : backend.stream;
    auto body = bodies.find(index);
    double inner =
        body != bodies.end() ? body->second->times.totalSeconds() : 0;
    GPTC_CUDA_CHECK(api().cudaEventRecord(startEvents[index], stream));
    runKernel(index);
    GPTC_CUDA_CHECK(api().cudaEventRecord(stopEvents[index], stream));
    if (body != bodies.end())
      innerSeconds[index] += body->second->times.totalSeconds() - inner;
    recorded[index] = true;
  }
  if (timed) {
    // The events of this enqueue, read once they have all completed.
    for (size_t index = 0; index < recorded.size(); ++index) {
      if (!recorded[index])
        continue;
      recorded[index] = false;
      GPTC_CUDA_CHECK(api().cudaEventSynchronize(stopEvents[index]));
      float ms = 0;
      GPTC_CUDA_CHECK(api().cudaEventElapsedTime(&ms, startEvents[index],
                                                 stopEvents[index]));
      times.add(static_cast<int>(index), ms * 1e-3 - innerSeconds[index]);
      innerSeconds[index] = 0;
      if (trace) {
        float from = 0;
        GPTC_CUDA_CHECK(
            api().cudaEventElapsedTime(&from, traceOrigin, startEvents[index]));
        double start = traceOriginHost + from * 1e3;
        const Kernel &k = function.kernels(static_cast<int>(index));
        trace->slice(kernelName(k), "kernel", start, start + ms * 1e3, 1,
                     k.location());
      }
    }
  }
  for (size_t c : waits[function.kernels_size()])
    GPTC_CUDA_CHECK(
        api().cudaStreamWaitEvent(backend.stream, comms[c]->done, 0));
  for (size_t i = 0; i < out.size(); ++i)
    if (passed[i].first && passed[i].first != out[i])
      GPTC_CUDA_CHECK(
          api().cudaMemcpyAsync(out[i], passed[i].first, passed[i].second,
                                cudaMemcpyDeviceToDevice, backend.stream));
  return true;
}

bool CudaRunner::run(const std::vector<const Tensor *> &inputs,
                     std::vector<Tensor> &outputs, std::string &error) {
  int nin = function.inputs_size(), nout = function.outputs_size();
  if (inputs.size() != static_cast<size_t>(nin)) {
    error = "function '" + function.name() + "' takes " + std::to_string(nin) +
            " inputs, got " + std::to_string(inputs.size());
    return false;
  }
  auto matches = [&](const Tensor &t, int32_t id) {
    const program::Value &v = function.values(id);
    return t.dtype == v.type().dtype() &&
           t.shape == std::vector<int64_t>(v.type().shape().begin(),
                                           v.type().shape().end());
  };
  cudaStream_t stream = backend.stream;
  std::vector<void *> in(nin), out(nout, nullptr);
  for (int i = 0; i < nin; ++i) {
    const Tensor &t = *inputs[i];
    int32_t id = function.inputs(i);
    if (!matches(t, id)) {
      error = "input " + std::to_string(i) + " of '" + function.name() +
              "' has the wrong type or shape";
      return false;
    }
    if (Mirror *m = backend.findMirror(t.raw())) {
      if (!m->deviceValid) {
        GPTC_CUDA_CHECK(api().cudaMemcpyAsync(m->memory.ptr, t.raw(),
                                              t.byteSize(),
                                              cudaMemcpyHostToDevice, stream));
        m->deviceValid = true;
      }
      in[i] = m->memory.ptr;
      continue;
    }
    // Data (tokens, labels, the step): staged through the runner's own
    // buffer.
    in[i] = ownBuffer(id);
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(in[i], t.raw(), t.byteSize(),
                                          cudaMemcpyHostToDevice, stream));
  }
  outputs.resize(nout);
  std::vector<Mirror *> written(nout, nullptr);
  for (int j = 0; j < nout; ++j) {
    Tensor &t = outputs[j];
    if (t.raw() && matches(t, function.outputs(j)))
      if (Mirror *m = backend.findMirror(t.raw())) {
        out[j] = m->memory.ptr;
        written[j] = m;
      }
  }
  // Outputs with no home of their own: the runner's buffers, so that the
  // pointers are known before the run.
  for (int j = 0; j < nout; ++j)
    if (!out[j])
      out[j] = ownBuffer(function.outputs(j));
  // A run the profile times kernel by kernel, or that poisons a tensor
  // from the host, is not a graph; nor is one with nothing to launch (a
  // split backward's empty input half).
  StepGraph *graph = nullptr;
  if (backend.graphs && runs > 0 && !profiling && !trace && poisonKernel < 0 &&
      function.kernels_size() > 0) {
    std::vector<void *> key(in);
    key.insert(key.end(), out.begin(), out.end());
    auto it = graphs.find(key);
    if (it != graphs.end()) {
      graph = it->second.get();
    } else if (graphs.size() < kMaxGraphs) {
      auto g = std::make_unique<StepGraph>();
      if (!capture(in, out, *g, error))
        return false;
      graph = g.get();
      if (graphs.empty() && backend.reportsGraphs)
        std::fprintf(stderr,
                     "gptc: @%s runs as a CUDA graph from its run 2: 1 launch "
                     "a run instead of %zu (the graph's kernels, GEMMs, "
                     "copies and collectives)\n",
                     function.name().c_str(), g->nodes);
      graphs[key] = std::move(g);
    }
  }
  ++runs;
  if (graph)
    GPTC_CUDA_CHECK(api().cudaGraphLaunch(graph->exec, stream));
  else if (!enqueue(in, out, error))
    return false;
  // The step's collectives watched before the outputs' copies, which
  // block until the stream reaches them.
  backend.synchronize(stream);
  for (int j = 0; j < nout; ++j) {
    if (written[j]) {
      written[j]->deviceValid = true;
      written[j]->hostValid = false;
      continue;
    }
    const program::Value &v = function.values(function.outputs(j));
    Tensor &t = outputs[j];
    if (!t.raw() || !matches(t, v.id()))
      t = Tensor(v.type().dtype(),
                 std::vector<int64_t>(v.type().shape().begin(),
                                      v.type().shape().end()));
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(t.raw(), out[j], t.byteSize(),
                                          cudaMemcpyDeviceToHost, stream));
  }
  backend.synchronize(stream);
  return true;
}

bool CudaRunner::capture(const std::vector<void *> &in,
                         std::vector<void *> &out, StepGraph &g,
                         std::string &error) {
  // Every call enqueue makes is captured, on the compute stream and on the
  // communication stream that joins it (through the hand-over event) and
  // rejoins it (through each collective's event) before the end. A call
  // the capture refuses ends the process, as any failing CUDA call does;
  // GPTC_CUDA_GRAPHS=0 runs without graphs.
  GPTC_CUDA_CHECK(api().cudaStreamBeginCapture(backend.stream,
                                               cudaStreamCaptureModeGlobal));
  bool ok = enqueue(in, out, error);
  GPTC_CUDA_CHECK(api().cudaStreamEndCapture(backend.stream, &g.graph));
  if (!ok)
    return false;
  GPTC_CUDA_CHECK(api().cudaGraphInstantiate(&g.exec, g.graph, 0));
  GPTC_CUDA_CHECK(api().cudaGraphGetNodes(g.graph, nullptr, &g.nodes));
  return true;
}

bool CudaRunner::injectInfinityBefore(program::OpKind op) {
  auto isFloat = [&](int32_t id) {
    DType t = function.values(id).type().dtype();
    return t == program::F32 || t == program::F64 || t == program::BF16 ||
           t == program::F16;
  };
  for (int i = 0; i < function.kernels_size(); ++i) {
    const Kernel &k = function.kernels(i);
    if (k.op() != op || !k.inputs_size() || !isFloat(k.inputs(0)))
      continue;
    poisonKernel = i;
    poisonInput = 0;
    return true;
  }
  if (op != program::GLOBAL_NORM && op != program::SUM_SQUARES)
    return false;
  // On the GPU the norm is computed by generated kernels (the fused
  // optimizer's sum of squares, its all-reduce, its square root): the
  // nearest kernel before the norm that reads a tensor (a gradient) is
  // poisoned at that tensor.
  std::set<int32_t> before;
  for (const program::Value &v : function.values())
    if (v.role() == program::ROLE_GRAD_NORM)
      before.insert(v.id());
  for (int i = function.kernels_size() - 1; i >= 0; --i) {
    const Kernel &k = function.kernels(i);
    if (std::none_of(k.outputs().begin(), k.outputs().end(),
                     [&](int32_t id) { return before.count(id) > 0; }))
      continue;
    if (k.op() == program::COMPILED)
      for (int j = 0; j < k.inputs_size(); ++j) {
        const program::Value &v = function.values(k.inputs(j));
        if ((v.role() == program::ROLE_NONE ||
             v.role() == program::ROLE_GRADIENT) &&
            numElements(v) > 1 && isFloat(k.inputs(j))) {
          poisonKernel = i;
          poisonInput = j;
          return true;
        }
      }
    before.insert(k.inputs().begin(), k.inputs().end());
  }
  return false;
}

void CudaRunner::createEvents() {
  size_t n = static_cast<size_t>(function.kernels_size());
  if (!startEvents.empty())
    return;
  for (size_t i = 0; i < n; ++i) {
    cudaEvent_t start, stop;
    GPTC_CUDA_CHECK(api().cudaEventCreate(&start));
    GPTC_CUDA_CHECK(api().cudaEventCreate(&stop));
    startEvents.push_back(start);
    stopEvents.push_back(stop);
  }
  GPTC_CUDA_CHECK(api().cudaEventCreate(&traceOrigin));
  recorded.assign(n, false);
  innerSeconds.assign(n, 0.0);
}

void CudaRunner::setTrace(TraceRecorder *t) {
  if (t)
    createEvents();
  trace = t;
  for (auto &[index, body] : bodies)
    body->setTrace(t);
}

void CudaRunner::enableProfiling() {
  size_t n = static_cast<size_t>(function.kernels_size());
  createEvents();
  profiling = true;
  recorded.assign(n, false);
  innerSeconds.assign(n, 0.0);
  times.reset(function);
  for (auto &[index, body] : bodies) {
    body->enableProfiling();
    times.addBody(body->times);
  }
}

CudaRunner::~CudaRunner() {
  for (cudaEvent_t e : startEvents)
    api().cudaEventDestroy(e);
  for (cudaEvent_t e : stopEvents)
    api().cudaEventDestroy(e);
  if (traceOrigin)
    api().cudaEventDestroy(traceOrigin);
}

std::vector<KernelTime> CudaRunner::profile() const { return times.kernels(); }
