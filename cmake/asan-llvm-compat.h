/*===- asan-llvm-compat.h - ASan with a prebuilt LLVM -----------*- C -*-===*
 *
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * Force-included in the sanitizer build (GPTC_SANITIZE). LLVM's headers
 * poison and unpoison BumpPtrAllocator slabs when the including code is
 * built with AddressSanitizer; Debian's libMLIR/libLLVM are not, and
 * allocate from the same slabs through their own (unpoisoning-free) copies
 * of that code, which ASan then reports as use-after-poison. Making the
 * manual poisoning calls no-ops in gptc's code keeps every other check.
 *===---------------------------------------------------------------------===*/
#ifndef GPTC_ASAN_LLVM_COMPAT_H
#define GPTC_ASAN_LLVM_COMPAT_H
#include <sanitizer/asan_interface.h>
#define __asan_poison_memory_region(p, size) ((void)(p), (void)(size))
#define __asan_unpoison_memory_region(p, size) ((void)(p), (void)(size))
#endif
