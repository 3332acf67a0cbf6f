//===- Avx512.h - The runtime's AVX-512 kernels -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The AVX-512 kernels (Avx512.cpp), private to the CPU kernels. Each entry
// returns false, computing nothing, where the CPU lacks AVX-512 (or, for
// attention, the head width is not 16, 32, 64 or 128): the caller then
// takes its portable path.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CPU_AVX512_H
#define GPTC_LIB_RUNTIME_CPU_AVX512_H

#include <cstdint>

namespace gptc::cpu {

/// Whether this CPU runs the AVX-512 kernels.
bool avx512Available();

/// log(sum(exp(row))) of n > 0 floats (max-shifted, the runtime's exp).
bool logSumExpAvx512(const float *row, int64_t n, float &out);
/// out = exp(row - lse) * scale, n floats.
bool scaledSoftmaxAvx512(const float *row, int64_t n, float lse, float scale,
                         float *out);
/// Whether they take heads of width / heads elements on this CPU.
bool attentionAvx512Fits(int64_t width, int64_t heads);

/// Query rows the AVX-512 attention backward works on at a time: per
/// thread it keeps that many rows of probabilities and score gradients.
constexpr int64_t kAttentionBlockRows = 64;

/// q, k, v, out: [B, T, C], C = heads x D.
bool causalAttentionAvx512(const float *q, const float *k, const float *v,
                           int64_t batch, int64_t seq, int64_t width,
                           int64_t heads, float *out);
bool causalAttentionGradAvx512(const float *q, const float *k, const float *v,
                               const float *dout, int64_t batch, int64_t seq,
                               int64_t width, int64_t heads, float *dq,
                               float *dk, float *dv);
/// The same from some of the sequence's positions (context parallelism):
/// q, out [B, Tq, C]; k, v [B, Tk, C]; query row i attends keys [0,
/// pos[i]]. Rows of a backward block whose positions are consecutive (the
/// chunks gptc-context-parallel makes) skip the keys they do not see.
/// Ring attention's steps pass each row's last key index as pos (-1 where
/// it sees none: a zero row), take each row's log-sum-exp in `lse` and
/// give the backward its gradient in `dlse` (both [B, Tq, H]).
bool positionedAttentionAvx512(const float *q, const float *k, const float *v,
                               const int32_t *pos, int64_t batch, int64_t seqQ,
                               int64_t seqK, int64_t width, int64_t heads,
                               float *out, float *lse = nullptr);
bool positionedAttentionGradAvx512(const float *q, const float *k,
                                   const float *v, const float *dout,
                                   const int32_t *pos, int64_t batch,
                                   int64_t seqQ, int64_t seqK, int64_t width,
                                   int64_t heads, float *dq, float *dk,
                                   float *dv, const float *dlse = nullptr);

} // namespace gptc::cpu

#endif // GPTC_LIB_RUNTIME_CPU_AVX512_H
