//===- CudaBackend.cpp - Device, streams, residency -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend: creating it for a device, the copy bandwidth, resident
// tensors and their synchronization, and the entry points (CudaRunner.h says
// how the backend's files divide).
//
//===----------------------------------------------------------------------===//

#include "CudaRunner.h"

using namespace gptc;
using namespace gptc::runtime;
using namespace gptc::runtime::cudart;

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
