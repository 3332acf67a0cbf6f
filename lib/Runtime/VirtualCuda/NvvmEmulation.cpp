//===- NvvmEmulation.cpp - Generated GPU kernels run on the CPU -----------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The C functions that `gptc-gpu-emulate-on-host` turns NVVM's operations
// and the kernel launches into, over the fibers of CudaEmulation.h, and
// libdevice's math functions over the C library's. Built as
// libGptcNvvmEmulation.so for mlir-runner's -shared-libs: the lit suite
// runs the CUDA pipeline's kernels, warp shuffles and block barriers
// included, without a GPU (test/Target/CUDA/emulate-kernels.test).
//
// An error (a launch that cannot run, a deadlock, a shuffle by a lane its
// member mask leaves out) is printed and aborts: the caller is JIT-compiled
// code that no exception may cross.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace {

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "gptc NVVM emulation: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

/// What a shuffle reads from a lane that is not there or has exited: a
/// NaN as a float, so that the mistake shows in the results.
constexpr uint32_t kGarbage = 0x7fbadbadu;

} // namespace

extern "C" {

int32_t gptc_emu_sreg(int32_t which) {
  using namespace gptc::emu;
  switch (which) {
  case 0:
    return static_cast<int32_t>(threadIndex().x);
  case 1:
    return static_cast<int32_t>(threadIndex().y);
  case 2:
    return static_cast<int32_t>(threadIndex().z);
  case 3:
    return static_cast<int32_t>(blockDimension().x);
  case 4:
    return static_cast<int32_t>(blockDimension().y);
  case 5:
    return static_cast<int32_t>(blockDimension().z);
  case 6:
    return static_cast<int32_t>(blockIndex().x);
  case 7:
    return static_cast<int32_t>(blockIndex().y);
  case 8:
    return static_cast<int32_t>(blockIndex().z);
  case 9:
    return static_cast<int32_t>(gridDimension().x);
  case 10:
    return static_cast<int32_t>(gridDimension().y);
  case 11:
    return static_cast<int32_t>(gridDimension().z);
  case 12:
    return static_cast<int32_t>(laneId());
  case 13:
    return 32;
  default:
    fail("unknown special register");
  }
}

void gptc_emu_barrier0() { gptc::emu::syncThreads(); }

/// shfl.sync.{bfly,up,down,idx}.b32 as PTX's ISA defines it: the source
/// lane from the offset, the clamp value and the segment mask; a source
/// lane out of range reads the lane's own value and clears the validity
/// (bit 32 of the result).
int64_t gptc_emu_shfl(int32_t kind, int32_t mask, int32_t value, int32_t offset,
                      int32_t maskAndClamp) {
  using namespace gptc::emu;
  unsigned lane = laneId();
  if (!((static_cast<uint32_t>(mask) >> lane) & 1u))
    fail("shfl.sync by a lane its member mask leaves out");
  unsigned b = static_cast<unsigned>(offset) & 31u;
  unsigned c = static_cast<unsigned>(maskAndClamp) & 31u;
  unsigned segment = (static_cast<unsigned>(maskAndClamp) >> 8) & 31u;
  int maxLane = static_cast<int>((lane & segment) | (c & ~segment));
  int minLane = static_cast<int>(lane & segment);
  int j = 0;
  bool valid = false;
  switch (kind) {
  case 0: // bfly
    j = static_cast<int>(lane ^ b);
    valid = j <= maxLane;
    break;
  case 1: // up
    j = static_cast<int>(lane) - static_cast<int>(b);
    valid = j >= maxLane;
    break;
  case 2: // down
    j = static_cast<int>(lane + b);
    valid = j <= maxLane;
    break;
  case 3: // idx
    j = minLane | static_cast<int>(b & ~segment);
    valid = j <= maxLane;
    break;
  default:
    fail("unknown shfl.sync mode");
  }
  if (!valid)
    j = static_cast<int>(lane);
  uint32_t *mine = laneScratch(lane);
  mine[0] = static_cast<uint32_t>(value);
  warpBarrier("shfl.sync");
  uint32_t bits = kGarbage;
  if (j >= 0 && laneActive(static_cast<unsigned>(j)))
    bits = laneScratch(static_cast<unsigned>(j))[0];
  warpBarrier("shfl.sync");
  return static_cast<int64_t>(bits) | (static_cast<int64_t>(valid) << 32);
}

/// Runs `thunk(params)` as every thread of the grid. `synchronizes`:
/// whether the kernel may reach a barrier or a shuffle; a kernel that
/// cannot runs its threads as plain calls, without fibers.
void gptc_emu_launch(void (*thunk)(void **), int64_t gx, int64_t gy, int64_t gz,
                     int64_t bx, int64_t by, int64_t bz, void **params,
                     int32_t synchronizes) {
  auto dim = [](int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 31) - 1)
      fail("launch dimension out of range");
    return static_cast<unsigned>(v);
  };
  try {
    gptc::emu::launch(
        dim3(dim(gx), dim(gy), dim(gz)), dim3(dim(bx), dim(by), dim(bz)),
        [&] { thunk(params); }, synchronizes == 0);
  } catch (const std::exception &e) {
    fail(e.what());
  }
}

// Test data for kernels run under mlir-runner (the suite's
// emulate_model.py): buffers filled from a seed, results appended to a
// file, both by address, so that two lowerings of one kernel see the same
// inputs and their results compare outside.

/// Fills `count` elements at `address` from `seed`: kind 0 f32, 1 bf16,
/// 2 f16 (uniform in [-1, 1)), 3 i32, 4 i64 (uniform in [0, 8): valid as
/// a token, a label or a step), 5 f64 (as f32).
void gptc_emu_fill(int64_t address, int64_t count, int32_t kind, int64_t seed) {
  uint64_t state = static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&state] { // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto uniform = [&next] {
    return static_cast<float>(next() >> 40) / static_cast<float>(1 << 23) -
           1.0f;
  };
  char *p = reinterpret_cast<char *>(address);
  for (int64_t i = 0; i < count; ++i) {
    switch (kind) {
    case 0:
      reinterpret_cast<float *>(p)[i] = uniform();
      break;
    case 1:
      reinterpret_cast<uint16_t *>(p)[i] = gptc::emu::floatToBf16(uniform());
      break;
    case 2:
      reinterpret_cast<uint16_t *>(p)[i] = gptc::emu::floatToHalf(uniform());
      break;
    case 3:
      reinterpret_cast<int32_t *>(p)[i] = static_cast<int32_t>(next() % 8);
      break;
    case 4:
      reinterpret_cast<int64_t *>(p)[i] = static_cast<int64_t>(next() % 8);
      break;
    case 5:
      reinterpret_cast<double *>(p)[i] = uniform();
      break;
    default:
      fail("gptc_emu_fill: unknown element kind");
    }
  }
}

/// Appends to the file GPTC_EMU_DUMP names every `stride`th of the
/// `count` elements of `elementBytes` bytes at `address` (a sample of a
/// large result; 1: all of them).
void gptc_emu_dump(int64_t address, int64_t count, int64_t elementBytes,
                   int64_t stride) {
  const char *path = std::getenv("GPTC_EMU_DUMP");
  if (!path)
    fail("gptc_emu_dump: GPTC_EMU_DUMP names no file");
  if (count < 0 || elementBytes <= 0 || stride <= 0)
    fail("gptc_emu_dump: invalid sizes");
  std::FILE *f = std::fopen(path, "ab");
  if (!f)
    fail("gptc_emu_dump: cannot open GPTC_EMU_DUMP's file");
  const char *p = reinterpret_cast<const char *>(address);
  size_t n = static_cast<size_t>(elementBytes);
  for (int64_t i = 0; i < count; i += stride)
    if (std::fwrite(p + i * elementBytes, 1, n, f) != n)
      fail("gptc_emu_dump: short write");
  std::fclose(f);
}

// libdevice's functions the generated kernels call, as the C library
// computes them (libdevice's are within 2 ulp of these; the suite's
// tolerances are far wider).
float __nv_expf(float x) { return std::exp(x); }
double __nv_exp(double x) { return std::exp(x); }
float __nv_exp2f(float x) { return std::exp2(x); }
float __nv_expm1f(float x) { return std::expm1(x); }
float __nv_logf(float x) { return std::log(x); }
double __nv_log(double x) { return std::log(x); }
float __nv_log2f(float x) { return std::log2(x); }
float __nv_log1pf(float x) { return std::log1p(x); }
float __nv_sqrtf(float x) { return std::sqrt(x); }
double __nv_sqrt(double x) { return std::sqrt(x); }
float __nv_rsqrtf(float x) { return 1.0f / std::sqrt(x); }
double __nv_rsqrt(double x) { return 1.0 / std::sqrt(x); }
float __nv_powf(float x, float y) { return std::pow(x, y); }
double __nv_pow(double x, double y) { return std::pow(x, y); }
float __nv_tanhf(float x) { return std::tanh(x); }
double __nv_tanh(double x) { return std::tanh(x); }
float __nv_erff(float x) { return std::erf(x); }
double __nv_erf(double x) { return std::erf(x); }
float __nv_fabsf(float x) { return std::fabs(x); }
double __nv_fabs(double x) { return std::fabs(x); }
float __nv_floorf(float x) { return std::floor(x); }
float __nv_ceilf(float x) { return std::ceil(x); }
float __nv_fmaxf(float x, float y) { return std::fmax(x, y); }
float __nv_fminf(float x, float y) { return std::fmin(x, y); }
float __nv_sinf(float x) { return std::sin(x); }
float __nv_cosf(float x) { return std::cos(x); }
double __nv_exp2(double x) { return std::exp2(x); }
double __nv_expm1(double x) { return std::expm1(x); }
double __nv_log2(double x) { return std::log2(x); }
double __nv_log1p(double x) { return std::log1p(x); }
double __nv_floor(double x) { return std::floor(x); }
double __nv_ceil(double x) { return std::ceil(x); }
double __nv_fmax(double x, double y) { return std::fmax(x, y); }
double __nv_fmin(double x, double y) { return std::fmin(x, y); }
double __nv_sin(double x) { return std::sin(x); }
double __nv_cos(double x) { return std::cos(x); }

} // extern "C"
