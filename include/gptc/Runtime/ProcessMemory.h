//===- ProcessMemory.h - Resident memory of the process ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `gptc train` reports as its peak memory (Linux's /proc/self/status).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PROCESSMEMORY_H
#define GPTC_RUNTIME_PROCESSMEMORY_H

#include <cstdint>

namespace gptc::runtime {

/// This process's peak resident memory in bytes (VmHWM: the high-water
/// mark since exec, compiler and runtime included), or -1 where the
/// system does not say.
int64_t peakResidentBytes();
/// This process's resident memory now (VmRSS), or -1.
int64_t residentBytes();
/// Restarts the peak (VmHWM) from the current resident memory (Linux's
/// /proc/self/clear_refs); false where the system does not allow it.
bool resetPeakResident();
/// Gives the C library's free heap back to the system (glibc's
/// malloc_trim), so that what a later phase adds to the resident memory
/// does not depend on what an earlier one freed.
void returnFreeHeap();

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PROCESSMEMORY_H
