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
#include <functional>

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
/// Runs `measure` (a probe whose buffers are not the run's: --profile's
/// copy) with its memory kept out of peakResidentBytes: the peak before it
/// carries on, the high-water mark restarts after it. Returns the bytes it
/// raised the peak by (0 where it did not, or the system cannot say).
int64_t excludeFromPeak(const std::function<void()> &measure);
/// Gives the allocator's free heap back to the system (tcmalloc's
/// ReleaseFreeMemory where the process runs on it, else glibc's
/// malloc_trim), so that what a later phase adds to the resident memory
/// does not depend on what an earlier one freed.
void returnFreeHeap();
/// The bytes the allocator has handed out and not had back (tcmalloc's
/// generic.current_allocated_bytes, else glibc's mallinfo2), or -1.
int64_t heapBytesInUse();
/// "tcmalloc" where gptc's executables were linked with it (the default,
/// docs/Architecture.md), else "glibc" (or "other").
const char *heapAllocatorName();

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PROCESSMEMORY_H
