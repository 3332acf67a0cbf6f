//===- Gemm.h - Matrix products of gptc's CPU runtime ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every matrix product of the CPU runtime goes through here. float runs on
// oneDNN's matmul primitive, which detects the CPU's ISA itself (AVX-512,
// AVX512-BF16, AMX) and so needs no environment variable to be fast; a
// primitive is built once per problem shape and cached. double (used only
// by the finite-difference checks) runs on plain loops.
//
// A problem is a batch of `batch0 x batch1` products C = A B of M x K by
// K x N matrices, each operand a strided view: transposition and the
// per-head columns of a [B, T, C] activation are strides, not copies.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CPU_GEMM_H
#define GPTC_RUNTIME_CPU_GEMM_H

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::cpu {

/// Element strides of a batch of matrices: between batches (two batch
/// dimensions, outer first), rows and columns.
struct MatrixStrides {
  int64_t batch0 = 0, batch1 = 0, row = 0, col = 1;
};

/// C[b0, b1] (+)= A[b0, b1] B[b0, b1] (+ bias broadcast over rows).
struct GemmProblem {
  int64_t batch0 = 1, batch1 = 1;
  int64_t m = 0, n = 0, k = 0;
  MatrixStrides a, b, c;
  /// Adds the product to C instead of overwriting it.
  bool accumulate = false;
  /// A bias of N elements is added to every row of the product.
  bool bias = false;
  /// bf16 operands, bias and result (fp32 accumulation, the result
  /// rounded to nearest even); float otherwise.
  bool bf16 = false;
};

/// A bfloat16 number: the high half of a float's bits.
struct BFloat16 {
  uint16_t bits;
};

/// float -> bfloat16, round to nearest even (NaN stays NaN).
inline BFloat16 toBFloat16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return {static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}
inline float toFloat(BFloat16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

/// An IEEE half-precision number (fp16), by its bits.
struct Half {
  uint16_t bits;
};

/// float -> half, round to nearest even: magnitudes from 65520 on become
/// infinity (fp16's overflow), those below 2^-14 subnormals; NaN stays NaN.
inline Half toHalf(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) // NaN, kept quiet
    return {static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu))};
  if (u >= 0x477ff000u) // >= 65520: infinity
    return {static_cast<uint16_t>(sign | 0x7c00u)};
  if (u < 0x38800000u) {
    // Below 2^-14: a subnormal. Adding 0.5 lines the half's last place up
    // with the float's, and the float addition rounds to nearest even.
    float magnitude, half = 0.5f;
    __builtin_memcpy(&magnitude, &u, 4);
    magnitude += half;
    uint32_t r;
    __builtin_memcpy(&r, &magnitude, 4);
    return {static_cast<uint16_t>(sign | (r - 0x3f000000u))};
  }
  // Normal: rebias the exponent, round the 13 dropped bits to even.
  uint32_t odd = (u >> 13) & 1u;
  u += 0xc8000fffu + odd; // (15 - 127) << 23, plus the rounding bias
  return {static_cast<uint16_t>(sign | (u >> 13))};
}

inline float toFloat(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t em = h.bits & 0x7fffu, u;
  if (em >= 0x7c00u) {
    u = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x400u) {
    u = sign | ((em << 13) + (112u << 23));
  } else {
    float f = static_cast<float>(em) * 5.9604644775390625e-08f; // 2^-24
    __builtin_memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

void gemm(const GemmProblem &problem, const float *a, const float *b, float *c,
          const float *bias = nullptr);
void gemm(const GemmProblem &problem, const double *a, const double *b,
          double *c, const double *bias = nullptr);
/// bf16 products through oneDNN: AMX or AVX512-BF16 where the CPU has them;
/// where its oneDNN has no bf16 matmul (before AVX-512), gemmWidened.
void gemm(const GemmProblem &problem, const BFloat16 *a, const BFloat16 *b,
          BFloat16 *c, const BFloat16 *bias = nullptr);
/// A bf16 product in f32: the operands widened (exactly) to dense f32, the
/// product accumulated in f32 with the bias and, accumulating, C's old
/// value, then rounded to bf16 once, as oneDNN's bf16 matmul computes it.
void gemmWidened(const GemmProblem &problem, const BFloat16 *a,
                 const BFloat16 *b, BFloat16 *c,
                 const BFloat16 *bias = nullptr);

/// Row-major C[M, N] = beta C + op(A) op(B) with leading dimensions, as
/// BLAS's gemm (beta is 0 or 1).
template <typename T>
void gemm(bool transposeA, bool transposeB, int64_t m, int64_t n, int64_t k,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = transposeA ? MatrixStrides{0, 0, 1, lda} : MatrixStrides{0, 0, lda, 1};
  p.b = transposeB ? MatrixStrides{0, 0, 1, ldb} : MatrixStrides{0, 0, ldb, 1};
  p.c = MatrixStrides{0, 0, ldc, 1};
  p.accumulate = beta != T(0);
  gemm(p, a, b, c);
}

/// The oneDNN implementation that runs `problem` (float), e.g.
/// "brg:avx512_core"; builds its primitive if needed.
/// The problem linear() runs: y[m, n] = x[m, k] W[n, k]^T (+ b).
GemmProblem linearProblem(int64_t m, int64_t n, int64_t k, bool bias);
/// The problem matmul() runs: `batch` products of [m, k] by [k, n], either
/// operand transposed.
GemmProblem matmulProblem(int64_t batch, int64_t m, int64_t n, int64_t k,
                          bool transposeA, bool transposeB);

/// The heap memory oneDNN keeps for the primitives of `problems` (each
/// distinct problem built once, as the runtime builds them on first use;
/// those built before in this process add nothing), measured while
/// building them: what `gptc --emit=summary` counts as the GEMM library's
/// state.
int64_t gemmPrimitiveBytes(const std::vector<GemmProblem> &problems);

std::string gemmImplementation(const GemmProblem &problem);

/// The number of oneDNN primitives built so far (one per distinct shape).
int64_t gemmPrimitivesBuilt();

} // namespace gptc::cpu

#endif // GPTC_RUNTIME_CPU_GEMM_H
