//===- KernelLibrary.cpp - Generated kernels the runtime loads -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The bytes go into an anonymous memory file (memfd) that dlopen maps like
// any shared object: no file is left behind, and two processes (MPI ranks)
// never race on a path.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/KernelLibrary.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace gptc::runtime;

std::unique_ptr<KernelLibrary> KernelLibrary::load(const std::string &bytes,
                                                   std::string &error) {
  int fd = memfd_create("gptc-kernels", MFD_CLOEXEC);
  if (fd < 0) {
    error = std::string("cannot create the kernels' memory file: ") +
            std::strerror(errno);
    return nullptr;
  }
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) {
      error = std::string("cannot write the kernels' memory file: ") +
              std::strerror(errno);
      close(fd);
      return nullptr;
    }
    written += static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  if (!handle) {
    const char *why = dlerror();
    error = std::string("cannot load the program's kernels: ") +
            (why ? why : "unknown error");
    return nullptr;
  }
  return std::unique_ptr<KernelLibrary>(new KernelLibrary(handle));
}

KernelLibrary::~KernelLibrary() { dlclose(handle); }

KernelEntry KernelLibrary::lookup(const std::string &symbol) const {
  return reinterpret_cast<KernelEntry>(dlsym(handle, symbol.c_str()));
}
