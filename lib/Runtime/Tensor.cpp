//===- Tensor.cpp - Host tensors of the runtime -----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Tensor.h"

#include <cstring>
#include <functional>
#include <numeric>
#include <utility>

using namespace gptc;
using namespace gptc::runtime;
using program::DType;

int64_t runtime::elementSize(DType dtype) {
  switch (dtype) {
  case program::F64:
  case program::I64:
    return 8;
  case program::F32:
  case program::I32:
    return 4;
  case program::BF16:
  case program::F16:
    return 2;
  default:
    return 0;
  }
}

const char *runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case program::F32:
    return "f32";
  case program::F64:
    return "f64";
  case program::I32:
    return "i32";
  case program::I64:
    return "i64";
  case program::BF16:
    return "bf16";
  case program::F16:
    return "f16";
  default:
    return "?";
  }
}

static int64_t product(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  size = numElements() * elementSize(dtype);
  storage.resize(size);
  ptr = storage.data();
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, std::byte *data) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.size = t.numElements() * elementSize(dtype);
  t.ptr = data;
  return t;
}

Tensor::Tensor(const Tensor &other)
    : dtype(other.dtype), shape(other.shape),
      storage(other.ptr, other.ptr + other.size), size(other.size) {
  ptr = storage.data();
}

Tensor &Tensor::operator=(const Tensor &other) {
  if (this != &other)
    *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor &&other) noexcept
    : dtype(other.dtype), shape(std::move(other.shape)),
      storage(std::move(other.storage)), size(other.size) {
  // A moved vector keeps its buffer; a view keeps pointing at the arena.
  ptr = storage.empty() ? other.ptr : storage.data();
  other.ptr = nullptr;
  other.size = 0;
}

Tensor &Tensor::operator=(Tensor &&other) noexcept {
  if (this == &other)
    return *this;
  dtype = other.dtype;
  shape = std::move(other.shape);
  storage = std::move(other.storage);
  size = other.size;
  ptr = storage.empty() ? other.ptr : storage.data();
  other.ptr = nullptr;
  other.size = 0;
  return *this;
}

int64_t Tensor::numElements() const { return product(shape); }
