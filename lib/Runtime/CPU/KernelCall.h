//===- KernelCall.h - One kernel call of the CPU executor -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Runtime/CPU: the operands of one kernel call, resolved to
// tensors, and the helpers that report a kernel's errors with its location.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_RUNTIME_CPU_KERNELCALL_H
#define GPTC_LIB_RUNTIME_CPU_KERNELCALL_H

#include "gptc/Runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gptc::runtime::detail {

/// The operands of one kernel call, resolved to tensors.
struct Call {
  std::vector<const Tensor *> in;
  std::vector<Tensor *> out;
  const program::Kernel &kernel;
  std::string &error;

  bool fail(const std::string &message) {
    error = kernel.location() + ": " + program::OpKind_Name(kernel.op()) +
            ": " + message;
    return false;
  }
  bool expect(bool condition, const char *message) {
    return condition || fail(message);
  }
  int64_t lastDim(const Tensor &t) const {
    return t.shape.empty() ? 1 : t.shape.back();
  }
  /// The dimensions of TRANSPOSE, REDUCE_SUM and BROADCAST.
  std::vector<int64_t> dims() const {
    return {kernel.dims().dims().begin(), kernel.dims().dims().end()};
  }
  /// The ignored label of a loss kernel, or none.
  std::optional<int64_t> ignoreIndex() const {
    if (!kernel.labels().has_ignore_index())
      return std::nullopt;
    return kernel.labels().ignore_index();
  }
};

} // namespace gptc::runtime::detail

#endif // GPTC_LIB_RUNTIME_CPU_KERNELCALL_H
