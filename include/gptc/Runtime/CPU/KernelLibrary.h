//===- KernelLibrary.h - Generated kernels the runtime loads ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The shared object of a program's generated kernels (Program.
// kernel_library), loaded from memory with the system's dynamic loader;
// the runtime links no compiler.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CPU_KERNELLIBRARY_H
#define GPTC_RUNTIME_CPU_KERNELLIBRARY_H

#include <cstdint>
#include <memory>
#include <string>

namespace gptc::runtime {

/// The entry point of a generated kernel: rows [begin, end) of its
/// parallel dimension, on the inputs' then the outputs' buffers.
using KernelEntry = void (*)(void **buffers, int64_t begin, int64_t end);

class KernelLibrary {
public:
  /// Loads a shared object from its bytes; null with `error` on failure.
  static std::unique_ptr<KernelLibrary> load(const std::string &bytes,
                                             std::string &error);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  /// The entry point named `symbol`, or null.
  KernelEntry lookup(const std::string &symbol) const;

private:
  explicit KernelLibrary(void *handle) : handle(handle) {}
  void *handle;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CPU_KERNELLIBRARY_H
