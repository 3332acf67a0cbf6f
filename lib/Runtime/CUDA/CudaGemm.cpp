//===- CudaGemm.cpp - GEMMs of a CUDA function through cuBLASLt -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A function's GEMMs: cuBLASLt matrix layouts, the epilogue, the
// algorithm chosen once per GEMM (CudaRunner.h says how the backend's files
// divide).
//
//===----------------------------------------------------------------------===//

#include "CudaRunner.h"

using namespace gptc;
using namespace gptc::runtime;
using namespace gptc::runtime::cudart;

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
