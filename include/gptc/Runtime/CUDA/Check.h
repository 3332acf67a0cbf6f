//===- Check.h - CUDA, cuBLAS and NCCL error checks ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every CUDA, cuBLAS(Lt) and NCCL call in gptc's runtime goes through one of
// these macros, which report the failing call with its file:line and the
// library's own error string, then end the process: a device error is not
// something the runtime can continue from with correct results.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_CHECK_H
#define GPTC_RUNTIME_CUDA_CHECK_H

#include "gptc/Runtime/CUDA/CudaApi.h"

#include <cstdio>
#include <cstdlib>

namespace gptc::cuda {

/// Ends the process at once (no handlers: the device's state is unknown,
/// and nothing it holds may be saved as a checkpoint), with status 70
/// (EX_SOFTWARE), not a crash report.
[[noreturn]] inline void fail(const char *what, const char *call,
                              const char *file, int line) {
  std::fprintf(stderr, "%s:%d: error: %s failed: %s\n", file, line, call, what);
  std::fflush(stderr);
  std::_Exit(70);
}

} // namespace gptc::cuda

/// Checks a CUDA runtime call.
#define GPTC_CUDA_CHECK(call)                                                  \
  do {                                                                         \
    cudaError_t gptcStatus_ = (call);                                          \
    if (gptcStatus_ != cudaSuccess)                                            \
      ::gptc::cuda::fail(::gptc::cuda::api().cudaGetErrorString(gptcStatus_),  \
                         #call, __FILE__, __LINE__);                           \
  } while (0)

/// Checks the last kernel launch (launch errors, not execution errors, which
/// surface at the next synchronizing call).
#define GPTC_CUDA_CHECK_LAUNCH()                                               \
  GPTC_CUDA_CHECK(::gptc::cuda::api().cudaGetLastError())

/// Checks an NCCL call.
#define GPTC_NCCL_CHECK(call)                                                  \
  do {                                                                         \
    ncclResult_t gptcStatus_ = (call);                                         \
    if (gptcStatus_ != ncclSuccess)                                            \
      ::gptc::cuda::fail(::gptc::cuda::api().ncclGetErrorString(gptcStatus_),  \
                         #call, __FILE__, __LINE__);                           \
  } while (0)

#endif // GPTC_RUNTIME_CUDA_CHECK_H
