//===- Tensor.h - Host tensors of the runtime -------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's tensors: a dtype (program.proto's), a shape and bytes on
// the host, owned or viewed. Executors, the trainer, checkpoints and the
// collectives all pass these.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_TENSOR_H
#define GPTC_RUNTIME_TENSOR_H

#include "gptc/Runtime/program.pb.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gptc::runtime {

/// A host tensor: dtype, shape and its bytes, either owned or a view into
/// memory someone else owns (an executor's arena). Copying always makes an
/// owning copy, so a view never escapes its arena by accident.
class Tensor {
public:
  program::DType dtype = program::F32;
  std::vector<int64_t> shape;

  Tensor() = default;
  /// An owning, zero-filled tensor.
  Tensor(program::DType dtype, std::vector<int64_t> shape);
  /// A view of `data`, which must outlive it.
  static Tensor view(program::DType dtype, std::vector<int64_t> shape,
                     std::byte *data);

  Tensor(const Tensor &other);
  Tensor &operator=(const Tensor &other);
  Tensor(Tensor &&other) noexcept;
  Tensor &operator=(Tensor &&other) noexcept;

  int64_t numElements() const;
  int64_t byteSize() const { return size; }
  std::byte *raw() { return ptr; }
  const std::byte *raw() const { return ptr; }
  template <typename T>
  T *data() {
    return reinterpret_cast<T *>(ptr);
  }
  template <typename T>
  const T *data() const {
    return reinterpret_cast<const T *>(ptr);
  }

private:
  std::vector<std::byte> storage;
  std::byte *ptr = nullptr;
  int64_t size = 0;
};

/// Bytes of one element of `dtype` (0 for an unknown dtype).
int64_t elementSize(program::DType dtype);
/// "f32", "i32", ...
const char *dtypeName(program::DType dtype);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_TENSOR_H
