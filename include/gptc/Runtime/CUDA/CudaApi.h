//===- CudaApi.h - The CUDA entry points the GPU runtime calls --*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every CUDA runtime, cuBLASLt and NCCL function the GPU runtime calls goes
// through one table, and so does every launch of its hand-written kernels.
// The table is either NVIDIA's libraries (the functions this program links)
// or the virtual CUDA device (libGptcVirtualCuda.so, lib/Runtime/VirtualCuda:
// strict stand-ins on host memory), chosen at run time: `--device
// virtual-cuda` selects the stand-ins before the backend starts. The
// backend's code is the same either way.
//
// The members have the libraries' names and signatures, so a call reads
// `api().cudaMalloc(&p, n)`.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_CUDAAPI_H
#define GPTC_RUNTIME_CUDA_CUDAAPI_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>

namespace gptc::cuda {

/// The element type of an attention's operands: fp32 runs on the CUDA
/// cores (FMAs), bf16 and fp16 (mixed precision) on the tensor cores with
/// fp32 accumulation.
enum class AttentionType { F32, BF16, F16 };

/// The hand-written kernels' launchers (DeviceKernels.h says what each
/// computes). The GPU's are DeviceKernels.cu compiled by nvcc; the virtual
/// device's are the same DeviceKernels.cuh compiled as host C++ and run
/// under the emulation of CUDA's device language.
struct DeviceKernelSet {
  cudaError_t (*attentionForward)(AttentionType type, const void *q,
                                  const void *k, const void *v, void *out,
                                  int64_t batch, int64_t T, int64_t C,
                                  int64_t heads, cudaStream_t stream);
  cudaError_t (*attentionBackward)(AttentionType type, const void *q,
                                   const void *k, const void *v,
                                   const void *dout, void *dq, void *dk,
                                   void *dv, float *stats, int64_t batch,
                                   int64_t T, int64_t C, int64_t heads,
                                   cudaStream_t stream);
  cudaError_t (*embeddingGrad)(const int32_t *ids, int64_t n, const float *dy,
                               int64_t vocab, int64_t width,
                               const int32_t *offset, float *dtable,
                               cudaStream_t stream);
  cudaError_t (*addInPlace)(int dtype, void *y, const void *x, int64_t n,
                            cudaStream_t stream);
  cudaError_t (*geluEpilogue)(int dtype, const void *pre, void *act, int64_t n,
                              cudaStream_t stream);
  cudaError_t (*dgeluEpilogue)(int dtype, const void *pre, void *d, int64_t n,
                               cudaStream_t stream);
  cudaError_t (*biasGradEpilogue)(int dtype, const void *x, int64_t rows,
                                  int64_t cols, void *db, cudaStream_t stream);
  cudaError_t (*scaleInPlace)(float *x, int64_t n, float f,
                              cudaStream_t stream);
  cudaError_t (*sumOfSquares)(const float *x, int64_t n, double *partials,
                              double *total, cudaStream_t stream);
  cudaError_t (*adamW)(float *p, const float *g, float *m, float *v, int64_t n,
                       double lr, int64_t step, double scale, double beta1,
                       double beta2, double eps, double weightDecay,
                       cudaStream_t stream);
};

// X(return type, name, parameters): the entry points, by library.
#define GPTC_CUDART_ENTRY_POINTS(X)                                            \
  X(cudaError_t, cudaGetDeviceCount, (int *count))                             \
  X(cudaError_t, cudaSetDevice, (int device))                                  \
  X(cudaError_t, cudaGetDeviceProperties, (cudaDeviceProp * prop, int device)) \
  X(const char *, cudaGetErrorString, (cudaError_t error))                     \
  X(cudaError_t, cudaGetLastError, ())                                         \
  X(cudaError_t, cudaDeviceSynchronize, ())                                    \
  X(cudaError_t, cudaDriverGetVersion, (int *version))                         \
  X(cudaError_t, cudaRuntimeGetVersion, (int *version))                        \
  X(cudaError_t, cudaMalloc, (void **ptr, size_t size))                        \
  X(cudaError_t, cudaFree, (void *ptr))                                        \
  X(cudaError_t, cudaMemcpy,                                                   \
    (void *dst, const void *src, size_t count, cudaMemcpyKind kind))           \
  X(cudaError_t, cudaMemcpyAsync,                                              \
    (void *dst, const void *src, size_t count, cudaMemcpyKind kind,            \
     cudaStream_t stream))                                                     \
  X(cudaError_t, cudaMemcpy2DAsync,                                            \
    (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,   \
     size_t height, cudaMemcpyKind kind, cudaStream_t stream))                 \
  X(cudaError_t, cudaMemset, (void *ptr, int value, size_t count))             \
  X(cudaError_t, cudaMemsetAsync,                                              \
    (void *ptr, int value, size_t count, cudaStream_t stream))                 \
  X(cudaError_t, cudaStreamCreate, (cudaStream_t * stream))                    \
  X(cudaError_t, cudaStreamCreateWithFlags,                                    \
    (cudaStream_t * stream, unsigned flags))                                   \
  X(cudaError_t, cudaStreamDestroy, (cudaStream_t stream))                     \
  X(cudaError_t, cudaStreamSynchronize, (cudaStream_t stream))                 \
  X(cudaError_t, cudaStreamQuery, (cudaStream_t stream))                       \
  X(cudaError_t, cudaStreamWaitEvent,                                          \
    (cudaStream_t stream, cudaEvent_t event, unsigned flags))                  \
  X(cudaError_t, cudaEventCreate, (cudaEvent_t * event))                       \
  X(cudaError_t, cudaEventCreateWithFlags,                                     \
    (cudaEvent_t * event, unsigned flags))                                     \
  X(cudaError_t, cudaEventDestroy, (cudaEvent_t event))                        \
  X(cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream))    \
  X(cudaError_t, cudaEventSynchronize, (cudaEvent_t event))                    \
  X(cudaError_t, cudaEventQuery, (cudaEvent_t event))                          \
  X(cudaError_t, cudaEventElapsedTime,                                         \
    (float *ms, cudaEvent_t start, cudaEvent_t end))                           \
  X(cudaError_t, cudaLibraryLoadData,                                          \
    (cudaLibrary_t * library, const void *code, cudaJitOption *jitOptions,     \
     void **jitOptionsValues, unsigned numJitOptions,                          \
     cudaLibraryOption *libraryOptions, void **libraryOptionValues,            \
     unsigned numLibraryOptions))                                              \
  X(cudaError_t, cudaLibraryGetKernel,                                         \
    (cudaKernel_t * kernel, cudaLibrary_t library, const char *name))          \
  X(cudaError_t, cudaLibraryUnload, (cudaLibrary_t library))                   \
  X(cudaError_t, cudaLaunchKernel,                                             \
    (const void *func, dim3 grid, dim3 block, void **args, size_t sharedMem,   \
     cudaStream_t stream))                                                     \
  X(cudaError_t, cudaStreamBeginCapture,                                       \
    (cudaStream_t stream, cudaStreamCaptureMode mode))                         \
  X(cudaError_t, cudaStreamEndCapture,                                         \
    (cudaStream_t stream, cudaGraph_t * graph))                                \
  X(cudaError_t, cudaStreamIsCapturing,                                        \
    (cudaStream_t stream, cudaStreamCaptureStatus * status))                   \
  X(cudaError_t, cudaGraphGetNodes,                                            \
    (cudaGraph_t graph, cudaGraphNode_t * nodes, size_t *count))               \
  X(cudaError_t, cudaGraphInstantiate,                                         \
    (cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags))     \
  X(cudaError_t, cudaGraphLaunch, (cudaGraphExec_t exec, cudaStream_t stream)) \
  X(cudaError_t, cudaGraphExecDestroy, (cudaGraphExec_t exec))                 \
  X(cudaError_t, cudaGraphDestroy, (cudaGraph_t graph))

#define GPTC_CUBLASLT_ENTRY_POINTS(X)                                          \
  X(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle))               \
  X(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle))                \
  X(const char *, cublasLtGetStatusString, (cublasStatus_t status))            \
  X(cublasStatus_t, cublasLtMatmulDescCreate,                                  \
    (cublasLtMatmulDesc_t * desc, cublasComputeType_t computeType,             \
     cudaDataType_t scaleType))                                                \
  X(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc))    \
  X(cublasStatus_t, cublasLtMatmulDescSetAttribute,                            \
    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,           \
     const void *buf, size_t size))                                            \
  X(cublasStatus_t, cublasLtMatrixLayoutCreate,                                \
    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,        \
     uint64_t cols, int64_t ld))                                               \
  X(cublasStatus_t, cublasLtMatrixLayoutDestroy,                               \
    (cublasLtMatrixLayout_t layout))                                           \
  X(cublasStatus_t, cublasLtMatrixLayoutSetAttribute,                          \
    (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,      \
     const void *buf, size_t size))                                            \
  X(cublasStatus_t, cublasLtMatmulPreferenceCreate,                            \
    (cublasLtMatmulPreference_t * pref))                                       \
  X(cublasStatus_t, cublasLtMatmulPreferenceDestroy,                           \
    (cublasLtMatmulPreference_t pref))                                         \
  X(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,                      \
    (cublasLtMatmulPreference_t pref,                                          \
     cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size)) \
  X(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,                            \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,                       \
     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,                       \
     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,                       \
     cublasLtMatmulPreference_t pref, int requested,                           \
     cublasLtMatmulHeuristicResult_t *results, int *returned))                 \
  X(cublasStatus_t, cublasLtMatmul,                                            \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,    \
     const void *A, cublasLtMatrixLayout_t a, const void *B,                   \
     cublasLtMatrixLayout_t b, const void *beta, const void *C,                \
     cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,              \
     const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSize,  \
     cudaStream_t stream))

#define GPTC_NCCL_ENTRY_POINTS(X)                                              \
  X(ncclResult_t, ncclGetVersion, (int *version))                              \
  X(const char *, ncclGetErrorString, (ncclResult_t result))                   \
  X(const char *, ncclGetLastError, (ncclComm_t comm))                         \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))                        \
  X(ncclResult_t, ncclCommInitRank,                                            \
    (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank))                \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                          \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                            \
  X(ncclResult_t, ncclCommGetAsyncError,                                       \
    (ncclComm_t comm, ncclResult_t * asyncError))                              \
  X(ncclResult_t, ncclGroupStart, ())                                          \
  X(ncclResult_t, ncclGroupEnd, ())                                            \
  X(ncclResult_t, ncclAllReduce,                                               \
    (const void *send, void *recv, size_t count, ncclDataType_t type,          \
     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))                    \
  X(ncclResult_t, ncclReduceScatter,                                           \
    (const void *send, void *recv, size_t count, ncclDataType_t type,          \
     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))                    \
  X(ncclResult_t, ncclAllGather,                                               \
    (const void *send, void *recv, size_t count, ncclDataType_t type,          \
     ncclComm_t comm, cudaStream_t stream))

/// The table. `name` says whose functions these are ("cuda" or
/// "virtual-cuda").
struct CudaApi {
  const char *name;
#define GPTC_CUDA_API_MEMBER(ret, fn, params) ret(*fn) params;
  GPTC_CUDART_ENTRY_POINTS(GPTC_CUDA_API_MEMBER)
  GPTC_CUBLASLT_ENTRY_POINTS(GPTC_CUDA_API_MEMBER)
  GPTC_NCCL_ENTRY_POINTS(GPTC_CUDA_API_MEMBER)
#undef GPTC_CUDA_API_MEMBER
  const DeviceKernelSet *kernels;
};

/// The table in use: NVIDIA's libraries unless useVirtualDevice() chose
/// the stand-ins.
const CudaApi &api();

/// Whether the virtual device is in use.
bool usingVirtualDevice();

/// Switches this process to the virtual CUDA device: loads
/// libGptcVirtualCuda.so (beside this program's libraries, or the path in
/// GPTC_VIRTUAL_CUDA_LIBRARY) and takes its table. Call it before any CUDA
/// call. False with `error` set when the library cannot be loaded.
bool useVirtualDevice(std::string &error);

/// The GPU's hand-written kernels (DeviceKernels.cu).
const DeviceKernelSet &gpuDeviceKernels();

/// The name the table of a virtual device library exports, and its type.
inline constexpr const char *kVirtualCudaEntry = "gptcVirtualCudaApi";
using VirtualCudaEntry = const CudaApi *(*)(int abiVersion);
/// Bumped whenever CudaApi or DeviceKernelSet changes.
inline constexpr int kCudaApiVersion = 3;

} // namespace gptc::cuda

#endif // GPTC_RUNTIME_CUDA_CUDAAPI_H
