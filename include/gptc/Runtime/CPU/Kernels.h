//===- Kernels.h - CPU kernels of gptc's runtime ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One function per op family, for T = float and double (the latter for
// finite-difference checks). Shapes are passed flattened: `rows` x `cols`
// where the op works on the last dimension. GEMMs go through CBLAS
// (OpenBLAS). Kernels never allocate on the hot path except the attention
// kernels' per-row scratch, and they write every element of their outputs.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CPU_KERNELS_H
#define GPTC_RUNTIME_CPU_KERNELS_H

#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gptc::cpu {

/// A ZeRO bucket's blocks smaller than this travel packed around one MPI
/// call (Executor::runBlocksBucket); larger ones go in calls of their own.
/// The summary counts the packing buffer with this threshold.
inline constexpr int64_t kBucketPackBelowBytes = int64_t(1) << 18;

/// out[i, :] = table[ids[i], :]. Returns the index of the first id outside
/// [0, vocab), or -1. With `block` (vocabulary parallelism), the table holds
/// ids [offset, offset + vocab): others give zero rows.
template <typename T>
int64_t embedding(const int32_t *ids, int64_t n, const T *table, int64_t vocab,
                  int64_t width, T *out, bool block = false,
                  int64_t offset = 0);

/// dtable = 0; dtable[ids[i], :] += dout[i, :] (rows ids - offset of a
/// block).
template <typename T>
int64_t embeddingGrad(const int32_t *ids, int64_t n, const T *dout,
                      int64_t vocab, int64_t width, T *dtable,
                      bool block = false, int64_t offset = 0);

/// Vocabulary-parallel cross-entropy, per row r of `rows` x `vocab` logits
/// holding ids [offset, offset + vocab): max[r] (row maximum), sumExp[r] =
/// sum exp(l - max[r]), target[r] = l[label - offset] or 0.
template <typename T>
void rowMax(const T *x, int64_t rows, int64_t vocab, T *max);
/// `valid`: columns [0, valid) of the block are real ids (the rest padding).
template <typename T>
void vocabPartials(const T *logits, const T *max, const int32_t *labels,
                   int64_t rows, int64_t vocab, int64_t offset, int64_t valid,
                   T *sumExp, T *target);
template <typename T>
void vocabPartialsGrad(const T *logits, const T *max, const int32_t *labels,
                       int64_t rows, int64_t vocab, int64_t offset,
                       int64_t valid, const T *dSumExp, const T *dTarget,
                       T *dlogits);
/// Mean (or sum / normalizer) over kept rows of log sumExp + max - target;
/// returns the index of a row whose sum is not positive in `bad`, or -1.
template <typename T>
T vocabLoss(const T *max, const T *sumExp, const T *target,
            const int32_t *labels, int64_t rows, bool hasIgnore,
            int64_t ignoreIndex, double normalizer);
template <typename T>
void vocabLossGrad(const T *sumExp, const int32_t *labels, int64_t rows,
                   bool hasIgnore, int64_t ignoreIndex, double normalizer,
                   T dloss, T *dSumExp, T *dTarget);

/// out has `shape`; out[...] = index along `dim`.
void iota(int32_t *out, const std::vector<int64_t> &shape, int64_t dim);

/// y[M, N] = x[M, K] W[N, K]^T (+ b[N]).
template <typename T>
void linear(const T *x, const T *w, const T *b, int64_t m, int64_t n, int64_t k,
            T *y);

/// c[batch, M, N] = op(a) op(b) per batch; a is [M, K] ([K, M] transposed),
/// b is [K, N] ([N, K] transposed).
template <typename T>
void matmul(const T *a, const T *b, int64_t batch, int64_t m, int64_t n,
            int64_t k, bool transposeA, bool transposeB, T *c);

template <typename T>
void layerNorm(const T *x, const T *gamma, const T *beta, int64_t rows,
               int64_t cols, double eps, T *y);

template <typename T>
void layerNormGrad(const T *x, const T *gamma, const T *dy, int64_t rows,
                   int64_t cols, double eps, T *dx, T *dgamma, T *dbeta);

template <typename T>
void gelu(const T *x, int64_t n, T *y);
/// The float tanh the GELU kernels use (exposed for its accuracy test).
float tanhForGelu(float x);
/// The float exp the softmax and cross-entropy kernels use (likewise).
float expForSoftmax(float x);
template <typename T>
void geluGrad(const T *x, const T *dy, int64_t n, T *dx);

/// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (erf in float: the
/// rational approximation the generated kernels compute), and its gradient
/// dy (0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)).
template <typename T>
void geluExact(const T *x, int64_t n, T *y);
template <typename T>
void geluExactGrad(const T *x, const T *dy, int64_t n, T *dx);

template <typename T>
void softmax(const T *x, int64_t rows, int64_t cols, T *y);
template <typename T>
void softmaxGrad(const T *y, const T *dy, int64_t rows, int64_t cols, T *dx);

template <typename T>
void add(const T *a, const T *b, int64_t n, T *y);

/// The functions of gptc.unary and gptc.binary, parsed from their IR names
/// (the artifact's ElementwiseParams.fn); nullopt for an unknown name.
enum class UnaryFunction {
  Neg,
  Sqrt,
  Exp,
  Log,
  Tanh,
  Erf,
  Reciprocal,
  Relu,
  Sigmoid,
  Abs,
  Step,
  Sign
};
/// UnlessNan: b where a is not NaN, else 0.
enum class BinaryFunction { Sub, Mul, Div, Pow, UnlessNan };
/// The artifact's function (program.proto), or nullopt for one unknown.
std::optional<UnaryFunction> unaryFunction(program::UnaryFunction f);
std::optional<BinaryFunction> binaryFunction(program::BinaryFunction f);

template <typename T>
void unary(UnaryFunction fn, const T *x, int64_t n, T *y);
template <typename T>
void binary(BinaryFunction fn, const T *a, const T *b, int64_t n, T *y);

/// q, k, v, out: [B, T, C] with C = heads x D.
template <typename T>
void causalAttention(const T *q, const T *k, const T *v, int64_t batch,
                     int64_t seq, int64_t width, int64_t heads, T *out);
template <typename T>
void causalAttentionGrad(const T *q, const T *k, const T *v, const T *dout,
                         int64_t batch, int64_t seq, int64_t width,
                         int64_t heads, T *dq, T *dk, T *dv);
/// Attention from some of the sequence's positions (context parallelism):
/// q, out: [B, Tq, C]; k, v: [B, Tk, C] in sequence order; query row i
/// attends keys [0, pos[i]] (every pos[i] in [0, Tk)).
template <typename T>
void positionedAttention(const T *q, const T *k, const T *v, const int32_t *pos,
                         int64_t batch, int64_t seqQ, int64_t seqK,
                         int64_t width, int64_t heads, T *out);
template <typename T>
void positionedAttentionGrad(const T *q, const T *k, const T *v, const T *dout,
                             const int32_t *pos, int64_t batch, int64_t seqQ,
                             int64_t seqK, int64_t width, int64_t heads, T *dq,
                             T *dk, T *dv);
/// One step of ring attention: q, out: [B, Tq, C] at positions qpos; k, v:
/// [B, Tk, C] at ascending positions kpos; query row i attends the keys at
/// positions <= qpos[i]. out is normalized over the block; lse [B, Tq, H]
/// is each row's log-sum-exp of its scaled scores (-inf, with a zero row
/// of out, where it sees no key).
template <typename T>
void blockAttention(const T *q, const T *k, const T *v, const int32_t *qpos,
                    const int32_t *kpos, int64_t batch, int64_t seqQ,
                    int64_t seqK, int64_t width, int64_t heads, T *out, T *lse);
/// Its gradients from those of out (dout) and lse (dlse).
template <typename T>
void blockAttentionGrad(const T *q, const T *k, const T *v, const int32_t *qpos,
                        const int32_t *kpos, const T *dout, const T *dlse,
                        int64_t batch, int64_t seqQ, int64_t seqK,
                        int64_t width, int64_t heads, T *dq, T *dk, T *dv);
/// The online softmax of two blocks' results: rows x width outputs, rows x
/// heads log-sum-exps.
template <typename T>
void attentionMerge(const T *a, const T *lseA, const T *b, const T *lseB,
                    int64_t rows, int64_t width, int64_t heads, T *out, T *lse);
template <typename T>
void attentionMergeGrad(const T *a, const T *lseA, const T *b, const T *lseB,
                        const T *dout, const T *dlse, int64_t rows,
                        int64_t width, int64_t heads, T *da, T *dlseA, T *db,
                        T *dlseB);
/// Half the float elements of scratch causal attention's gradient takes
/// (the forward takes at most as much): the memory prediction of
/// `gptc --emit=summary` counts them. Depends on the CPU (the AVX-512 path
/// keeps per-thread buffers, the GEMM path blocks of scores).
int64_t causalAttentionScratch(int64_t batch, int64_t seq, int64_t width,
                               int64_t heads);

/// Threads the kernels (OpenBLAS and the runtime's own) use; 0: every
/// core. One process per device sets its share of the node's cores.
void setNumThreads(int threads);
int numThreads();

/// Mean over the rows whose label is not `ignoreIndex` (when `hasIgnore`)
/// of -log softmax(logits[row])[label]; with `normalizer` > 0 the sum is
/// divided by it instead of the rows counted (< 0: the result is 0).
/// Returns the index of the first label outside [0, vocab) in `badLabel`,
/// or -1.
template <typename T>
T crossEntropy(const T *logits, const int32_t *labels, int64_t rows,
               int64_t vocab, bool hasIgnore, int64_t ignoreIndex,
               double normalizer, int64_t &badLabel);
template <typename T>
void crossEntropyGrad(const T *logits, const int32_t *labels, T dloss,
                      int64_t rows, int64_t vocab, bool hasIgnore,
                      int64_t ignoreIndex, double normalizer, T *dlogits);

/// Sums `x` (of `shape`) over `dims`.
template <typename T>
void reduceSum(const T *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &dims, T *y);
/// Repeats `x` along the new `dims` of `outShape`.
template <typename T>
void broadcast(const T *x, const std::vector<int64_t> &outShape,
               const std::vector<int64_t> &dims, T *y);

/// Element-size-generic data movement.
void transpose(const void *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm, int64_t elementSize, void *y);
/// Copies `pieces` slices of `x` along `axis`: piece i has extent
/// `sizes[i]` (split) or the reverse (concat, `gather` = true).
void sliceAlongAxis(const std::vector<const void *> &inputs,
                    const std::vector<void *> &outputs,
                    const std::vector<int64_t> &shape, int64_t axis,
                    const std::vector<int64_t> &sizes, int64_t elementSize,
                    bool concat);

/// sqrt(sum over tensors of sum(x^2)), accumulated in double.
template <typename T>
double globalNorm(const std::vector<std::pair<const T *, int64_t>> &tensors);

/// min(1, maxNorm / (norm + 1e-6)); 1 when maxNorm <= 0.
double clipScale(double norm, double maxNorm);

/// Dynamic loss scaling's state: the scale, the good steps since it last
/// changed, and the optimizer updates applied (skipped steps excluded).
struct LossScaleState {
  float scale;
  int32_t good, updates;
};

/// The state after a step (gptc.loss_scale_update): on `found` (an
/// overflow) the scale is multiplied by `backoff` and the step is not
/// counted; otherwise the update counts, and the `interval`-th good step
/// in a row multiplies the scale by `growth` (unless that overflows f32).
LossScaleState updateLossScale(LossScaleState state, bool found, double growth,
                               double backoff, int64_t interval);

/// Warmup then cosine (0), linear (1) or constant (2) decay.
double learningRate(int64_t step, double peak, double min, int64_t warmup,
                    int64_t total, int decay);

/// One AdamW step (PyTorch's order of operations); may run in place.
template <typename T>
void adamw(const T *p, const T *g, const T *m, const T *v, int64_t n, double lr,
           int64_t step, double scale, double beta1, double beta2, double eps,
           double weightDecay, T *newP, T *newM, T *newV);

/// One tensor of a multi-tensor AdamW step: its state, where the new state
/// goes (may be the same buffers) and its weight decay.
struct AdamWTensor {
  const float *p, *g, *m, *v;
  float *newP, *newM, *newV;
  int64_t n;
  double weightDecay;
};

/// AdamW over every tensor of `tensors` in one parallel region: the
/// concatenated elements are split into one contiguous range per thread,
/// so small tensors share a thread and a large one is split. The results
/// are those of adamw on each tensor.
void multiAdamW(const std::vector<AdamWTensor> &tensors, double lr,
                int64_t step, double scale, double beta1, double beta2,
                double eps, int64_t minParallel = int64_t(1) << 16);

} // namespace gptc::cpu

#endif // GPTC_RUNTIME_CPU_KERNELS_H
