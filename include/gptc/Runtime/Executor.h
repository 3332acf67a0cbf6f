//===- Executor.h - Run a compiled gptc function on the CPU ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime side of the artifact (program.proto): checks a Function once,
// then runs its kernels in order on host buffers. It does not depend on
// MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_H
#define GPTC_RUNTIME_EXECUTOR_H

#include "gptc/Runtime/program.pb.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

/// A host tensor: dtype, shape and owned bytes.
struct Tensor {
  program::DType dtype = program::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  Tensor() = default;
  Tensor(program::DType dtype, std::vector<int64_t> shape);

  int64_t numElements() const;
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(bytes.data());
  }
};

/// Bytes of one element of `dtype` (0 for an unknown dtype).
int64_t elementSize(program::DType dtype);
/// "f32", "i32", ...
const char *dtypeName(program::DType dtype);

/// Runs one Function.
class Executor {
public:
  /// Checks `function` (value ids, types, kernel arities) and allocates its
  /// values. Returns null with `error` set on a malformed function.
  static std::unique_ptr<Executor> create(const program::Function &function,
                                          std::string &error);

  /// Runs the function on `inputs` (in the function's input order, with
  /// the declared types) and returns its outputs. On a runtime error (an
  /// id outside the vocabulary, a non-finite loss is not an error) returns
  /// false with `error` naming the kernel's location.
  bool run(const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs, std::string &error);

  const program::Function &getFunction() const { return function; }

private:
  explicit Executor(const program::Function &function);
  bool runKernel(const program::Kernel &kernel, std::string &error);

  program::Function function;
  /// Storage of every value, by id.
  std::vector<Tensor> values;
  /// Inputs bound for the current run (by value id), to avoid copies.
  std::vector<const Tensor *> bound;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_EXECUTOR_H
