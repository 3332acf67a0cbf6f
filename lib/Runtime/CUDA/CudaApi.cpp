//===- CudaApi.cpp - NVIDIA's libraries or the virtual device -------------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/CudaApi.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace gptc::cuda;

namespace {

/// The functions this program links: NVIDIA's.
CudaApi makeNvidiaApi() {
  CudaApi t{};
  t.name = "cuda";
#define GPTC_CUDA_API_REAL(ret, fn, params)                                    \
  t.fn = static_cast<ret(*) params>(&::fn);
  GPTC_CUDART_ENTRY_POINTS(GPTC_CUDA_API_REAL)
  GPTC_CUBLASLT_ENTRY_POINTS(GPTC_CUDA_API_REAL)
#ifdef GPTC_HAVE_NCCL
  GPTC_NCCL_ENTRY_POINTS(GPTC_CUDA_API_REAL)
#endif
#undef GPTC_CUDA_API_REAL
  t.kernels = &gpuDeviceKernels();
  return t;
}

const CudaApi &nvidiaApi() {
  static const CudaApi table = makeNvidiaApi();
  return table;
}

std::atomic<const CudaApi *> current{nullptr};
std::mutex loading;

/// The directory of the file this code was loaded from (the program or
/// the shared library holding the runtime), with a trailing slash.
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&ownDirectory), &info) ||
      !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

} // namespace

const CudaApi &gptc::cuda::api() {
  const CudaApi *t = current.load(std::memory_order_acquire);
  return t ? *t : nvidiaApi();
}

bool gptc::cuda::usingVirtualDevice() {
  const CudaApi *t = current.load(std::memory_order_acquire);
  return t && t != &nvidiaApi();
}

bool gptc::cuda::useVirtualDevice(std::string &error) {
  std::lock_guard<std::mutex> lock(loading);
  if (usingVirtualDevice())
    return true;
  std::vector<std::string> candidates;
  if (const char *path = std::getenv("GPTC_VIRTUAL_CUDA_LIBRARY");
      path && *path)
    candidates.push_back(path);
  // build/bin/gptc -> build/lib; build/lib/libGptcCAPI.so -> build/lib; an
  // installed layout likewise.
  std::string dir = ownDirectory();
  candidates.push_back(dir + "libGptcVirtualCuda.so");
  candidates.push_back(dir + "../lib/libGptcVirtualCuda.so");
  std::string tried;
  for (const std::string &path : candidates) {
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      tried += std::string("\n  ") + dlerror();
      continue;
    }
    auto entry =
        reinterpret_cast<VirtualCudaEntry>(dlsym(handle, kVirtualCudaEntry));
    const CudaApi *table = entry ? entry(kCudaApiVersion) : nullptr;
    if (!table) {
      error = path + " is not a virtual CUDA device of this gptc (no " +
              kVirtualCudaEntry + " for table version " +
              std::to_string(kCudaApiVersion) + ")";
      return false;
    }
    current.store(table, std::memory_order_release);
    return true;
  }
  error =
      "the virtual CUDA device (libGptcVirtualCuda.so) does not load:" + tried;
  return false;
}
