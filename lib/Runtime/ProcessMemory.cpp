//===- ProcessMemory.cpp - Resident memory of the process -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/ProcessMemory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <dlfcn.h>

using namespace gptc;
using namespace gptc::runtime;

static int64_t statusBytes(const char *key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(status, line))
    if (line.compare(0, n, key) == 0)
      return std::atoll(line.c_str() + n) * 1024;
  return -1;
}

/// The peak before the last measurement excludeFromPeak kept out (the
/// high-water mark restarted after it); 0: none.
static int64_t carriedPeak = 0;

int64_t runtime::peakResidentBytes() {
  int64_t now = statusBytes("VmHWM:");
  return now < 0 ? now : std::max(now, carriedPeak);
}

int64_t runtime::residentBytes() { return statusBytes("VmRSS:"); }

static bool clearPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

bool runtime::resetPeakResident() {
  carriedPeak = 0;
  return clearPeak();
}

int64_t runtime::excludeFromPeak(const std::function<void()> &measure) {
  int64_t before = peakResidentBytes();
  measure();
  int64_t during = statusBytes("VmHWM:");
  // Its buffers are freed: given back, so that the mark restarts below.
  returnFreeHeap();
  if (before < 0 || during < 0 || !clearPeak())
    return 0;
  carriedPeak = before;
  return std::max<int64_t>(0, during - before);
}

namespace {
// tcmalloc's C interface, looked up in the process rather than linked: the
// runtime library also runs inside processes that keep glibc's malloc (the
// Python binding, the sanitizer build), and an allocator cannot be swapped
// in after the first allocation.
struct Tcmalloc {
  int (*getNumericProperty)(const char *, size_t *) = nullptr;
  void (*releaseFreeMemory)() = nullptr;
  Tcmalloc() {
    getNumericProperty = reinterpret_cast<int (*)(const char *, size_t *)>(
        dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));
    releaseFreeMemory = reinterpret_cast<void (*)()>(
        dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  }
  bool present() const { return getNumericProperty && releaseFreeMemory; }
};
const Tcmalloc &tcmalloc() {
  static const Tcmalloc instance;
  return instance;
}
} // namespace

void runtime::returnFreeHeap() {
  if (tcmalloc().present()) {
    tcmalloc().releaseFreeMemory();
    return;
  }
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

int64_t runtime::heapBytesInUse() {
  if (tcmalloc().present()) {
    size_t bytes = 0;
    if (tcmalloc().getNumericProperty("generic.current_allocated_bytes",
                                      &bytes))
      return static_cast<int64_t>(bytes);
    return -1;
  }
#ifdef __GLIBC__
  struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

const char *runtime::heapAllocatorName() {
  if (tcmalloc().present())
    return "tcmalloc";
#ifdef __GLIBC__
  return "glibc";
#else
  return "other";
#endif
}
