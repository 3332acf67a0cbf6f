//===- CudaEmulation.cpp - The runtime's CUDA kernels run on the CPU -----===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Fibers (ucontext) for a block's threads and the scheduler that runs
// them from barrier to barrier; see CudaEmulation.h.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"
// The built-in variables are this file's own names.
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim

#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GPTC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPTC_EMU_ASAN 1
#endif
#endif
#ifdef GPTC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

// Switching fibers: glibc's swapcontext saves and restores the signal mask
// with a system call at every switch, which was most of an emulated
// training step's time. On x86-64 (outside AddressSanitizer, which knows
// swapcontext) a switch saves the callee-saved registers and the
// floating-point control words on the fiber's stack and moves the stack
// pointer: the System V ABI's whole contract across a call.
#if defined(__x86_64__) && !defined(GPTC_EMU_ASAN)
#define GPTC_EMU_FAST_SWITCH 1
extern "C" void gptc_emu_switch(void **save, void *to);
extern "C" void gptc_emu_fiber_start();
asm(R"(
  .text
  .p2align 4
  .globl gptc_emu_switch
  .hidden gptc_emu_switch
  .type gptc_emu_switch,@function
gptc_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gptc_emu_switch, .-gptc_emu_switch

  .p2align 4
  .globl gptc_emu_fiber_start
  .hidden gptc_emu_fiber_start
  .type gptc_emu_fiber_start,@function
gptc_emu_fiber_start:
  callq *%r12
  ud2
  .size gptc_emu_fiber_start, .-gptc_emu_fiber_start
)");
#endif

namespace gptc::emu {
namespace {

/// A suspended fiber or scheduler.
#ifdef GPTC_EMU_FAST_SWITCH
struct Context {
  void *sp = nullptr;
};
void switchContext(Context &save, Context &to) {
  gptc_emu_switch(&save.sp, to.sp);
}
/// `c` starts `fn` on `stack` when first switched to.
void prepareContext(Context &c, char *stack, size_t bytes, void (*fn)()) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  auto *slots = reinterpret_cast<uint64_t *>(top - 64);
  // mxcsr and the x87 control word, r15, r14, r13, r12 (the entry), rbx,
  // rbp, then the return address: gptc_emu_fiber_start calls r12 with the
  // stack aligned as a call expects.
  slots[0] = 0x1f80u | (uint64_t(0x037fu) << 32);
  for (int i = 1; i < 7; ++i)
    slots[i] = 0;
  slots[4] = reinterpret_cast<uint64_t>(fn);
  slots[7] = reinterpret_cast<uint64_t>(&gptc_emu_fiber_start);
  c.sp = slots;
}
#else
struct Context {
  ucontext_t context;
};
void switchContext(Context &save, Context &to) {
  swapcontext(&save.context, &to.context);
}
void prepareContext(Context &c, char *stack, size_t bytes, void (*fn)()) {
  getcontext(&c.context);
  c.context.uc_stack.ss_sp = stack;
  c.context.uc_stack.ss_size = bytes;
  c.context.uc_link = nullptr;
  makecontext(&c.context, fn, 0);
}
#endif

constexpr unsigned kWarp = 32;
constexpr size_t kStackBytes = 256 * 1024;

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
  Context context;
  char *stack = nullptr; // the block's, kept across blocks
  uint3 index;
  unsigned lane = 0, warp = 0;
  State state = State::Runnable;
  const char *site = nullptr;
  void *fakeStack = nullptr; // AddressSanitizer's, while switched out
};

struct Block {
  const std::function<void()> *body = nullptr;
  uint3 blockIdx;
  dim3 blockDim, gridDim;
  std::vector<Fiber> fibers;
  /// The fibers' stacks (a pool kept across launches).
  std::vector<char *> stacks;
  std::vector<uint32_t> scratch; // 16 words per thread
  Context scheduler;
  const void *schedulerStack = nullptr;
  size_t schedulerStackBytes = 0;
};

Block *active = nullptr;
Fiber *current = nullptr;

/// AddressSanitizer must be told of every switch between stacks.
void startSwitch(void **fakeStack, const void *bottom, size_t bytes) {
#ifdef GPTC_EMU_ASAN
  __sanitizer_start_switch_fiber(fakeStack, bottom, bytes);
#else
  (void)fakeStack, (void)bottom, (void)bytes;
#endif
}
void finishSwitch(void *fakeStack, const void **bottom, size_t *bytes) {
#ifdef GPTC_EMU_ASAN
  __sanitizer_finish_switch_fiber(fakeStack, bottom, bytes);
#else
  (void)fakeStack, (void)bottom, (void)bytes;
#endif
}

/// From the running fiber back to the scheduler, waiting in `state`.
void suspend(State state, const char *site) {
  Fiber *self = current;
  if (!self->stack) {
    // A launch declared independent: no scheduler to return to.
    std::fprintf(stderr,
                 "emulated kernel: %s in a launch declared without "
                 "barriers\n",
                 site);
    std::abort();
  }
  self->state = state;
  self->site = site;
  startSwitch(&self->fakeStack, active->schedulerStack,
              active->schedulerStackBytes);
  switchContext(self->context, active->scheduler);
  finishSwitch(self->fakeStack, nullptr, nullptr);
}

void entry() {
  finishSwitch(nullptr, &active->schedulerStack, &active->schedulerStackBytes);
  (*active->body)();
  current->state = State::Done;
  // The fiber ends: no fake stack to keep.
  startSwitch(nullptr, active->schedulerStack, active->schedulerStackBytes);
  Context finished;
  switchContext(finished, active->scheduler);
  std::abort(); // a finished fiber is never resumed
}

std::string describe(const Block &b) {
  std::string s;
  for (const Fiber &f : b.fibers) {
    s += "\n  thread (" + std::to_string(f.index.x) + "," +
         std::to_string(f.index.y) + "," + std::to_string(f.index.z) + "): ";
    switch (f.state) {
    case State::Runnable:
      s += "runnable";
      break;
    case State::AtBlockBarrier:
      s += "at __syncthreads";
      break;
    case State::AtWarpBarrier:
      s += std::string("at ") + f.site;
      break;
    case State::Done:
      s += "exited";
      break;
    }
  }
  return s;
}

/// Opens the barriers that every live participant has reached: a warp's
/// (all its lanes at the same warp operation) or else the block's.
/// Returns false when none can open (a deadlock).
bool release(Block &b) {
  bool opened = false;
  size_t n = b.fibers.size();
  for (size_t first = 0; first < n; first += kWarp) {
    size_t last = std::min(n, first + kWarp);
    bool anyAtWarp = false, allAtWarp = true;
    const char *site = nullptr;
    for (size_t i = first; i < last; ++i) {
      const Fiber &f = b.fibers[i];
      if (f.state == State::AtWarpBarrier) {
        anyAtWarp = true;
        if (site && std::strcmp(site, f.site) != 0)
          throw std::runtime_error(
              std::string("emulated kernel: the lanes of warp ") +
              std::to_string(first / kWarp) +
              " are at different warp-wide "
              "operations (" +
              site + ", " + f.site + ")" + describe(b));
        site = f.site;
      } else {
        allAtWarp = false;
      }
    }
    if (!anyAtWarp)
      continue;
    if (!allAtWarp)
      continue; // some lanes still at the block's barrier or exited
    for (size_t i = first; i < last; ++i)
      b.fibers[i].state = State::Runnable;
    opened = true;
  }
  if (opened)
    return true;
  bool anyAtBlock = false;
  for (const Fiber &f : b.fibers) {
    if (f.state == State::AtWarpBarrier)
      return false;
    anyAtBlock |= f.state == State::AtBlockBarrier;
  }
  if (!anyAtBlock)
    return false;
  for (Fiber &f : b.fibers)
    if (f.state == State::AtBlockBarrier)
      f.state = State::Runnable;
  return true;
}

void runBlock(Block &b) {
  size_t threads =
      static_cast<size_t>(b.blockDim.x) * b.blockDim.y * b.blockDim.z;
  b.fibers = std::vector<Fiber>(threads);
  b.scratch.assign(threads * 16, 0);
  // The stacks outlive the launch: allocating (and zeroing) 256 KiB a
  // thread at every launch was a training step's largest cost.
  static std::vector<std::unique_ptr<char[]>> pool;
  while (pool.size() < threads)
    pool.emplace_back(new char[kStackBytes]);
  if (b.stacks.size() != threads) {
    b.stacks.resize(threads);
    for (size_t t = 0; t < threads; ++t)
      b.stacks[t] = pool[t].get();
  }
  for (size_t t = 0; t < threads; ++t) {
    Fiber &f = b.fibers[t];
    f.index.x = static_cast<unsigned>(t % b.blockDim.x);
    f.index.y = static_cast<unsigned>(t / b.blockDim.x % b.blockDim.y);
    f.index.z = static_cast<unsigned>(t / b.blockDim.x / b.blockDim.y);
    f.lane = static_cast<unsigned>(t % kWarp);
    f.warp = static_cast<unsigned>(t / kWarp);
    f.stack = b.stacks[t];
    prepareContext(f.context, f.stack, kStackBytes, entry);
  }
  for (;;) {
    for (Fiber &f : b.fibers) {
      if (f.state != State::Runnable)
        continue;
      current = &f;
      void *fake = nullptr;
      startSwitch(&fake, f.stack, kStackBytes);
      switchContext(b.scheduler, f.context);
      finishSwitch(fake, nullptr, nullptr);
      current = nullptr;
    }
    bool done = true;
    for (const Fiber &f : b.fibers)
      done &= f.state == State::Done;
    if (done)
      return;
    if (!release(b)) {
      // Warp operations some lanes never reach, or barriers that cannot
      // open: report every thread's place.
      throw std::runtime_error(
          "emulated kernel deadlocked in block (" +
          std::to_string(b.blockIdx.x) + "," + std::to_string(b.blockIdx.y) +
          "," + std::to_string(b.blockIdx.z) + "):" + describe(b));
    }
  }
}

} // namespace

const uint3 &threadIndex() { return current->index; }
const uint3 &blockIndex() { return active->blockIdx; }
const dim3 &blockDimension() { return active->blockDim; }
const dim3 &gridDimension() { return active->gridDim; }
unsigned laneId() { return current->lane; }

void syncThreads() { suspend(State::AtBlockBarrier, "__syncthreads"); }
void warpBarrier(const char *what) { suspend(State::AtWarpBarrier, what); }

uint32_t *laneScratch(unsigned lane) {
  size_t thread = static_cast<size_t>(current->warp) * kWarp + lane;
  if (thread >= active->fibers.size())
    thread = current->warp * kWarp; // a lane past a partial warp's end
  return active->scratch.data() + thread * 16;
}

bool laneActive(unsigned lane) {
  size_t thread = static_cast<size_t>(current->warp) * kWarp + lane;
  return lane < kWarp && thread < active->fibers.size() &&
         active->fibers[thread].state != State::Done;
}

/// The threads of `b`'s block one after another, each a plain call.
static void runIndependentBlock(Block &b) {
  Fiber f;
  for (unsigned z = 0; z < b.blockDim.z; ++z)
    for (unsigned y = 0; y < b.blockDim.y; ++y)
      for (unsigned x = 0; x < b.blockDim.x; ++x) {
        f.index = {x, y, z};
        size_t t =
            (static_cast<size_t>(z) * b.blockDim.y + y) * b.blockDim.x + x;
        f.lane = static_cast<unsigned>(t % kWarp);
        f.warp = static_cast<unsigned>(t / kWarp);
        current = &f;
        (*b.body)();
      }
  current = nullptr;
}

void launch(dim3 grid, dim3 block, const std::function<void()> &body,
            bool independent) {
  if (active)
    throw std::runtime_error("emulated kernels do not launch kernels");
  size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0)
    throw std::runtime_error("emulated launch: invalid configuration (" +
                             std::to_string(threads) + " threads per block)");
  Block b;
  b.body = &body;
  b.blockDim = block;
  b.gridDim = grid;
  active = &b;
  try {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          b.blockIdx = {x, y, z};
          if (independent)
            runIndependentBlock(b);
          else
            runBlock(b);
        }
  } catch (...) {
    active = nullptr;
    throw;
  }
  active = nullptr;
}

void mmaM16N8K16(float d[4], const uint32_t a[4], const uint32_t b[2],
                 float (*toFloat)(uint16_t)) {
  unsigned lane = laneId();
  uint32_t *mine = laneScratch(lane);
  std::memcpy(mine, a, 4 * sizeof(uint32_t));
  std::memcpy(mine + 4, b, 2 * sizeof(uint32_t));
  warpBarrier("mma.sync.m16n8k16");
  // Element (row, k) of A: lane (row % 8) * 4 + (k % 8) / 2, register
  // (row >= 8) + 2 (k >= 8), half k % 2. Element (k, col) of B: lane
  // col * 4 + (k % 8) / 2, register k >= 8, half k % 2.
  auto half = [&](unsigned from, unsigned reg, unsigned k) {
    uint32_t word = laneScratch(from)[reg];
    return toFloat(static_cast<uint16_t>(k % 2 ? word >> 16 : word & 0xffff));
  };
  auto aAt = [&](unsigned row, unsigned k) {
    return half((row % 8) * 4 + (k % 8) / 2, (row >= 8) + 2 * (k >= 8), k);
  };
  auto bAt = [&](unsigned k, unsigned col) {
    return half(col * 4 + (k % 8) / 2, 4 + (k >= 8), k);
  };
  unsigned group = lane / 4, inGroup = lane % 4;
  float out[4];
  for (unsigned i = 0; i < 4; ++i) {
    unsigned row = group + 8 * (i / 2), col = inGroup * 2 + i % 2;
    float sum = d[i];
    for (unsigned k = 0; k < 16; ++k)
      sum += aAt(row, k) * bAt(k, col);
    out[i] = sum;
  }
  warpBarrier("mma.sync.m16n8k16");
  std::memcpy(d, out, sizeof(out));
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u);
  if (absx >= 0x477ff000u) // rounds to infinity (65520 and above)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) { // below the smallest normal half: subnormal
    float magnitude;
    std::memcpy(&magnitude, &absx, sizeof(magnitude));
    // Multiples of 2^-24, rounded to nearest even by the float addition.
    float scaled = magnitude * 16777216.0f; // 2^24
    float rounded = std::nearbyint(scaled);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  uint32_t mantissa = absx & 0x7fffffu;
  uint32_t exponent = (absx >> 23) - 127 + 15;
  uint32_t h = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
    ++h;
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu;
  float f;
  if (exponent == 0) {
    f = std::ldexp(static_cast<float>(mantissa), -24);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    bits |= sign;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  uint32_t bits = exponent == 31
                      ? sign | 0x7f800000u | (mantissa << 13)
                      : sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

} // namespace gptc::emu
