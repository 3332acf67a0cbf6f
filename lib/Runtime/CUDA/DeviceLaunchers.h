//===- DeviceLaunchers.h - The hand-written kernels' launchers -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// DeviceKernels.h's launchers, written once over a `launch(grid, block,
// kernel, args...)` functor: DeviceKernels.cu instantiates them with <<<>>>
// on a stream (the GPU), lib/Runtime/VirtualCuda/EmulatedKernels.cpp with
// the virtual device's emulated launches. Include after DeviceKernels.cuh.
// Each returns false for a type or size the kernels do not take (the
// caller's cudaErrorInvalidValue).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CUDA_DEVICELAUNCHERS_H
#define GPTC_LIB_RUNTIME_CUDA_DEVICELAUNCHERS_H

namespace gptc::cuda::device {

/// Attention operand types as DeviceKernelSet numbers them (AttentionType).
enum AttentionElement {
  kAttentionF32 = 0,
  kAttentionBf16 = 1,
  kAttentionF16 = 2
};

template <typename Launch>
bool attentionForwardWith(Launch &launch, int type, const void *q,
                          const void *k, const void *v, void *out,
                          int64_t batch, int64_t T, int64_t C, int64_t heads) {
  auto h = [](const void *p) { return static_cast<const uint16_t *>(p); };
  switch (type) {
  case kAttentionF32:
    return launchAttentionForward(
        launch, static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<float *>(out), batch, T, C,
        heads);
  case kAttentionBf16:
    return launchAttentionForwardTc<Bf16>(launch, h(q), h(k), h(v),
                                          static_cast<uint16_t *>(out), batch,
                                          T, C, heads);
  case kAttentionF16:
    return launchAttentionForwardTc<Half>(launch, h(q), h(k), h(v),
                                          static_cast<uint16_t *>(out), batch,
                                          T, C, heads);
  default:
    return false;
  }
}

template <typename Launch>
bool attentionBackwardWith(Launch &launch, int type, const void *q,
                           const void *k, const void *v, const void *dout,
                           void *dq, void *dk, void *dv, float *stats,
                           int64_t batch, int64_t T, int64_t C, int64_t heads) {
  auto h = [](const void *p) { return static_cast<const uint16_t *>(p); };
  auto m = [](void *p) { return static_cast<uint16_t *>(p); };
  switch (type) {
  case kAttentionF32:
    return launchAttentionBackward(
        launch, static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<const float *>(dout),
        static_cast<float *>(dq), static_cast<float *>(dk),
        static_cast<float *>(dv), stats, batch, T, C, heads);
  case kAttentionBf16:
    return launchAttentionBackwardTc<Bf16>(launch, h(q), h(k), h(v), h(dout),
                                           m(dq), m(dk), m(dv), stats, batch, T,
                                           C, heads);
  case kAttentionF16:
    return launchAttentionBackwardTc<Half>(launch, h(q), h(k), h(v), h(dout),
                                           m(dq), m(dk), m(dv), stats, batch, T,
                                           C, heads);
  default:
    return false;
  }
}

/// Calls `f` with the element traits of `dtype` as program.proto numbers
/// it (1 F32, 5 Bf16, 6 Half); false for another type.
template <typename F>
bool withElement(int dtype, F &&f) {
  switch (dtype) {
  case 1:
    f(F32());
    return true;
  case 5:
    f(Bf16());
    return true;
  case 6:
    f(Half());
    return true;
  default:
    return false;
  }
}

/// The bytes of one element of `dtype` (program.proto's numbers), 0 for a
/// type these kernels do not take.
inline int64_t elementBytes(int dtype) {
  switch (dtype) {
  case 1:
    return 4;
  case 2:
    return 8;
  case 5:
  case 6:
    return 2;
  default:
    return 0;
  }
}

template <typename Launch>
bool addInPlaceWith(Launch &launch, int dtype, void *y, const void *x,
                    int64_t n) {
  if (n <= 0)
    return elementBytes(dtype) != 0;
  dim3 grid(static_cast<unsigned>((n + 255) / 256)), block(256);
  if (dtype == 2) {
    launch(grid, block, addKernelF64, static_cast<double *>(y),
           static_cast<const double *>(x), n);
    return true;
  }
  return withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launch(grid, block, addKernel<E>, static_cast<ElementStorage<E> *>(y),
           static_cast<const ElementStorage<E> *>(x), n);
  });
}

template <typename Launch>
bool geluEpilogueWith(Launch &launch, int dtype, const void *pre, void *act,
                      int64_t n) {
  return withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchGeluEpilogue<E>(launch, static_cast<const ElementStorage<E> *>(pre),
                          static_cast<ElementStorage<E> *>(act), n);
  });
}

template <typename Launch>
bool dgeluEpilogueWith(Launch &launch, int dtype, const void *pre, void *d,
                       int64_t n) {
  return withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchDgeluEpilogue<E>(launch, static_cast<const ElementStorage<E> *>(pre),
                           static_cast<ElementStorage<E> *>(d), n);
  });
}

template <typename Launch>
bool biasGradEpilogueWith(Launch &launch, int dtype, const void *x,
                          int64_t rows, int64_t cols, void *db) {
  return withElement(dtype, [&](auto e) {
    using E = decltype(e);
    launchBiasGradEpilogue<E>(launch, static_cast<const ElementStorage<E> *>(x),
                              rows, cols, static_cast<ElementStorage<E> *>(db));
  });
}

} // namespace gptc::cuda::device

#endif // GPTC_LIB_RUNTIME_CUDA_DEVICELAUNCHERS_H
