//===- CudaEmulation.h - CUDA kernels run on the CPU ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Enough of CUDA's device language, in host C++, to run the runtime's
// hand-written kernels (lib/Runtime/CUDA/DeviceKernels.cuh) on the CPU, so
// that the suite checks what they compute on a machine without a GPU.
// Include this header, define GPTC_CUDA_EMULATION, then the kernels.
//
// A block's threads are fibers on the calling thread. A fiber runs until it
// reaches a barrier: __syncthreads (the block's) or a warp-wide operation
// (__shfl_*_sync, __syncwarp, the tensor-core product mmaM16N8K16); the
// next fiber then runs. A barrier opens when every thread that has not
// exited has reached it; a block whose threads wait at barriers that can
// never open (divergent __syncthreads, a warp-wide operation some lanes do
// not join, lanes at different warp operations) is an error, not a hang.
// Thread 0 runs to its first barrier before thread 1 starts, so a missing
// barrier between a write to shared memory and another thread's read of it
// shows up as a wrong result. Blocks run one after another, so a
// __shared__ variable (emulated as a function-static one) is each block's
// own while it runs. Floating-point arithmetic is the CPU's IEEE float,
// exactly what CUDA's float operations round to (no fast-math).
//
// The tensor-core product follows the fragment layouts PTX gives for
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: the emulation gathers
// the warp's fragments into the 16 x 16 and 16 x 8 operands, multiplies in
// float (the 16-bit products are exact) and hands each lane its four
// accumulators.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_UNITTESTS_CUDAEMULATION_H
#define GPTC_UNITTESTS_CUDAEMULATION_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
};

namespace gptc::emu {

const uint3 &threadIndex();
const uint3 &blockIndex();
const dim3 &blockDimension();
const dim3 &gridDimension();
/// The calling thread's lane in its warp.
unsigned laneId();

/// The block's barrier (__syncthreads).
void syncThreads();
/// A barrier of the calling thread's warp; `what` names the operation (the
/// warp's lanes must all be at the same one).
void warpBarrier(const char *what);
/// 16 words of scratch for `lane` of the calling thread's warp, for
/// warp-wide operations to exchange values between two warpBarriers.
uint32_t *laneScratch(unsigned lane);
/// Whether `lane` of the calling thread's warp is a thread of the block
/// that has not exited.
bool laneActive(unsigned lane);

/// Runs `body` as every thread of every block of `grid` x `block`; throws
/// std::runtime_error for a launch that cannot run (too many threads) or a
/// block whose threads deadlock. With `independent`, the caller promises
/// that no thread synchronizes (no barrier, no warp-wide operation): the
/// threads then run one after another as plain calls, without fibers
/// (much faster), and one that reaches a barrier aborts the process.
void launch(dim3 grid, dim3 block, const std::function<void()> &body,
            bool independent = false);

/// Launches `kernel(args...)` as <<<grid, block>>> would.
template <typename... Params, typename... Args>
void launchKernel(dim3 grid, dim3 block, void (*kernel)(Params...),
                  Args &&...args) {
  std::tuple<std::decay_t<Params>...> bound(std::forward<Args>(args)...);
  launch(grid, block, [&] { std::apply(kernel, bound); });
}

/// A value exchanged through the lanes' scratch: each lane publishes `v`
/// and reads lane `source(lane)`'s.
template <typename T, typename F>
T exchange(T v, F source, const char *what) {
  static_assert(sizeof(T) <= 16 * sizeof(uint32_t) &&
                    std::is_trivially_copyable_v<T>,
                "a shuffled value fits a lane's scratch");
  unsigned lane = laneId();
  std::memcpy(laneScratch(lane), &v, sizeof(T));
  warpBarrier(what);
  T r;
  std::memcpy(&r, laneScratch(source(lane)), sizeof(T));
  warpBarrier(what);
  return r;
}

/// D += A B for one warp's m16n8k16 fragments: `a` four registers of
/// A's packed 16-bit pairs, `b` two of B's, `d` four floats.
/// `toFloat` widens one 16-bit element.
void mmaM16N8K16(float d[4], const uint32_t a[4], const uint32_t b[2],
                 float (*toFloat)(uint16_t));

/// Round to nearest even (NaN stays NaN), and back: bf16 and IEEE half.
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

} // namespace gptc::emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define threadIdx (::gptc::emu::threadIndex())
#define blockIdx (::gptc::emu::blockIndex())
#define blockDim (::gptc::emu::blockDimension())
#define gridDim (::gptc::emu::gridDimension())

inline void __syncthreads() { gptc::emu::syncThreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  gptc::emu::warpBarrier("__syncwarp");
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int laneMask, int width = 32) {
  return gptc::emu::exchange(
      v,
      [&](unsigned lane) {
        unsigned other = lane ^ static_cast<unsigned>(laneMask);
        return (other / width == lane / width) ? other : lane;
      },
      "__shfl_xor_sync");
}
template <typename T>
T __shfl_sync(unsigned, T v, int srcLane, int width = 32) {
  return gptc::emu::exchange(
      v,
      [&](unsigned lane) {
        return lane / width * width + static_cast<unsigned>(srcLane) % width;
      },
      "__shfl_sync");
}
template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  return gptc::emu::exchange(
      v,
      [&](unsigned lane) {
        unsigned other = lane + delta;
        return (other / width == lane / width) ? other : lane;
      },
      "__shfl_down_sync");
}
/// The fibers of a block run one at a time: a read-modify-write is atomic.
inline float atomicAdd(float *p, float v) {
  float old = *p;
  *p = old + v;
  return old;
}
template <typename T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
inline T max(T a, T b) {
  return a < b ? b : a;
}

#endif // GPTC_UNITTESTS_CUDAEMULATION_H
