//===- CudaRunner.h - The CUDA backend's types ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend (CudaBackend: device, streams, resident state) and the
// runner of one function on it (CudaRunner), private to
// lib/Runtime/CUDA. Each concern has its file:
//   CudaBackend.cpp      creating the backend, residency, synchronization
//   CudaState.cpp        the state operations (the pipeline's update)
//   CudaRunner.cpp       preparing a function (launch plans, buffers) and
//                        running it (kernels, CUDA graphs, profile)
//   CudaGemm.cpp         GEMMs: cuBLASLt descriptors and the algorithm
//   CudaCollectives.cpp  collectives and gradient buckets on the
//                        communication stream
// `createRunner` checks a function against what this backend runs and
// prepares every kernel (launch plans resolved to GPU functions, cuBLASLt
// descriptors and algorithms, scratch sizes), so that a run only binds
// pointers and enqueues. Setup failures are errors the caller reports;
// a failing CUDA or cuBLASLt call during a run ends the process with the
// call and its file:line (Check.h): the device's state is then unknown.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CUDA_CUDARUNNER_H
#define GPTC_LIB_RUNTIME_CUDA_CUDARUNNER_H

#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/CUDA/CudaBackend.h"
#include "gptc/Runtime/KernelProfile.h"

#include "DeviceKernels.h"
#include "gptc/Runtime/CUDA/Check.h"
#include "gptc/Runtime/CUDA/DeviceCollectives.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Tensor.h"
#include "gptc/Runtime/Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#define GPTC_CUBLAS_CHECK(call)                                                \
  do {                                                                         \
    cublasStatus_t gptcStatus_ = (call);                                       \
    if (gptcStatus_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::gptc::cuda::fail(api().cublasLtGetStatusString(gptcStatus_), #call,    \
                         __FILE__, __LINE__);                                  \
  } while (0)

namespace gptc::runtime::cudart {

using ::gptc::cuda::api;
using program::DType;
using program::Kernel;

/// Mutations of this backend for the tests that show the virtual CUDA
/// device's checkers catch what they are for (test/Runtime/
/// virtual-cuda-checkers.test); GPTC_CUDA_FAULT names one. Never set in
/// use: each makes the backend wrong on purpose.
enum class Fault {
  None,
  /// The compute stream does not wait for the step's first collective.
  SkipWait,
  /// Each function's arena is allocated 4 bytes short of its last value.
  ShortArena,
  /// Every GEMM whose A is square reads it transposed the other way.
  WrongTranspose,
};

inline Fault injectedFault() {
  static const Fault fault = [] {
    const char *f = std::getenv("GPTC_CUDA_FAULT");
    std::string name = f ? f : "";
    if (name == "skip-wait")
      return Fault::SkipWait;
    if (name == "short-arena")
      return Fault::ShortArena;
    if (name == "wrong-transpose")
      return Fault::WrongTranspose;
    if (!name.empty())
      std::fprintf(stderr,
                   "gptc: warning: GPTC_CUDA_FAULT=%s is none of skip-wait, "
                   "short-arena, wrong-transpose; ignored\n",
                   name.c_str());
    return Fault::None;
  }();
  return fault;
}

/// The attention kernels for operands of `dtype`, if there are any.
inline std::optional<cuda::AttentionType> attentionType(DType dtype) {
  switch (dtype) {
  case program::F32:
    return cuda::AttentionType::F32;
  case program::BF16:
    return cuda::AttentionType::BF16;
  case program::F16:
    return cuda::AttentionType::F16;
  default:
    return std::nullopt;
  }
}

inline int64_t numElements(const program::Value &v) {
  int64_t n = 1;
  for (int64_t d : v.type().shape())
    n *= d;
  return n;
}

/// Device memory that frees itself.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (ptr)
      api().cudaFree(ptr);
  }
  /// Frees the memory (cudaFree waits for the device).
  void reset() {
    if (ptr)
      api().cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  /// Allocates `n` bytes (at least one); false on failure.
  bool allocate(size_t n) {
    bytes = n;
    return api().cudaMalloc(&ptr, n ? n : 1) == cudaSuccess;
  }
};

class CudaBackend;

/// The cuBLASLt side of one LINEAR or MATMUL: C = op(A) op(B) (+ bias) in
/// cuBLAS's column-major terms, A and B being the kernel's operands
/// swapped (row-major C^T = op(b)^T op(a)^T).
struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  cudaDataType_t scaleType = CUDA_R_32F;
  /// Value ids: cuBLAS's A, B, the bias (-1: none) and C.
  int32_t aId = -1, bId = -1, biasId = -1, cId = -1;
  /// gptc.fused_gemm's epilogue (NONE without one), the GELU input it
  /// writes (GELU_AUX) or reads (DGELU*), and the bias gradient it writes
  /// (-1: none). `fused`: cuBLASLt's epilogue does it; otherwise the
  /// product is plain and the runtime's epilogue kernels follow it.
  program::MatmulParams::Epilogue epilogue = program::MatmulParams::NONE;
  int32_t auxId = -1, biasGradId = -1;
  bool fused = false;
  /// Row-major C: rows and columns (the epilogue kernels' extents).
  int64_t rows = 0, cols = 0;
  int dtype = 0;
  ~Gemm() {
    if (desc)
      api().cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l)
        api().cublasLtMatrixLayoutDestroy(l);
  }
};

/// One launch of a generated kernel, its arguments resolved.
struct Launch {
  cudaKernel_t function;
  dim3 grid, block;
  /// Per argument: a value id (>= 0) or temporary -1 - i.
  std::vector<int64_t> args;
};

/// One collective (or SHARD_OFFSET, ALL_SLICE), its group resolved.
struct Collective {
  std::vector<int64_t> grid, axes;
  /// The group's size and this rank's index in it.
  int64_t ranks = 1, me = 0;
  /// Blocks along a tensor axis: rows before the axis, and the bytes of
  /// one block's row (from the axis down). outer > 1: the blocks are
  /// (un)packed around the NCCL call, in the backend's packing buffer.
  int64_t outer = 1, chunk = 0, blockBytes = 0;
  /// SHARD_OFFSET's value, and a copy of it in device memory (copied from
  /// there: a CUDA graph copies no pageable host memory).
  int32_t offset = 0;
  DeviceBuffer offsetOnDevice;
  /// ALL_REDUCE of a bucket (several inputs): > 0 when the buffer plan
  /// stores each output over its input, one after another in the arena
  /// (gaps of alignment only): one NCCL call over this many elements from
  /// the first output. 0: one call per tensor in an NCCL group.
  int64_t span = 0;
  /// Recorded on the communication stream when the collective is done.
  cudaEvent_t done = nullptr;
  ~Collective() {
    if (done)
      api().cudaEventDestroy(done);
  }
};

class CudaRunner;

/// The state the trainer keeps on the device, by host address.
struct Mirror {
  DeviceBuffer memory;
  /// Whether the device copy, and the host copy, hold the current value.
  bool deviceValid = false, hostValid = true;
};

class CudaBackend : public Backend {
public:
  static std::unique_ptr<CudaBackend> create(const program::Program &program,
                                             int device,
                                             Communicator *bootstrap,
                                             std::string &error);
  ~CudaBackend() override;

  std::string describe() const override { return description; }
  std::unique_ptr<FunctionRunner>
  createRunner(const program::Function &function, std::string &error) override;
  bool hasDeviceMemory() const override { return true; }
  double copyBandwidth() override;
  void keepResident(const Tensor &t) override;
  void release(const Tensor &t) override {
    mirrors.erase(static_cast<const void *>(t.raw()));
  }
  bool syncToHost(std::string &error) override;
  void hostChanged() override { mirrors.clear(); }
  void hostWrote(const Tensor &t) override {
    if (Mirror *m = findMirror(t.raw())) {
      m->deviceValid = false;
      m->hostValid = true;
    }
  }

  /// Waits for `s`. With NCCL communicators it polls rather than blocks:
  /// each poll asks NCCL for an asynchronous error (a peer that died, a
  /// network failure), which ends every rank naming it, and the bootstrap
  /// communicator's watchdog watches the wait, so that a peer that never
  /// comes ends every rank, named, after --collective-timeout (the
  /// communicators aborted first). A failing CUDA call ends the process.
  void synchronize(cudaStream_t s);

  Mirror *findMirror(const void *host) {
    auto it = mirrors.find(host);
    return it == mirrors.end() ? nullptr : it->second.get();
  }

  // The state operations on device memory: kernels on the compute stream,
  // collectives through NCCL on it (or through the host where this
  // process has no NCCL communicator).
  bool stateZero(const Tensor &t, std::string &error) override;
  bool stateAdd(const Tensor &dst, const Tensor &src,
                std::string &error) override;
  bool stateScale(const StateSpan &span, float factor,
                  std::string &error) override;
  bool stateCopy(const StateSpan &dst, const StateSpan &src,
                 std::string &error) override;
  bool stateSumOfSquares(const std::vector<StateSpan> &spans, double &sum,
                         std::string &error) override;
  bool stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                  int64_t step, double scale, double beta1, double beta2,
                  double eps, std::string &error) override;
  bool stateAllReduceSum(const Tensor &t, Communicator &comm,
                         const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes,
                         std::string &error) override;
  bool stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                             Communicator &comm,
                             const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes,
                             std::string &error) override;
  bool stateAllGather(const StateSpan &mine, Communicator &comm,
                      const std::vector<int64_t> &grid,
                      const std::vector<int64_t> &axes,
                      std::string &error) override;

  cudaStream_t stream = nullptr;
  /// The collectives' stream, the event that hands them their inputs,
  /// and the buffer that packs blocks that are not contiguous.
  cudaStream_t commStream = nullptr;
  cudaEvent_t handOver = nullptr;
  DeviceBuffer packing;
  /// Null when the program runs on one device.
  std::unique_ptr<DeviceCollectives> collectives;
  /// The processes' communicator that bootstrapped NCCL (null on one
  /// device).
  Communicator *bootstrap = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer workspace;
  /// Whether runs after a function's first are CUDA graphs (not with
  /// GPTC_CUDA_GRAPHS=0 or CUDA_LAUNCH_BLOCKING=1), and whether this
  /// process says so (rank 0 of a mesh).
  bool graphs = true, reportsGraphs = true;
  /// The program's launch plans by symbol, and the GPU functions by name.
  std::map<std::string, const program::CudaKernel *> plans;
  std::map<std::string, cudaKernel_t> functions;
  program::CudaModule module;

private:
  CudaBackend() = default;
  /// The device memory of resident `t` (f32), copied there first where
  /// the host holds the newer value; `write`: the host copy is stale from
  /// now on. Null with `error` set when t is not resident.
  float *deviceState(const Tensor &t, bool write, std::string &error);
  /// `count` f32 elements of device scratch (a collective's block); null
  /// with `error` set when it cannot be allocated.
  float *stateBlock(int64_t count, std::string &error);
  /// A collective on device state through host copies (no NCCL).
  bool throughHost(
      const float *src, int64_t inCount, float *dst, int64_t outCount,
      const std::function<bool(std::byte *in, std::byte *out)> &collective,
      std::string &error);
  /// The sum of squares' partial sums and its total.
  DeviceBuffer sumScratch, blockScratch;
  std::string description;
  cudaLibrary_t library = nullptr;
  std::unordered_map<const void *, std::unique_ptr<Mirror>> mirrors;
};

class CudaRunner : public FunctionRunner {
public:
  static std::unique_ptr<CudaRunner> create(CudaBackend &backend,
                                            const program::Function &function,
                                            std::string &error);

  bool run(const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs, std::string &error) override;
  const program::Function &getFunction() const override { return function; }
  bool canOverwriteInput(int output, int input) const override {
    // The generated kernels that update state (AdamW) are not known to be
    // elementwise in place: state is double-buffered on the device.
    (void)output;
    (void)input;
    return false;
  }
  void setCommunicator(Communicator *c) override { (void)c; }
  bool injectInfinityBefore(program::OpKind op) override;
  void enableProfiling() override;
  /// --trace: each kernel's device time, placed on the host's clock from
  /// an event recorded when the run is enqueued (the events profiling
  /// records; a traced run, like a profiled one, is not a CUDA graph).
  void setTrace(TraceRecorder *t) override;
  std::vector<KernelTime> profile() const override;
  ~CudaRunner() override;

  /// Runs the kernels with the function's inputs and outputs at `in` and
  /// `out` (device pointers; a null output: the runner's own buffer, whose
  /// address `out` then receives). Enqueues only.
  bool enqueue(const std::vector<void *> &in, std::vector<void *> &out,
               std::string &error);
  /// Where the plan put output `o` (an ACCUMULATE body's yielded values
  /// are planned and live to its end), or null when it did not.
  void *plannedOutput(int o) const { return home[function.outputs(o)]; }

private:
  CudaRunner(CudaBackend &backend, const program::Function &function)
      : backend(backend), function(function) {}
  bool prepare(std::string &error);
  bool prepareGemm(const Kernel &k, Gemm &g, std::string &error);
  bool prepareCollective(const Kernel &k, size_t index, std::string &error);
  bool prepareBucket(const Kernel &k, size_t index,
                     std::unique_ptr<Collective> c, std::string &error);
  void runKernel(size_t index);
  void runCollective(size_t index);
  void runBucket(size_t index);
  void *valuePtr(int64_t id) { return ptr[id]; }
  /// The runner's own buffer for unplanned value `id`.
  void *ownBuffer(int32_t id);

  CudaBackend &backend;
  program::Function function;
  DeviceBuffer arena, scratch, attentionStats;
  std::vector<void *> ptr;
  std::map<int32_t, std::unique_ptr<DeviceBuffer>> own;
  /// Per kernel (by index): its launches, GEMM or accumulation body.
  std::map<size_t, std::vector<Launch>> launches;
  std::map<size_t, std::vector<int64_t>> temporaryOffsets;
  std::map<size_t, std::unique_ptr<Gemm>> gemms;
  std::map<size_t, std::unique_ptr<CudaRunner>> bodies;
  std::map<size_t, std::unique_ptr<Collective>> comms;
  /// Per kernel index (kernels_size(): the end): the collectives the
  /// compute stream waits for before it (CollectiveSchedule.h).
  std::vector<std::vector<size_t>> waits;
  /// Each planned value's place in the arena (null if unplanned).
  std::vector<void *> home;
  bool profiling = false;
  /// CUDA graphs of the whole run: a run after the first (which loads
  /// kernels and allocates) is captured once per set of device pointers
  /// it runs with (inputs, then outputs: double-buffered state alternates
  /// between two) and replayed from then on, one launch instead of one per
  /// operation.
  struct StepGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    size_t nodes = 0;
    ~StepGraph() {
      if (exec)
        api().cudaGraphExecDestroy(exec);
      if (graph)
        api().cudaGraphDestroy(graph);
    }
  };
  static constexpr size_t kMaxGraphs = 4;
  std::map<std::vector<void *>, std::unique_ptr<StepGraph>> graphs;
  int64_t runs = 0;
  /// Captures enqueue(in, out) as `g`.
  bool capture(const std::vector<void *> &in, std::vector<void *> &out,
               StepGraph &g, std::string &error);
  /// --inject-overflow: the kernel, and its input, whose first element
  /// becomes an infinity before the kernel runs.
  int poisonKernel = -1, poisonInput = 0;
  double poison[1] = {INFINITY};
  /// The profile: per kernel (by index), events recorded around its
  /// launches in the current enqueue (read when it ends) and the seconds
  /// of an ACCUMULATE's body's kernels within it; each kernel's own time.
  std::vector<cudaEvent_t> startEvents, stopEvents;
  /// The events exist (profiling or tracing).
  void createEvents();
  TraceRecorder *trace = nullptr;
  /// Recorded on the compute stream when a traced run is enqueued, at the
  /// host time `traceOriginHost` (microseconds, TraceRecorder::now).
  cudaEvent_t traceOrigin = nullptr;
  double traceOriginHost = 0;
  std::vector<bool> recorded;
  std::vector<double> innerSeconds;
  KernelTimes times;
};

} // namespace gptc::runtime::cudart

#endif // GPTC_LIB_RUNTIME_CUDA_CUDARUNNER_H
