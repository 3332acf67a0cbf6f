//===- Npy.h - Read and write NumPy .npy files ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The reference checks exchange tensors with NumPy and PyTorch as .npy files
// (format version 1.0, little-endian, C order; f4, f8, i4, i8).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_NPY_H
#define GPTC_RUNTIME_NPY_H

#include "gptc/Runtime/Tensor.h"

#include <string>

namespace gptc::runtime {

/// Reads `path` into `tensor`; false with `error` on failure.
bool readNpy(const std::string &path, Tensor &tensor, std::string &error);

/// Writes `tensor` to `path`; false with `error` on failure.
bool writeNpy(const std::string &path, const Tensor &tensor,
              std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_NPY_H
