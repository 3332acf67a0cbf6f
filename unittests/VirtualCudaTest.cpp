//===- VirtualCudaTest.cpp - The virtual CUDA device's own checks ---------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The stand-ins of libGptcVirtualCuda.so through the same table the GPU
// runtime calls (CudaApi.h): cuBLASLt's products against a reference
// written here from NVIDIA's column-major definitions (not from how gptc
// builds its descriptors), and each checker made to fire: a race between
// two streams, a host read without a sync, an access past an allocation,
// a write into its padding, a misaligned operand.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CUDA/CudaApi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

using gptc::cuda::api;

namespace {

class VirtualCuda : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    std::string error;
    ASSERT_TRUE(gptc::cuda::useVirtualDevice(error)) << error;
  }
  void *deviceCopy(const std::vector<float> &host) {
    void *p = nullptr;
    EXPECT_EQ(api().cudaMalloc(&p, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(api().cudaMemcpy(p, host.data(), host.size() * sizeof(float),
                               cudaMemcpyHostToDevice),
              cudaSuccess);
    return p;
  }
  std::vector<float> hostCopy(const void *p, size_t n) {
    std::vector<float> host(n);
    EXPECT_EQ(api().cudaMemcpy(host.data(), p, n * sizeof(float),
                               cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
};

std::vector<float> randomVector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(gen);
  return v;
}

/// A cuBLASLt matmul of f32 matrices, column-major, through the table.
struct Product {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int64_t m = 5, n = 3, k = 4, pad = 2, batch = 1;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t rowsA() const { return transa == CUBLAS_OP_N ? m : k; }
  int64_t colsA() const { return transa == CUBLAS_OP_N ? k : m; }
  int64_t rowsB() const { return transb == CUBLAS_OP_N ? k : n; }
  int64_t colsB() const { return transb == CUBLAS_OP_N ? n : k; }
  int64_t lda() const { return rowsA() + pad; }
  int64_t ldb() const { return rowsB() + pad; }
  int64_t ldc() const { return m + pad; }
  int64_t strideA() const { return lda() * colsA(); }
  int64_t strideB() const { return ldb() * colsB(); }
  int64_t strideC() const { return ldc() * n; }
  /// op(A)(i, p) of batch t, from A's column-major storage.
  float a(const std::vector<float> &A, int64_t t, int64_t i, int64_t p) const {
    int64_t r = transa == CUBLAS_OP_N ? i : p,
            c = transa == CUBLAS_OP_N ? p : i;
    return A[t * strideA() + c * lda() + r];
  }
  float b(const std::vector<float> &B, int64_t t, int64_t p, int64_t j) const {
    int64_t r = transb == CUBLAS_OP_N ? p : j,
            c = transb == CUBLAS_OP_N ? j : p;
    return B[t * strideB() + c * ldb() + r];
  }
};

cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t ld,
                              int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l;
  EXPECT_EQ(api().cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld),
            CUBLAS_STATUS_SUCCESS);
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    api().cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    api().cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride));
  }
  return l;
}

/// Runs `p` on A, B into D (and bias / aux as the epilogue wants);
/// returns the status of cublasLtMatmul.
cublasStatus_t runProduct(const Product &p, const void *A, const void *B,
                          void *D, void *bias = nullptr, void *aux = nullptr,
                          uint32_t alignment = 16) {
  cublasLtHandle_t lt;
  EXPECT_EQ(api().cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc;
  EXPECT_EQ(
      api().cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      CUBLAS_STATUS_SUCCESS);
  api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                       &p.transa, sizeof(p.transa));
  api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                       &p.transb, sizeof(p.transb));
  api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                       &p.epilogue, sizeof(p.epilogue));
  if (bias)
    api().cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (aux) {
    int64_t ld = p.ldc();
    api().cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    api().cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
  }
  cublasLtMatrixLayout_t la =
      layout(p.rowsA(), p.colsA(), p.lda(), p.batch, p.strideA());
  cublasLtMatrixLayout_t lb =
      layout(p.rowsB(), p.colsB(), p.ldb(), p.batch, p.strideB());
  cublasLtMatrixLayout_t lc = layout(p.m, p.n, p.ldc(), p.batch, p.strideC());
  cublasLtMatmulPreference_t pref;
  api().cublasLtMatmulPreferenceCreate(&pref);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    api().cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment,
                                               sizeof(alignment));
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  EXPECT_EQ(api().cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref,
                                                 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(found, 1);
  float one = 1.f, zero = 0.f;
  cublasStatus_t s =
      api().cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, D, lc, D, lc,
                           &result.algo, nullptr, 0, nullptr);
  api().cudaDeviceSynchronize();
  api().cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {la, lb, lc})
    api().cublasLtMatrixLayoutDestroy(l);
  api().cublasLtMatmulDescDestroy(desc);
  api().cublasLtDestroy(lt);
  return s;
}

float gelu(float x) {
  return 0.5f * x *
         (1.f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

TEST_F(VirtualCuda, MatmulFollowsColumnMajorTransposesAndBatches) {
  for (auto ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (auto tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      Product p;
      p.transa = ta;
      p.transb = tb;
      p.batch = 2;
      std::vector<float> A = randomVector(p.batch * p.strideA(), 1),
                         B = randomVector(p.batch * p.strideB(), 2);
      void *dA = deviceCopy(A), *dB = deviceCopy(B);
      void *dD = deviceCopy(std::vector<float>(p.batch * p.strideC(), 7.f));
      ASSERT_EQ(runProduct(p, dA, dB, dD), CUBLAS_STATUS_SUCCESS);
      std::vector<float> D = hostCopy(dD, p.batch * p.strideC());
      for (int64_t t = 0; t < p.batch; ++t)
        for (int64_t i = 0; i < p.m; ++i)
          for (int64_t j = 0; j < p.n; ++j) {
            double want = 0;
            for (int64_t q = 0; q < p.k; ++q)
              want += double(p.a(A, t, i, q)) * p.b(B, t, q, j);
            EXPECT_NEAR(D[t * p.strideC() + j * p.ldc() + i], want, 1e-5)
                << "transa " << ta << " transb " << tb << " at (" << t << ", "
                << i << ", " << j << ")";
          }
      // The padding rows of D are not written.
      EXPECT_EQ(D[p.m], 7.f);
      for (void *x : {dA, dB, dD})
        api().cudaFree(x);
    }
}

TEST_F(VirtualCuda, MatmulEpilogues) {
  Product p;
  p.pad = 0;
  p.m = 8; // the auxiliary matrix's leading dimension: a multiple of 8
  std::vector<float> A = randomVector(p.strideA(), 3),
                     B = randomVector(p.strideB(), 4),
                     bias = randomVector(p.m, 5);
  auto product = [&](int64_t i, int64_t j) {
    double s = 0;
    for (int64_t q = 0; q < p.k; ++q)
      s += double(p.a(A, 0, i, q)) * p.b(B, 0, q, j);
    return static_cast<float>(s);
  };
  void *dA = deviceCopy(A), *dB = deviceCopy(B);
  void *dD = deviceCopy(std::vector<float>(p.strideC()));
  void *dAux = deviceCopy(std::vector<float>(p.strideC()));
  void *dBias = deviceCopy(bias);

  // GELU_AUX_BIAS: aux = AB + bias, D = gelu(aux).
  p.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  ASSERT_EQ(runProduct(p, dA, dB, dD, dBias, dAux), CUBLAS_STATUS_SUCCESS);
  std::vector<float> D = hostCopy(dD, p.strideC()),
                     aux = hostCopy(dAux, p.strideC());
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float pre = product(i, j) + bias[i];
      EXPECT_NEAR(aux[j * p.m + i], pre, 1e-5);
      EXPECT_NEAR(D[j * p.m + i], gelu(pre), 1e-5);
    }

  // DGELU_BGRAD: D = AB * gelu'(aux), the bias pointer gets D's row sums.
  p.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  ASSERT_EQ(runProduct(p, dA, dB, dD, dBias, dAux), CUBLAS_STATUS_SUCCESS);
  D = hostCopy(dD, p.strideC());
  std::vector<float> db = hostCopy(dBias, p.m);
  for (int64_t i = 0; i < p.m; ++i) {
    double rowSum = 0;
    for (int64_t j = 0; j < p.n; ++j) {
      float x = aux[j * p.m + i], h = 1e-3f;
      float grad = (gelu(x + h) - gelu(x - h)) / (2 * h);
      EXPECT_NEAR(D[j * p.m + i], product(i, j) * grad, 1e-3);
      rowSum += D[j * p.m + i];
    }
    EXPECT_NEAR(db[i], rowSum, 1e-5);
  }

  // BGRADB: the bias pointer gets op(B)'s sums over k, one per column of D.
  p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  ASSERT_EQ(runProduct(p, dA, dB, dD, dBias), CUBLAS_STATUS_SUCCESS);
  db = hostCopy(dBias, p.n);
  for (int64_t j = 0; j < p.n; ++j) {
    double sum = 0;
    for (int64_t q = 0; q < p.k; ++q)
      sum += p.b(B, 0, q, j);
    EXPECT_NEAR(db[j], sum, 1e-5);
  }
  for (void *x : {dA, dB, dD, dAux, dBias})
    api().cudaFree(x);
}

TEST_F(VirtualCuda, MatmulRefusesMisalignedOperands) {
  Product p;
  std::vector<float> A = randomVector(p.strideA() + 1, 6),
                     B = randomVector(p.strideB(), 7);
  void *dA = deviceCopy(A), *dB = deviceCopy(B);
  void *dD = deviceCopy(std::vector<float>(p.strideC()));
  // A one float in: aligned to 4 bytes, not to the 16 the algorithm was
  // chosen for.
  EXPECT_EQ(runProduct(p, static_cast<float *>(dA) + 1, dB, dD),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      runProduct(p, static_cast<float *>(dA) + 1, dB, dD, nullptr, nullptr, 4),
      CUBLAS_STATUS_SUCCESS);
  for (void *x : {dA, dB, dD})
    api().cudaFree(x);
}

TEST_F(VirtualCuda, NewMemoryIsNotZero) {
  void *p;
  ASSERT_EQ(api().cudaMalloc(&p, 16), cudaSuccess);
  std::vector<float> host = hostCopy(p, 4);
  for (float x : host)
    EXPECT_TRUE(std::isnan(x));
  api().cudaFree(p);
}

TEST_F(VirtualCuda, CopiesAreBoundsChecked) {
  void *p;
  ASSERT_EQ(api().cudaMalloc(&p, 64), cudaSuccess);
  std::vector<char> host(65);
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().cudaMemcpy(p, host.data(), 65, cudaMemcpyHostToDevice),
            cudaErrorIllegalAddress);
  EXPECT_EQ(api().cudaMemcpy(host.data(), p, 64, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("touches bytes [0, 65) of allocation"), std::string::npos)
      << said;
  EXPECT_NE(said.find("past its end by 1 bytes"), std::string::npos) << said;
  EXPECT_NE(said.find("but says kind 1"), std::string::npos) << said;
  api().cudaGetLastError();
  api().cudaFree(p);
}

TEST_F(VirtualCuda, UnorderedStreamsRace) {
  cudaStream_t s1, s2;
  cudaEvent_t written;
  api().cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  api().cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  api().cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
  void *a, *b;
  api().cudaMalloc(&a, 256);
  api().cudaMalloc(&b, 256);
  // Ordered by an event: no race.
  ASSERT_EQ(api().cudaMemsetAsync(a, 1, 256, s1), cudaSuccess);
  api().cudaEventRecord(written, s1);
  api().cudaStreamWaitEvent(s2, written, 0);
  EXPECT_EQ(api().cudaMemcpyAsync(b, a, 256, cudaMemcpyDeviceToDevice, s2),
            cudaSuccess);
  // A write on s1 now, of what s2 read, would race with that read (write
  // after read): the host waits for the device first.
  api().cudaDeviceSynchronize();
  // Disjoint bytes on two streams: no race.
  EXPECT_EQ(api().cudaMemsetAsync(a, 2, 128, s1), cudaSuccess);
  EXPECT_EQ(api().cudaMemsetAsync(static_cast<char *>(a) + 128, 3, 128, s2),
            cudaSuccess);
  // The same bytes, nothing between: a race naming both.
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().cudaMemcpyAsync(b, a, 64, cudaMemcpyDeviceToDevice, s2),
            cudaErrorLaunchFailure);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("race on allocation"), std::string::npos) << said;
  EXPECT_NE(said.find("cudaMemcpyAsync on stream"), std::string::npos) << said;
  EXPECT_NE(said.find("and cudaMemsetAsync on stream"), std::string::npos)
      << said;
  api().cudaGetLastError();
  api().cudaDeviceSynchronize();
  api().cudaFree(a);
  api().cudaFree(b);
  api().cudaEventDestroy(written);
  api().cudaStreamDestroy(s1);
  api().cudaStreamDestroy(s2);
}

TEST_F(VirtualCuda, HostReadsNeedASync) {
  cudaStream_t s;
  api().cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *a;
  api().cudaMalloc(&a, 64);
  std::vector<char> host(64);
  ASSERT_EQ(api().cudaMemsetAsync(a, 1, 64, s), cudaSuccess);
  // cudaMemcpy runs on the legacy stream, which a non-blocking stream
  // does not synchronize with.
  testing::internal::CaptureStderr();
  EXPECT_NE(api().cudaMemcpy(host.data(), a, 64, cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaMemcpy on the legacy default stream reads"),
            std::string::npos)
      << said;
  api().cudaGetLastError();
  ASSERT_EQ(api().cudaMemsetAsync(a, 2, 64, s), cudaSuccess);
  api().cudaStreamSynchronize(s);
  EXPECT_EQ(api().cudaMemcpy(host.data(), a, 64, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(host[0], 2);
  api().cudaFree(a);
  api().cudaStreamDestroy(s);
}

TEST_F(VirtualCuda, KernelLaunchesAreChecked) {
  void *y, *x;
  api().cudaMalloc(&y, 1024 * sizeof(float));
  api().cudaMalloc(&x, 1024 * sizeof(float));
  api().cudaMemset(y, 0, 1024 * sizeof(float));
  api().cudaMemset(x, 0, 1024 * sizeof(float));
  EXPECT_EQ(api().kernels->addInPlace(1, y, x, 1024, nullptr), cudaSuccess);
  // 1025 elements of 1024-element buffers.
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().kernels->addInPlace(1, y, x, 1025, nullptr),
            cudaErrorIllegalAddress);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("addInPlace (launch 1) on the legacy default stream "
                      "touches bytes [0, 4100)"),
            std::string::npos)
      << said;
  api().cudaGetLastError();
  api().cudaFree(y);
  api().cudaFree(x);
}

TEST_F(VirtualCuda, LaunchLimitsAreChecked) {
  // The attention kernels' grid: row tiles in x, heads in y, sequences in
  // z. GPT-2's 12 heads and 5,462 sequences (65,544 blocks in y when y held
  // batch x heads, which CUDA refused) launch; 65,536 sequences are over
  // CUDA's 65,535 blocks in z, refused as a GPU would refuse them.
  int64_t T = 1, C = 96, heads = 12;
  size_t bytes = static_cast<size_t>(65536 * T * C) * sizeof(float);
  void *q, *out;
  api().cudaMalloc(&q, bytes);
  api().cudaMalloc(&out, bytes);
  api().cudaMemset(q, 0, bytes);
  EXPECT_EQ(api().kernels->attentionForward(gptc::cuda::AttentionType::F32, q,
                                            q, q, out, 5462, T, C, heads,
                                            nullptr),
            cudaSuccess);
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().kernels->attentionForward(gptc::cuda::AttentionType::F32, q,
                                            q, q, out, 65536, T, C, heads,
                                            nullptr),
            cudaErrorInvalidConfiguration);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("attentionForward (launch 1)<<<(1, 12, 65536), (64, 1, "
                      "1)>>>: outside CUDA's grid and block limits"),
            std::string::npos)
      << said;
  api().cudaGetLastError();
  api().cudaFree(q);
  api().cudaFree(out);
}

TEST_F(VirtualCuda, WritesIntoThePaddingAreFound) {
  void *p;
  api().cudaMalloc(&p, 100);
  // Byte 100 is inside the allocation's 256-byte granule, past its end.
  static_cast<char *>(p)[100] = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().cudaFree(p), cudaErrorIllegalAddress);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("wrote byte 100 of allocation"), std::string::npos)
      << said;
  api().cudaGetLastError();
}

TEST_F(VirtualCuda, AccessesPastTheGranuleStop) {
  void *p;
  api().cudaMalloc(&p, 256);
  // The page after the allocation's last granule: no access may touch it.
  EXPECT_DEATH(static_cast<volatile char *>(p)[256] = 1,
               "out-of-bounds access at 0x[0-9a-f]+, byte 256 of allocation "
               "#[0-9]+ of 256 bytes");
  api().cudaFree(p);
}

/// Two non-blocking streams, and events between them, for the graph tests.
class VirtualCudaGraph : public VirtualCuda {
protected:
  void SetUp() override {
    api().cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    api().cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    api().cudaEventCreateWithFlags(&e1, cudaEventDisableTiming);
    api().cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
  }
  void TearDown() override {
    api().cudaDeviceSynchronize();
    api().cudaGetLastError();
    api().cudaEventDestroy(e1);
    api().cudaEventDestroy(e2);
    api().cudaStreamDestroy(s1);
    api().cudaStreamDestroy(s2);
  }
  /// Ends the capture on s1, expecting `code` and no graph.
  void endInvalid(cudaError_t code) {
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(api().cudaStreamEndCapture(s1, &graph), code);
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(graph, nullptr);
    api().cudaGetLastError();
  }
  /// Runs `call` (a call the capture refuses) and checks its status and
  /// message.
  void refused(const std::function<cudaError_t()> &call, cudaError_t code,
               const std::string &message) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(call(), code);
    std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find(message), std::string::npos) << said;
    api().cudaGetLastError();
  }
  cudaStream_t s1, s2;
  cudaEvent_t e1, e2;
};

TEST_F(VirtualCudaGraph, CaptureRecordsAndLaunchesReplay) {
  std::vector<float> ones(64, 1.f), zeros(64, 0.f);
  void *src = deviceCopy(ones), *a = deviceCopy(zeros), *b = deviceCopy(zeros),
       *c = deviceCopy(zeros);
  size_t bytes = 64 * sizeof(float);
  // s1 copies src to a; s2 (joining through e1) copies a to b; s1 (after
  // e2) adds b to c.
  ASSERT_EQ(api().cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  ASSERT_EQ(api().cudaMemcpyAsync(a, src, bytes, cudaMemcpyDeviceToDevice, s1),
            cudaSuccess);
  ASSERT_EQ(api().cudaEventRecord(e1, s1), cudaSuccess);
  ASSERT_EQ(api().cudaStreamWaitEvent(s2, e1, 0), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(api().cudaStreamIsCapturing(s2, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(api().cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s2),
            cudaSuccess);
  ASSERT_EQ(api().cudaEventRecord(e2, s2), cudaSuccess);
  ASSERT_EQ(api().cudaStreamWaitEvent(s1, e2, 0), cudaSuccess);
  ASSERT_EQ(api().kernels->addInPlace(1, c, b, 64, s1), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(api().cudaStreamEndCapture(s1, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(api().cudaStreamIsCapturing(s2, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  // Captured, not run.
  EXPECT_EQ(hostCopy(a, 64), zeros);
  size_t nodes = 0;
  ASSERT_EQ(api().cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(api().cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Each launch runs it all again, after what s1 had before it.
  for (int launch = 1; launch <= 3; ++launch) {
    ASSERT_EQ(api().cudaGraphLaunch(exec, s1), cudaSuccess);
    ASSERT_EQ(api().cudaStreamSynchronize(s1), cudaSuccess);
    EXPECT_EQ(hostCopy(c, 64), std::vector<float>(64, float(launch)));
  }
  // An event last recorded in the capture stands for no work.
  refused([&] { return api().cudaEventSynchronize(e1); },
          cudaErrorCapturedEvent, "the event was last recorded in a capture");
  // Work after a launch on another stream, unordered with it, races with
  // the graph's nodes.
  ASSERT_EQ(api().cudaGraphLaunch(exec, s1), cudaSuccess);
  refused(
      [&] {
        return api().cudaMemcpyAsync(c, src, bytes, cudaMemcpyDeviceToDevice,
                                     s2);
      },
      cudaErrorLaunchFailure, "in CUDA graph");
  EXPECT_EQ(api().cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(api().cudaGraphDestroy(graph), cudaSuccess);
  for (void *p : {src, a, b, c})
    api().cudaFree(p);
}

TEST_F(VirtualCudaGraph, RacesInsideAGraphAreFoundAtLaunch) {
  void *a;
  api().cudaMalloc(&a, 256);
  api().cudaMemset(a, 0, 256);
  // s2 joins, then s1 and s2 both write a with nothing between them; both
  // rejoin before the end, so the capture itself is valid.
  ASSERT_EQ(api().cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  api().cudaEventRecord(e1, s1);
  api().cudaStreamWaitEvent(s2, e1, 0);
  ASSERT_EQ(api().cudaMemsetAsync(a, 1, 256, s2), cudaSuccess);
  ASSERT_EQ(api().cudaMemsetAsync(a, 2, 256, s1), cudaSuccess);
  api().cudaEventRecord(e2, s2);
  api().cudaStreamWaitEvent(s1, e2, 0);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(api().cudaStreamEndCapture(s1, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(api().cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  refused([&] { return api().cudaGraphLaunch(exec, s1); },
          cudaErrorLaunchFailure, "race on allocation");
  api().cudaGraphExecDestroy(exec);
  api().cudaGraphDestroy(graph);
  api().cudaFree(a);
}

TEST_F(VirtualCudaGraph, CaptureRefusesWhatAGraphCannotHold) {
  void *a;
  api().cudaMalloc(&a, 256);
  api().cudaMemset(a, 0, 256);
  std::vector<char> host(256);
  auto begin = [&] {
    ASSERT_EQ(api().cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal),
              cudaSuccess);
  };
  // Waiting for the captured stream: its work is not scheduled.
  begin();
  refused([&] { return api().cudaStreamSynchronize(s1); },
          cudaErrorStreamCaptureUnsupported, "the stream is being captured");
  // Every later call in an invalidated capture fails.
  refused([&] { return api().cudaMemsetAsync(a, 1, 256, s1); },
          cudaErrorStreamCaptureInvalidated, "invalidated by an earlier error");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  // Calls CUDA calls unsafe during a capture (cudaStreamCaptureModeGlobal).
  begin();
  refused(
      [&] {
        void *p;
        return api().cudaMalloc(&p, 16);
      },
      cudaErrorStreamCaptureUnsupported, "cudaMalloc while stream");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  begin();
  refused([&] { return api().cudaDeviceSynchronize(); },
          cudaErrorStreamCaptureUnsupported, "cudaDeviceSynchronize while");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  // Pageable host memory.
  begin();
  refused(
      [&] {
        return api().cudaMemcpyAsync(a, host.data(), 256,
                                     cudaMemcpyHostToDevice, s1);
      },
      cudaErrorStreamCaptureUnsupported,
      "a graph copies no pageable host memory");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  // A dependency on work outside the capture.
  api().cudaMemsetAsync(a, 1, 256, s2);
  api().cudaEventRecord(e2, s2);
  begin();
  refused([&] { return api().cudaStreamWaitEvent(s1, e2, 0); },
          cudaErrorStreamCaptureIsolation,
          "the event was recorded outside the capture");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  // An event recorded in the capture cannot be queried.
  begin();
  api().cudaEventRecord(e1, s1);
  refused([&] { return api().cudaEventQuery(e1); }, cudaErrorCapturedEvent,
          "recorded in the capture under way");
  endInvalid(cudaErrorStreamCaptureInvalidated);
  // A stream that joined and did not rejoin.
  begin();
  api().cudaEventRecord(e1, s1);
  api().cudaStreamWaitEvent(s2, e1, 0);
  ASSERT_EQ(api().cudaMemsetAsync(a, 3, 256, s2), cudaSuccess);
  cudaGraph_t graph = nullptr;
  refused([&] { return api().cudaStreamEndCapture(s1, &graph); },
          cudaErrorStreamCaptureUnjoined,
          "its last operation (cudaMemsetAsync) does not join back");
  EXPECT_EQ(graph, nullptr);
  // The legacy stream waits for blocking streams: not for one being
  // captured.
  cudaStream_t blocking;
  api().cudaStreamCreate(&blocking);
  ASSERT_EQ(api().cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  refused([&] { return api().cudaMemsetAsync(a, 4, 256, nullptr); },
          cudaErrorStreamCaptureImplicit,
          "the legacy stream would wait for the capture");
  testing::internal::CaptureStderr();
  EXPECT_EQ(api().cudaStreamEndCapture(blocking, &graph),
            cudaErrorStreamCaptureInvalidated);
  testing::internal::GetCapturedStderr();
  api().cudaGetLastError();
  api().cudaStreamDestroy(blocking);
  // Nothing refused ran: a still holds its zeros.
  api().cudaDeviceSynchronize();
  EXPECT_EQ(api().cudaMemcpy(host.data(), a, 256, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(host, std::vector<char>(256, 1)) << "the memset on s2 ran";
  api().cudaFree(a);
}

} // namespace
