//===- ProcessMemory.cpp - Resident memory of the process -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/ProcessMemory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif

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

int64_t runtime::peakResidentBytes() { return statusBytes("VmHWM:"); }

int64_t runtime::residentBytes() { return statusBytes("VmRSS:"); }

bool runtime::resetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

void runtime::returnFreeHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}
