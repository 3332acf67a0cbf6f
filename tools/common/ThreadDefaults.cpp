//===- ThreadDefaults.cpp - How the OpenMP pool waits -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Compiled into gptc's executables (not a library: it must run in every one
// of them, and nothing calls it).
//
// GNU OpenMP's idle threads spin for about 300,000 iterations before they
// sleep, on the bet that the next parallel loop comes soon and that every
// thread has a core of its own. On a machine another process also loads
// that bet fails: the spinning threads take the cores the thread they wait
// for needs, and mid-4x256's steps took 3.6-4x as long as on an idle
// machine, where the fair share is 2x (docs/performance.md, 2026-12-06).
// gptc bounds the spin (GOMP_SPINCOUNT) unless the user chose a policy
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set, which then decide).
//
// libgomp reads its environment once, in its own constructor, before any
// of the executable's code runs, and exports no way to change it later
// (an entry of .preinit_array runs earlier, but before the C library has
// its environment, which it then resets). So the executable, on its first
// start without a policy, sets the variable and executes itself again
// (the same file, arguments and open files): once, about as long
// as the executable takes to load; where that fails it goes on with
// libgomp's default. An executable whose commands do not all run the pool
// (gptc: only train, sample and calibrate do) says which do by defining
// gptcRunsThreadPool.
//
//===----------------------------------------------------------------------===//

#include <cstdlib>
#include <unistd.h>

/// Defined by an executable some of whose commands never run the thread
/// pool (they need not pay for the second start): whether this one does.
extern "C" __attribute__((weak)) bool gptcRunsThreadPool(int argc, char **argv);

namespace {
/// Spin iterations before an idle OpenMP thread sleeps: well under a
/// scheduler's time slice (libgomp's own 300,000 spin longer than one),
/// and enough to catch the next of a small model's back-to-back parallel
/// loops (1,000 cost tiny 12-19% on an idle machine; passive waiting
/// 40%). Measured against 300,000, 10,000, 3,000, 1,000 and passive
/// waiting (docs/performance.md, 2026-12-06).
constexpr const char *kSpinCount = "30000";

// glibc passes a constructor in .init_array the program's arguments.
void boundOpenMpSpinning(int argc, char **argv, char **) {
  if (argc < 1 || !argv || !argv[0])
    return;
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT"))
    return;
  if (gptcRunsThreadPool && !gptcRunsThreadPool(argc, argv))
    return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, /*overwrite=*/0) != 0)
    return;
  // The executable's own path, not /proc/self/exe, whose name the process
  // would take (ps, top and pkill would see "exe").
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    ::execv(self, argv);
  }
  // Not executed again (no /proc): libgomp keeps its own default, and the
  // variable, which it never read, must not say otherwise.
  unsetenv("GOMP_SPINCOUNT");
}
} // namespace

__attribute__((section(".init_array"),
               used)) static void (*const gptcBoundOpenMpSpinning)(int, char **,
                                                                   char **) =
    boundOpenMpSpinning;
