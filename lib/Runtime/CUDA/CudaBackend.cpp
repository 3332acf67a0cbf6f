//===- CudaBackend.cpp - Run a compiled program on an NVIDIA GPU -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `createRunner` checks a function against what this backend runs and
// prepares every kernel (launch plans resolved to GPU functions, cuBLASLt
// descriptors and algorithms, scratch sizes), so that a run only binds
// pointers and enqueues. Setup failures are errors the caller reports;
// a failing CUDA or cuBLASLt call during a run ends the process with the
// call and its file:line (Check.h): the device's state is then unknown.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/CudaBackend.h"
#include "gptc/Runtime/CUDA/CudaApi.h"
#include "gptc/Runtime/KernelProfile.h"

#include "DeviceKernels.h"
#include "gptc/Runtime/CUDA/Check.h"
#include "gptc/Runtime/CUDA/DeviceCollectives.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Tensor.h"

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

using ::gptc::cuda::api;

using namespace gptc;
using namespace gptc::runtime;
using program::DType;
using program::Kernel;

#define GPTC_CUBLAS_CHECK(call)                                                \
  do {                                                                         \
    cublasStatus_t gptcStatus_ = (call);                                       \
    if (gptcStatus_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::gptc::cuda::fail(api().cublasLtGetStatusString(gptcStatus_), #call,    \
                         __FILE__, __LINE__);                                  \
  } while (0)

namespace {

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

Fault injectedFault() {
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
std::optional<cuda::AttentionType> attentionType(DType dtype) {
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

int64_t numElements(const program::Value &v) {
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
  std::vector<bool> recorded;
  std::vector<double> innerSeconds;
  KernelTimes times;
};

} // namespace

//===----------------------------------------------------------------------===//
// The backend
//===----------------------------------------------------------------------===//

std::unique_ptr<CudaBackend>
CudaBackend::create(const program::Program &program, int device,
                    Communicator *bootstrap, std::string &error) {
  if (!program.has_cuda()) {
    error = "the program has no CUDA image: compile it with --device cuda";
    return nullptr;
  }
  int count = 0;
  cudaError_t status = api().cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    error = "no CUDA device: " +
            std::string(status != cudaSuccess ? api().cudaGetErrorString(status)
                                              : "none is visible");
    return nullptr;
  }
  if (device < 0 || device >= count) {
    error = "no CUDA device " + std::to_string(device) + " (" +
            std::to_string(count) + " visible)";
    return nullptr;
  }
  cudaDeviceProp prop;
  if ((status = api().cudaSetDevice(device)) != cudaSuccess ||
      (status = api().cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
    error = "CUDA device " + std::to_string(device) +
            " does not start: " + api().cudaGetErrorString(status);
    return nullptr;
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->module = program.cuda();
  // A cubin runs on its architecture; PTX on it and later ones.
  int have = prop.major * 10 + prop.minor, want = 0;
  const std::string &chip = b->module.chip();
  if (chip.rfind("sm_", 0) != 0 ||
      std::sscanf(chip.c_str() + 3, "%d", &want) != 1) {
    error = "the program's CUDA image is for '" + chip +
            "', not an sm_XY architecture";
    return nullptr;
  }
  switch (b->module.format()) {
  case program::CUDA_IMAGE_ASSEMBLY:
  case program::CUDA_IMAGE_BINARY:
  case program::CUDA_IMAGE_FATBIN:
  case program::CUDA_IMAGE_HOST:
    break;
  default:
    error = "the program's CUDA image has no format (an artifact from "
            "before formats were typed?): compile it again";
    return nullptr;
  }
  bool ptx = b->module.format() == program::CUDA_IMAGE_ASSEMBLY;
  if (ptx ? have < want : have / 10 != want / 10 || have < want) {
    error = "the program's CUDA image is for " + chip + " but device " +
            std::to_string(device) + " (" + prop.name + ") is sm_" +
            std::to_string(have) + ": compile with --cuda-chip=sm_" +
            std::to_string(have);
    return nullptr;
  }
  auto envIs = [](const char *name, const char *value) {
    const char *v = std::getenv(name);
    return v && std::string(v) == value;
  };
  b->graphs =
      !envIs("GPTC_CUDA_GRAPHS", "0") && !envIs("CUDA_LAUNCH_BLOCKING", "1");
  b->reportsGraphs = !bootstrap || bootstrap->rank() == 0;
  b->description = "cuda:" + std::to_string(device) + " (" + prop.name +
                   ", sm_" + std::to_string(have) + ", " +
                   std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
  if ((status = api().cudaStreamCreateWithFlags(
           &b->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    error =
        std::string("cudaStreamCreate: ") + api().cudaGetErrorString(status);
    return nullptr;
  }
  if (!b->module.image().empty()) {
    status =
        api().cudaLibraryLoadData(&b->library, b->module.image().c_str(),
                                  nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess) {
      error = "the program's CUDA image (" +
              program::CudaImageFormat_Name(b->module.format()) + " for " +
              chip + ") does not load: " + api().cudaGetErrorString(status);
      return nullptr;
    }
  }
  for (const program::CudaKernel &k : b->module.kernels()) {
    b->plans[k.symbol()] = &k;
    for (const program::CudaLaunch &l : k.launches()) {
      if (b->functions.count(l.function()))
        continue;
      cudaKernel_t f;
      if (!b->library ||
          (status = api().cudaLibraryGetKernel(
               &f, b->library, l.function().c_str())) != cudaSuccess) {
        error = "the program's CUDA image has no GPU function '" +
                l.function() + "' (kernel " + k.symbol() + ")";
        return nullptr;
      }
      b->functions[l.function()] = f;
    }
  }
  // A program for a mesh: NCCL on device buffers, on a stream of its own.
  int64_t devices = 1;
  for (const program::Function &f : program.functions()) {
    int64_t n = 1;
    for (int64_t d : f.grid_shape())
      n *= d;
    devices = std::max(devices, n);
  }
  if ((status = api().cudaStreamCreateWithFlags(
           &b->commStream, cudaStreamNonBlocking)) != cudaSuccess) {
    error =
        std::string("cudaStreamCreate: ") + api().cudaGetErrorString(status);
    return nullptr;
  }
  if ((status = api().cudaEventCreateWithFlags(
           &b->handOver, cudaEventDisableTiming)) != cudaSuccess) {
    error = std::string("cudaEventCreate: ") + api().cudaGetErrorString(status);
    return nullptr;
  }
  if (devices > 1) {
    if (!bootstrap || bootstrap->size() != devices) {
      error = "the program runs on " + std::to_string(devices) +
              " GPUs, one process each: start it with mpirun -np " +
              std::to_string(devices);
      return nullptr;
    }
#ifdef GPTC_HAVE_NCCL
    b->collectives = createNcclDeviceCollectives(*bootstrap, device, error);
    if (!b->collectives)
      return nullptr;
    b->bootstrap = bootstrap;
    DeviceCollectives *collectives = b->collectives.get();
    bootstrap->setBeforeAbort([collectives] { collectives->abortAll(); });
    b->description += ", NCCL rank " + std::to_string(bootstrap->rank()) +
                      " of " + std::to_string(devices);
#else
    error = "the program runs on " + std::to_string(devices) +
            " GPUs and this gptc was built without NCCL";
    return nullptr;
#endif
  }
  cublasStatus_t blas = api().cublasLtCreate(&b->lt);
  if (blas != CUBLAS_STATUS_SUCCESS) {
    error =
        std::string("cublasLtCreate: ") + api().cublasLtGetStatusString(blas);
    return nullptr;
  }
  // cuBLASLt's workspace, shared by the GEMMs (they run in stream order).
  if (!b->workspace.allocate(size_t(32) << 20)) {
    error = "cannot allocate cuBLASLt's 32 MiB workspace";
    return nullptr;
  }
  return b;
}

double CudaBackend::copyBandwidth() {
  // 1 GiB device to device (as bench/gpu_throughput.py's PyTorch copy),
  // on the compute stream once it has drained; 0 when there is no room.
  constexpr size_t bytes = size_t(1) << 30;
  DeviceBuffer a, b;
  if (api().cudaStreamSynchronize(stream) != cudaSuccess ||
      !a.allocate(bytes) || !b.allocate(bytes)) {
    api().cudaGetLastError(); // An allocation that failed is not an error here.
    return 0;
  }
  GPTC_CUDA_CHECK(api().cudaMemsetAsync(a.ptr, 1, bytes, stream));
  cudaEvent_t start, stop;
  GPTC_CUDA_CHECK(api().cudaEventCreate(&start));
  GPTC_CUDA_CHECK(api().cudaEventCreate(&stop));
  double best = 0;
  for (int round = 0; round < 6; ++round) {
    GPTC_CUDA_CHECK(api().cudaEventRecord(start, stream));
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(b.ptr, a.ptr, bytes,
                                          cudaMemcpyDeviceToDevice, stream));
    GPTC_CUDA_CHECK(api().cudaEventRecord(stop, stream));
    GPTC_CUDA_CHECK(api().cudaEventSynchronize(stop));
    float ms = 0;
    GPTC_CUDA_CHECK(api().cudaEventElapsedTime(&ms, start, stop));
    // The first round warms up.
    if (round > 0 && ms > 0)
      best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  GPTC_CUDA_CHECK(api().cudaEventDestroy(start));
  GPTC_CUDA_CHECK(api().cudaEventDestroy(stop));
  return best;
}

CudaBackend::~CudaBackend() {
  if (bootstrap)
    bootstrap->setBeforeAbort(nullptr);
  mirrors.clear();
  collectives.reset();
  if (handOver)
    api().cudaEventDestroy(handOver);
  if (commStream)
    api().cudaStreamDestroy(commStream);
  if (lt)
    api().cublasLtDestroy(lt);
  if (library)
    api().cudaLibraryUnload(library);
  if (stream)
    api().cudaStreamDestroy(stream);
}

std::unique_ptr<FunctionRunner>
CudaBackend::createRunner(const program::Function &function,
                          std::string &error) {
  return CudaRunner::create(*this, function, error);
}

void CudaBackend::keepResident(const Tensor &t) {
  const void *host = t.raw();
  if (!host || mirrors.count(host))
    return;
  auto m = std::make_unique<Mirror>();
  GPTC_CUDA_CHECK(
      api().cudaMalloc(&m->memory.ptr, std::max<size_t>(1, t.byteSize())));
  m->memory.bytes = t.byteSize();
  mirrors[host] = std::move(m);
}

void CudaBackend::synchronize(cudaStream_t s) {
  if (!collectives) {
    GPTC_CUDA_CHECK(api().cudaStreamSynchronize(s));
    return;
  }
  ExternalWait waiting(bootstrap, "the GPU's collectives (NCCL)");
  for (int polls = 0;; ++polls) {
    cudaError_t status = api().cudaStreamQuery(s);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      GPTC_CUDA_CHECK(status);
    std::string why;
    if (collectives->asyncError(why)) {
      collectives->abortAll();
      std::fprintf(stderr,
                   "gptc: error: rank %d: %s; every NCCL communicator "
                   "aborted. Ending every rank.\n",
                   bootstrap->rank(), why.c_str());
      std::fflush(stderr);
      bootstrap->abort(1);
    }
    // A few polls at once (a collective about to finish), then at 100 us.
    if (polls > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

bool CudaBackend::syncToHost(std::string &error) {
  (void)error;
  synchronize(stream);
  for (auto &[host, m] : mirrors) {
    if (m->hostValid)
      continue;
    GPTC_CUDA_CHECK(api().cudaMemcpy(const_cast<void *>(host), m->memory.ptr,
                                     m->memory.bytes, cudaMemcpyDeviceToHost));
    m->hostValid = true;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// State operations (the pipeline's update on the device)
//===----------------------------------------------------------------------===//

float *CudaBackend::deviceState(const Tensor &t, bool write,
                                std::string &error) {
  Mirror *m = findMirror(t.raw());
  if (!m || m->memory.bytes != static_cast<size_t>(t.byteSize()) ||
      t.dtype != program::F32) {
    error = "a state operation on the GPU names an f32 tensor that is not "
            "resident";
    return nullptr;
  }
  if (!m->deviceValid) {
    GPTC_CUDA_CHECK(api().cudaMemcpyAsync(m->memory.ptr, t.raw(), t.byteSize(),
                                          cudaMemcpyHostToDevice, stream));
    m->deviceValid = true;
  }
  if (write)
    m->hostValid = false;
  return static_cast<float *>(m->memory.ptr);
}

float *CudaBackend::stateBlock(int64_t count, std::string &error) {
  size_t bytes = static_cast<size_t>(count) * sizeof(float);
  if (blockScratch.bytes < bytes) {
    synchronize(stream);
    blockScratch.reset();
    if (!blockScratch.allocate(bytes)) {
      error = "cannot allocate " + std::to_string(bytes) +
              " bytes of device memory for a collective's block";
      return nullptr;
    }
  }
  return static_cast<float *>(blockScratch.ptr);
}

bool CudaBackend::stateZero(const Tensor &t, std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  GPTC_CUDA_CHECK(api().cudaMemsetAsync(p, 0, t.byteSize(), stream));
  return true;
}

bool CudaBackend::stateAdd(const Tensor &dst, const Tensor &src,
                           std::string &error) {
  if (dst.numElements() != src.numElements()) {
    error = "stateAdd: the tensors differ in size";
    return false;
  }
  const float *x = deviceState(src, false, error);
  float *y = x ? deviceState(dst, true, error) : nullptr;
  if (!y)
    return false;
  GPTC_CUDA_CHECK(cuda::addInPlace(1, y, x, dst.numElements(), stream));
  return true;
}

bool CudaBackend::stateScale(const StateSpan &span, float factor,
                             std::string &error) {
  float *x = deviceState(*span.tensor, true, error);
  if (!x)
    return false;
  GPTC_CUDA_CHECK(
      cuda::scaleInPlace(x + span.begin, span.count, factor, stream));
  return true;
}

bool CudaBackend::stateSumOfSquares(const std::vector<StateSpan> &spans,
                                    double &sum, std::string &error) {
  // [0, scratch): the partial sums; the next double: the total.
  int64_t scratch = cuda::sumOfSquaresScratch();
  if (!sumScratch.ptr &&
      !sumScratch.allocate(static_cast<size_t>(scratch + 1) * sizeof(double))) {
    error = "cannot allocate the gradient norm's device scratch";
    return false;
  }
  double *partials = static_cast<double *>(sumScratch.ptr),
         *total = partials + scratch;
  GPTC_CUDA_CHECK(api().cudaMemsetAsync(total, 0, sizeof(double), stream));
  for (const StateSpan &s : spans) {
    const float *x = deviceState(*s.tensor, false, error);
    if (!x)
      return false;
    GPTC_CUDA_CHECK(
        cuda::sumOfSquares(x + s.begin, s.count, partials, total, stream));
  }
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(&sum, total, sizeof(double),
                                        cudaMemcpyDeviceToHost, stream));
  synchronize(stream);
  return true;
}

bool CudaBackend::stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                             int64_t step, double scale, double beta1,
                             double beta2, double eps, std::string &error) {
  for (const StateAdamW &t : tensors) {
    float *p = deviceState(*t.param, true, error);
    const float *g = p ? deviceState(*t.grad, false, error) : nullptr;
    float *m = g ? deviceState(*t.m, true, error) : nullptr;
    float *v = m ? deviceState(*t.v, true, error) : nullptr;
    if (!v)
      return false;
    GPTC_CUDA_CHECK(cuda::adamW(p + t.begin, g + t.begin, m, v, t.count, lr,
                                step, scale, beta1, beta2, eps, t.weightDecay,
                                stream));
  }
  return true;
}

// Without NCCL (one GPU, or gptc built without it) a collective on device
// state goes through the host: `inCount` elements at `src` copied out,
// `collective` run on the host copies, `outCount` elements copied back to
// `dst`.
bool CudaBackend::throughHost(
    const float *src, int64_t inCount, float *dst, int64_t outCount,
    const std::function<bool(std::byte *in, std::byte *out)> &collective,
    std::string &error) {
  Tensor in(program::F32, {inCount}), out(program::F32, {outCount});
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(in.raw(), src, in.byteSize(),
                                        cudaMemcpyDeviceToHost, stream));
  synchronize(stream);
  if (!collective(in.raw(), out.raw()))
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(dst, out.raw(), out.byteSize(),
                                        cudaMemcpyHostToDevice, stream));
  synchronize(stream);
  return true;
}

bool CudaBackend::stateAllReduceSum(const Tensor &t, Communicator &comm,
                                    const std::vector<int64_t> &grid,
                                    const std::vector<int64_t> &axes,
                                    std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  int64_t n = t.numElements();
  if (collectives)
    return collectives->allReduce(p, p, n, program::F32, false, grid, axes,
                                  stream, error);
  return throughHost(
      p, n, p, n,
      [&](std::byte *in, std::byte *out) {
        if (!comm.allReduceSum(in, n, program::F32, grid, axes, error))
          return false;
        std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
        return true;
      },
      error);
}

bool CudaBackend::stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                                        Communicator &comm,
                                        const std::vector<int64_t> &grid,
                                        const std::vector<int64_t> &axes,
                                        std::string &error) {
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  if (!collectives)
    return throughHost(
        p, t.numElements(), p + mine.begin, mine.count,
        [&](std::byte *in, std::byte *out) {
          return comm.reduceScatterSum(in, out, mine.count, program::F32, grid,
                                       axes, error);
        },
        error);
  float *block = stateBlock(mine.count, error);
  if (!block || !collectives->reduceScatter(p, block, mine.count, program::F32,
                                            grid, axes, stream, error))
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
      p + mine.begin, block, static_cast<size_t>(mine.count) * sizeof(float),
      cudaMemcpyDeviceToDevice, stream));
  return true;
}

bool CudaBackend::stateAllGather(const StateSpan &mine, Communicator &comm,
                                 const std::vector<int64_t> &grid,
                                 const std::vector<int64_t> &axes,
                                 std::string &error) {
  const Tensor &t = *mine.tensor;
  float *p = deviceState(t, true, error);
  if (!p)
    return false;
  if (!collectives)
    return throughHost(
        p + mine.begin, mine.count, p, t.numElements(),
        [&](std::byte *in, std::byte *out) {
          return comm.allGather(in, out, mine.count, program::F32, grid, axes,
                                error);
        },
        error);
  float *block = stateBlock(mine.count, error);
  if (!block)
    return false;
  GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
      block, p + mine.begin, static_cast<size_t>(mine.count) * sizeof(float),
      cudaMemcpyDeviceToDevice, stream));
  return collectives->allGather(block, p, mine.count, program::F32, grid, axes,
                                stream, error);
}

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

bool CudaRunner::prepareCollective(const Kernel &k, size_t index,
                                   std::string &error) {
  auto c = std::make_unique<Collective>();
  c->grid.assign(function.grid_shape().begin(), function.grid_shape().end());
  const auto &axes = k.op() == program::SHARD_OFFSET
                         ? k.shard_offset().grid_axes()
                         : k.collective().grid_axes();
  c->axes.assign(axes.begin(), axes.end());
  for (int64_t a : c->axes)
    if (a < 0 || a >= static_cast<int64_t>(c->grid.size())) {
      error = "grid axis out of range";
      return false;
    }
  c->ranks = groupSize(c->grid, c->axes);
  DeviceCollectives *dc = backend.collectives.get();
  if (c->ranks > 1 && !dc) {
    error = "runs over " + std::to_string(c->ranks) +
            " devices and needs NCCL: run under mpirun";
    return false;
  }
  c->me = c->ranks > 1 ? groupIndex(c->grid, c->axes, dc->rank()) : 0;
  if (k.op() == program::SHARD_OFFSET) {
    if (k.outputs_size() != 1 || !k.has_shard_offset() ||
        function.values(k.outputs(0)).type().dtype() != program::I32 ||
        numElements(function.values(k.outputs(0))) != 1) {
      error = "expects an i32 scalar result";
      return false;
    }
    c->offset = static_cast<int32_t>(c->me * k.shard_offset().block());
    if (!c->offsetOnDevice.allocate(sizeof(int32_t)) ||
        api().cudaMemcpy(c->offsetOnDevice.ptr, &c->offset, sizeof(int32_t),
                         cudaMemcpyHostToDevice) != cudaSuccess) {
      error = "cannot place its offset in device memory";
      return false;
    }
    comms[index] = std::move(c);
    return true;
  }
  if ((k.op() == program::ALL_REDUCE || k.op() == program::ALL_GATHER ||
       k.op() == program::REDUCE_SCATTER) &&
      k.inputs_size() > 1)
    return prepareBucket(k, index, std::move(c), error);
  if (k.inputs_size() != 1 || k.outputs_size() != 1 || !k.has_collective()) {
    error = "is malformed";
    return false;
  }
  const program::Value &x = function.values(k.inputs(0)),
                       &y = function.values(k.outputs(0));
  DType t = x.type().dtype();
  if (t != y.type().dtype()) {
    error = "operand types do not match";
    return false;
  }
  if (k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX) {
    if (numElements(x) != numElements(y)) {
      error = "operand shapes do not match";
      return false;
    }
  } else {
    bool gather = k.op() == program::ALL_GATHER;
    const auto &whole = (gather ? y : x).type().shape();
    const auto &block = (gather ? x : y).type().shape();
    int64_t axis = k.collective().axis();
    int rank = whole.size();
    if (axis < 0 || axis >= rank || block.size() != rank) {
      error = "tensor axis out of range";
      return false;
    }
    int64_t inner = 1;
    for (int d = 0; d < rank; ++d) {
      if (whole[d] != block[d] * (d == axis ? c->ranks : 1)) {
        error = "operand shapes do not match the group of " +
                std::to_string(c->ranks) + " devices";
        return false;
      }
      if (d < axis)
        c->outer *= block[d];
      else if (d > axis)
        inner *= block[d];
    }
    c->chunk = block[axis] * inner * elementSize(t);
    c->blockBytes = c->outer * c->chunk;
    // Blocks that are not contiguous are packed rank-major around NCCL.
    if (k.op() != program::ALL_SLICE && c->ranks > 1 && c->outer > 1 &&
        static_cast<size_t>(c->blockBytes * c->ranks) > backend.packing.bytes) {
      backend.packing.reset();
      if (!backend.packing.allocate(
              static_cast<size_t>(c->blockBytes * c->ranks))) {
        error = "cannot allocate the collectives' packing buffer";
        return false;
      }
    }
  }
  if (k.op() != program::ALL_SLICE) {
    if (api().cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) !=
        cudaSuccess) {
      error = "cudaEventCreate failed";
      return false;
    }
    // Every rank prepares the same functions in the same order: the
    // groups' NCCL communicators are made here, not inside a step.
    if (c->ranks > 1 && !dc->prepareGroup(c->grid, c->axes, error))
      return false;
  }
  comms[index] = std::move(c);
  return true;
}

bool CudaRunner::prepareBucket(const Kernel &k, size_t index,
                               std::unique_ptr<Collective> c,
                               std::string &error) {
  if (k.outputs_size() != k.inputs_size() || !k.has_collective()) {
    error = "is malformed: a bucket needs one output per input";
    return false;
  }
  DType t = function.values(k.outputs(0)).type().dtype();
  bool gather = k.op() == program::ALL_GATHER,
       reduce = k.op() == program::ALL_REDUCE;
  if (!reduce && k.collective().axis() != 0) {
    error = "is a bucket along axis " + std::to_string(k.collective().axis()) +
            " (buckets gather and scatter along axis 0)";
    return false;
  }
  for (int i = 0; i < k.inputs_size(); ++i) {
    const program::Value &x = function.values(k.inputs(i)),
                         &y = function.values(k.outputs(i));
    if (x.type().dtype() != t || y.type().dtype() != t) {
      error = "a bucket's tensors must share one element type";
      return false;
    }
    // A gather's and a scatter's blocks along dimension 0 are contiguous:
    // one NCCL call each, no packing.
    int64_t whole = numElements(gather ? y : x),
            part = numElements(gather ? x : y);
    const auto &ws = (gather ? y : x).type().shape(),
               &ps = (gather ? x : y).type().shape();
    if (reduce ? whole != part
               : whole != part * c->ranks || ws.empty() ||
                     ws.size() != ps.size() ||
                     !std::equal(ws.begin() + 1, ws.end(), ps.begin() + 1)) {
      error = reduce
                  ? "operand shapes do not match"
                  : "operand shapes do not match the group of " +
                        std::to_string(c->ranks) + " devices along dimension 0";
      return false;
    }
  }
  c->span = bucketSpanBytes(function, k) / elementSize(t);
  if (api().cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) !=
      cudaSuccess) {
    error = "cudaEventCreate failed";
    return false;
  }
  if (c->ranks > 1 &&
      !backend.collectives->prepareGroup(c->grid, c->axes, error))
    return false;
  comms[index] = std::move(c);
  return true;
}

bool CudaRunner::prepareGemm(const Kernel &k, Gemm &g, std::string &error) {
  auto shapeOf = [&](int32_t id) {
    const auto &s = function.values(id).type().shape();
    return std::vector<int64_t>(s.begin(), s.end());
  };
  using MP = program::MatmulParams;
  bool linear = k.op() == program::LINEAR;
  g.epilogue = k.has_matmul() ? k.matmul().epilogue() : MP::NONE;
  int maxIn = linear                                                     ? 3
              : g.epilogue == MP::DGELU || g.epilogue == MP::DGELU_BGRAD ? 3
                                                                         : 2;
  int minIn = linear ? 2 : maxIn;
  int outs = g.epilogue == MP::NONE || g.epilogue == MP::DGELU ? 1 : 2;
  if (k.inputs_size() < minIn || k.inputs_size() > maxIn ||
      k.outputs_size() != outs ||
      // A LINEAR's epilogue is at most its GELU; a MATMUL takes any.
      (linear && g.epilogue != MP::NONE && g.epilogue != MP::GELU_AUX)) {
    error = "has the wrong number of operands";
    return false;
  }
  DType dtype = function.values(k.outputs(0)).type().dtype();
  for (int32_t id : k.outputs())
    if (function.values(id).type().dtype() != dtype) {
      error = "mixes element types";
      return false;
    }
  for (int32_t id : k.inputs())
    if (function.values(id).type().dtype() != dtype) {
      error = "mixes element types";
      return false;
    }
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (dtype) {
  case program::F32:
    type = CUDA_R_32F; // CUBLAS_COMPUTE_32F: full fp32, no TF32
    break;
  case program::BF16:
    type = CUDA_R_16BF;
    break;
  case program::F16:
    type = CUDA_R_16F;
    break;
  default:
    error = "the GPU's GEMMs take f32, bf16 or f16";
    return false;
  }
  // Row-major sizes: C[M, N] = op(a)[M, K] op(b)[K, N], `batch` times.
  int64_t M, N, K, batch = 1;
  bool transA = false, transB = false; // cuBLAS's ops on its A (b), B (a)
  int64_t lda, ldb;
  std::vector<int64_t> c = shapeOf(k.outputs(0));
  if (linear) {
    std::vector<int64_t> x = shapeOf(k.inputs(0)), w = shapeOf(k.inputs(1));
    if (w.size() != 2 || x.empty() || x.back() != w[1] || c.empty() ||
        c.back() != w[0]) {
      error = "operand shapes do not match";
      return false;
    }
    N = w[0];
    K = w[1];
    M = numElements(function.values(k.inputs(0))) / std::max<int64_t>(K, 1);
    // cuBLAS A = W ([N, K] row-major: K x N column-major), transposed.
    transA = true;
    lda = K;
    ldb = K;
    g.aId = k.inputs(1);
    g.bId = k.inputs(0);
    if (k.inputs_size() == 3) {
      if (shapeOf(k.inputs(2)) != std::vector<int64_t>{N}) {
        error = "the bias is not [N]";
        return false;
      }
      g.biasId = k.inputs(2);
    }
  } else {
    std::vector<int64_t> a = shapeOf(k.inputs(0)), b = shapeOf(k.inputs(1));
    // DGELU's gradient has the shape of the GELU input: 2-D rows of it.
    if (g.epilogue != MP::NONE && !c.empty()) {
      int64_t last = c.back();
      c = {last ? numElements(function.values(k.outputs(0))) / last : 0, last};
    }
    if (a.size() < 2 || a.size() != b.size() || c.size() != a.size()) {
      error = "operand shapes do not match";
      return false;
    }
    for (size_t d = 0; d + 2 < a.size(); ++d) {
      if (a[d] != b[d] || a[d] != c[d]) {
        error = "batch dimensions do not match";
        return false;
      }
      batch *= a[d];
    }
    size_t r = a.size();
    bool tl = k.matmul().transpose_lhs(), tr = k.matmul().transpose_rhs();
    M = tl ? a[r - 1] : a[r - 2];
    K = tl ? a[r - 2] : a[r - 1];
    N = tr ? b[r - 2] : b[r - 1];
    if ((tr ? b[r - 1] : b[r - 2]) != K || c[r - 2] != M || c[r - 1] != N) {
      error = "operand shapes do not match";
      return false;
    }
    transA = tr;
    lda = tr ? K : N;
    transB = tl;
    ldb = tl ? M : K;
    g.aId = k.inputs(1);
    g.bId = k.inputs(0);
  }
  g.cId = k.outputs(0);
  g.rows = M * batch;
  g.cols = N;
  g.dtype = dtype;
  switch (g.epilogue) {
  case MP::GELU_AUX: // act, pre
    g.auxId = k.outputs(1);
    break;
  case MP::DGELU:       // lhs, rhs, pre -> d
  case MP::DGELU_BGRAD: // -> d, db
    g.auxId = k.inputs(2);
    if (numElements(function.values(g.auxId)) != M * N) {
      error = "the GELU input is not the product's size";
      return false;
    }
    if (g.epilogue == MP::DGELU_BGRAD)
      g.biasGradId = k.outputs(1);
    break;
  case MP::BGRAD: // dy, x -> dw, db (db over dy's rows: dw's rows)
    if (!k.matmul().transpose_lhs() || k.matmul().transpose_rhs()) {
      error = "a bias gradient's product must be transpose_lhs";
      return false;
    }
    g.biasGradId = k.outputs(1);
    break;
  default:
    break;
  }
  if (g.biasGradId >= 0 && numElements(function.values(g.biasGradId)) !=
                               (g.epilogue == MP::BGRAD ? M : N)) {
    error = "the bias gradient is not the product's size";
    return false;
  }
  // cuBLAS: C (m x n) = op(A) (m x k) op(B) (k x n), m = N, n = M.
  if (injectedFault() == Fault::WrongTranspose && K == N)
    transA = !transA;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto check = [&](cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS)
      error = std::string(what) + ": " + api().cublasLtGetStatusString(s);
    return s == CUBLAS_STATUS_SUCCESS;
  };
  if (!check(api().cublasLtMatmulDescCreate(&g.desc, compute, CUDA_R_32F),
             "cublasLtMatmulDescCreate") ||
      !check(api().cublasLtMatmulDescSetAttribute(
                 g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
             "cublasLtMatmulDescSetAttribute") ||
      !check(api().cublasLtMatmulDescSetAttribute(
                 g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
             "cublasLtMatmulDescSetAttribute"))
    return false;
  auto setEpilogue = [&](cublasLtEpilogue_t epilogue) {
    return check(
        api().cublasLtMatmulDescSetAttribute(
            g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
        "cublasLtMatmulDescSetAttribute");
  };
  // The plain product's epilogue: the bias, if any.
  cublasLtEpilogue_t plain =
      g.biasId >= 0 ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  // The fused one (Megatron's and Transformer Engine's choices): the GELU
  // input as the auxiliary matrix, in C's layout (leading dimension N,
  // which cuBLASLt wants divisible by 8), the bias gradient as the bias
  // vector.
  cublasLtEpilogue_t wanted = plain;
  switch (g.epilogue) {
  case MP::GELU_AUX:
    wanted = g.biasId >= 0 ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                           : CUBLASLT_EPILOGUE_GELU_AUX;
    break;
  case MP::DGELU:
    wanted = CUBLASLT_EPILOGUE_DGELU;
    break;
  case MP::DGELU_BGRAD:
    wanted = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    break;
  case MP::BGRAD:
    // cuBLAS's B is the kernel's lhs, dy: its sum over k is db.
    wanted = CUBLASLT_EPILOGUE_BGRADB;
    break;
  default:
    break;
  }
  if (!setEpilogue(plain))
    return false;
  auto layout = [&](cublasLtMatrixLayout_t &l, int64_t rows, int64_t cols,
                    int64_t ld, int64_t stride) {
    if (!check(api().cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld),
               "cublasLtMatrixLayoutCreate"))
      return false;
    if (batch == 1)
      return true;
    int32_t n = static_cast<int32_t>(batch);
    return check(api().cublasLtMatrixLayoutSetAttribute(
                     l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n)),
                 "cublasLtMatrixLayoutSetAttribute") &&
           check(api().cublasLtMatrixLayoutSetAttribute(
                     l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                     sizeof(stride)),
                 "cublasLtMatrixLayoutSetAttribute");
  };
  int64_t m = N, n = M;
  if (!layout(g.a, transA ? K : m, transA ? m : K, lda, N * K) ||
      !layout(g.b, transB ? n : K, transB ? K : n, ldb, M * K) ||
      !layout(g.c, m, n, m, M * N))
    return false;
  // The algorithm, once: cuBLASLt's first heuristic choice for these
  // shapes, with pointers aligned to 16 bytes (the buffer plan aligns to
  // 64; microbatch slices and views to their rows).
  cublasLtMatmulPreference_t pref;
  if (!check(api().cublasLtMatmulPreferenceCreate(&pref),
             "cublasLtMatmulPreferenceCreate"))
    return false;
  size_t ws = backend.workspace.bytes;
  uint32_t align = 16;
  api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    api().cublasLtMatmulPreferenceSetAttribute(pref, attr, &align,
                                               sizeof(align));
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t s = CUBLAS_STATUS_NOT_SUPPORTED;
  // The fused epilogue when cuBLASLt has an algorithm for it, else the
  // plain product (the runtime's epilogue kernels then follow it).
  bool auxOk = g.auxId < 0 || N % 8 == 0;
  if (wanted != plain && auxOk && setEpilogue(wanted)) {
    int64_t ld = N;
    bool ready =
        g.auxId < 0 || api().cublasLtMatmulDescSetAttribute(
                           g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                           sizeof(ld)) == CUBLAS_STATUS_SUCCESS;
    if (ready)
      s = api().cublasLtMatmulAlgoGetHeuristic(
          backend.lt, g.desc, g.a, g.b, g.c, g.c, pref, 1, &result, &found);
    g.fused = ready && s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (!g.fused && !setEpilogue(plain)) {
      api().cublasLtMatmulPreferenceDestroy(pref);
      return false;
    }
  }
  if (!g.fused)
    s = api().cublasLtMatmulAlgoGetHeuristic(backend.lt, g.desc, g.a, g.b, g.c,
                                             g.c, pref, 1, &result, &found);
  api().cublasLtMatmulPreferenceDestroy(pref);
  // Unfused GELU_AUX: the product (with its bias) is the GELU input.
  if (g.epilogue == MP::GELU_AUX && !g.fused)
    g.cId = g.auxId;
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    error = "cuBLASLt has no algorithm for " + std::to_string(M) + " x " +
            std::to_string(N) + " x " + std::to_string(K) + " (batch " +
            std::to_string(batch) + ")";
    return false;
  }
  g.algo = result.algo;
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

/// On the communication stream, after everything the compute stream has
/// enqueued so far; `done` marks its end for the compute stream's waits.
void CudaRunner::runCollective(size_t index) {
  const Kernel &k = function.kernels(static_cast<int>(index));
  Collective &c = *comms[index];
  cudaStream_t comm = backend.commStream;
  GPTC_CUDA_CHECK(api().cudaEventRecord(backend.handOver, backend.stream));
  GPTC_CUDA_CHECK(api().cudaStreamWaitEvent(comm, backend.handOver, 0));
  if (k.inputs_size() > 1) {
    runBucket(index);
    GPTC_CUDA_CHECK(api().cudaEventRecord(c.done, comm));
    return;
  }
  const program::Value &xv = function.values(k.inputs(0)),
                       &yv = function.values(k.outputs(0));
  DType t = xv.type().dtype();
  void *x = ptr[k.inputs(0)], *y = ptr[k.outputs(0)];
  std::string error;
  auto check = [&](bool ok) {
    if (!ok)
      cuda::fail(error.c_str(),
                 (program::OpKind_Name(k.op()) + " at " + k.location()).c_str(),
                 __FILE__, __LINE__);
  };
  bool reduce =
      k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX;
  if (c.ranks == 1) {
    // A group of one: the result is the operand.
    if (x != y)
      GPTC_CUDA_CHECK(api().cudaMemcpyAsync(y, x,
                                            numElements(yv) * elementSize(t),
                                            cudaMemcpyDeviceToDevice, comm));
  } else if (reduce) {
    check(backend.collectives->allReduce(x, y, numElements(yv), t,
                                         k.op() == program::ALL_REDUCE_MAX,
                                         c.grid, c.axes, comm, error));
  } else if (k.op() == program::ALL_GATHER) {
    if (c.outer == 1) {
      check(backend.collectives->allGather(x, y, numElements(xv), t, c.grid,
                                           c.axes, comm, error));
    } else {
      // Gathered rank-major, then each rank's block to its columns.
      std::byte *packed = static_cast<std::byte *>(backend.packing.ptr);
      check(backend.collectives->allGather(x, packed, numElements(xv), t,
                                           c.grid, c.axes, comm, error));
      for (int64_t r = 0; r < c.ranks; ++r)
        GPTC_CUDA_CHECK(api().cudaMemcpy2DAsync(
            static_cast<std::byte *>(y) + r * c.chunk, c.ranks * c.chunk,
            packed + r * c.blockBytes, c.chunk, c.chunk, c.outer,
            cudaMemcpyDeviceToDevice, comm));
    }
  } else {
    if (c.outer == 1) {
      check(backend.collectives->reduceScatter(x, y, numElements(yv), t, c.grid,
                                               c.axes, comm, error));
    } else {
      std::byte *packed = static_cast<std::byte *>(backend.packing.ptr);
      for (int64_t r = 0; r < c.ranks; ++r)
        GPTC_CUDA_CHECK(api().cudaMemcpy2DAsync(
            packed + r * c.blockBytes, c.chunk,
            static_cast<const std::byte *>(x) + r * c.chunk, c.ranks * c.chunk,
            c.chunk, c.outer, cudaMemcpyDeviceToDevice, comm));
      check(backend.collectives->reduceScatter(packed, y, numElements(yv), t,
                                               c.grid, c.axes, comm, error));
    }
  }
  GPTC_CUDA_CHECK(api().cudaEventRecord(c.done, comm));
}

/// A gradient bucket on the communication stream: one NCCL call over its
/// span when the plan made one, else one call per tensor in an NCCL group
/// (which NCCL runs as one launch).
void CudaRunner::runBucket(size_t index) {
  const Kernel &k = function.kernels(static_cast<int>(index));
  Collective &c = *comms[index];
  cudaStream_t comm = backend.commStream;
  DType t = function.values(k.outputs(0)).type().dtype();
  std::string error;
  auto check = [&](bool ok) {
    if (!ok)
      cuda::fail(error.c_str(),
                 (program::OpKind_Name(k.op()) + " at " + k.location()).c_str(),
                 __FILE__, __LINE__);
  };
  if (c.ranks == 1) {
    for (int i = 0; i < k.inputs_size(); ++i)
      if (ptr[k.inputs(i)] != ptr[k.outputs(i)])
        GPTC_CUDA_CHECK(api().cudaMemcpyAsync(
            ptr[k.outputs(i)], ptr[k.inputs(i)],
            numElements(function.values(k.outputs(i))) * elementSize(t),
            cudaMemcpyDeviceToDevice, comm));
    return;
  }
  DeviceCollectives &dc = *backend.collectives;
  if (c.span > 0) {
    void *data = ptr[k.outputs(0)];
    check(dc.allReduce(data, data, c.span, t, false, c.grid, c.axes, comm,
                       error));
    return;
  }
  // One NCCL call per tensor, issued as one operation.
  check(dc.beginGroup(error));
  for (int i = 0; i < k.inputs_size(); ++i) {
    void *x = ptr[k.inputs(i)], *y = ptr[k.outputs(i)];
    int64_t in = numElements(function.values(k.inputs(i))),
            out = numElements(function.values(k.outputs(i)));
    if (k.op() == program::ALL_GATHER)
      check(dc.allGather(x, y, in, t, c.grid, c.axes, comm, error));
    else if (k.op() == program::REDUCE_SCATTER)
      check(dc.reduceScatter(x, y, out, t, c.grid, c.axes, comm, error));
    else
      check(dc.allReduce(x, y, out, t, false, c.grid, c.axes, comm, error));
  }
  check(dc.endGroup(error));
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
    if (!profiling) {
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
    cudaStream_t timed = collective ? backend.commStream : backend.stream;
    auto body = bodies.find(index);
    double inner =
        body != bodies.end() ? body->second->times.totalSeconds() : 0;
    GPTC_CUDA_CHECK(api().cudaEventRecord(startEvents[index], timed));
    runKernel(index);
    GPTC_CUDA_CHECK(api().cudaEventRecord(stopEvents[index], timed));
    if (body != bodies.end())
      innerSeconds[index] += body->second->times.totalSeconds() - inner;
    recorded[index] = true;
  }
  if (profiling) {
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
  // from the host, is not a graph.
  StepGraph *graph = nullptr;
  if (backend.graphs && runs > 0 && !profiling && poisonKernel < 0) {
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

void CudaRunner::enableProfiling() {
  size_t n = static_cast<size_t>(function.kernels_size());
  if (startEvents.empty())
    for (size_t i = 0; i < n; ++i) {
      cudaEvent_t start, stop;
      GPTC_CUDA_CHECK(api().cudaEventCreate(&start));
      GPTC_CUDA_CHECK(api().cudaEventCreate(&stop));
      startEvents.push_back(start);
      stopEvents.push_back(stop);
    }
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
}

std::vector<KernelTime> CudaRunner::profile() const { return times.kernels(); }

std::unique_ptr<Backend>
gptc::runtime::createCudaBackend(const program::Program &program, int device,
                                 std::string &error, Communicator *bootstrap) {
  return CudaBackend::create(program, device, bootstrap, error);
}

bool gptc::runtime::cudaDeviceAvailable(std::string &why) {
  int count = 0;
  cudaError_t status = api().cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0)
    return true;
  why = "no CUDA device: " + std::string(status != cudaSuccess
                                             ? api().cudaGetErrorString(status)
                                             : "none is visible");
  return false;
}

int gptc::runtime::cudaDeviceCount() {
  int count = 0;
  return api().cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
