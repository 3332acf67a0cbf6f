//===- AttentionAvx512.h - Causal attention in one pass per head -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The AVX-512 path of causal attention (AttentionAvx512.cpp), private to
// the CPU kernels. Each entry returns false, computing nothing, where the
// CPU lacks AVX-512 or the head width is not 16, 32, 64 or 128: the caller
// then takes the batched GEMM path.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CPU_ATTENTIONAVX512_H
#define GPTC_LIB_RUNTIME_CPU_ATTENTIONAVX512_H

#include <cstdint>

namespace gptc::cpu {

/// Whether this CPU runs the AVX-512 kernels.
bool attentionAvx512Available();
/// Whether they take heads of width / heads elements on this CPU.
bool attentionAvx512Fits(int64_t width, int64_t heads);

/// q, k, v, out: [B, T, C], C = heads x D.
bool causalAttentionAvx512(const float *q, const float *k, const float *v,
                           int64_t batch, int64_t seq, int64_t width,
                           int64_t heads, float *out);
bool causalAttentionGradAvx512(const float *q, const float *k, const float *v,
                               const float *dout, int64_t batch, int64_t seq,
                               int64_t width, int64_t heads, float *dq,
                               float *dk, float *dv);

} // namespace gptc::cpu

#endif // GPTC_LIB_RUNTIME_CPU_ATTENTIONAVX512_H
