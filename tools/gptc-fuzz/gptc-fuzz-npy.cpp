//===- gptc-fuzz-npy.cpp - Fuzzing the .npy reader --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A .npy file (gptc-run's inputs, reference checks) from untrusted bytes:
// read through a memory file, accepted or an error, never a crash or an
// allocation the file cannot fill.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = memfd_create("fuzz.npy", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    return 0;
  gptc::runtime::Tensor t;
  std::string error;
  bool ok =
      gptc::runtime::readNpy("/proc/self/fd/" + std::to_string(fd), t, error);
  if (ok && t.byteSize() > static_cast<int64_t>(size))
    __builtin_trap(); // more data than the file holds
  if (!ok && error.empty())
    __builtin_trap();
  return 0;
}
