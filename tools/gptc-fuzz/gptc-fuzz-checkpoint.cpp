//===- gptc-fuzz-checkpoint.cpp - Fuzzing the checkpoint loader -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Checkpoints from untrusted bytes, both formats: the bytes as a format 3
// step directory's manifest (beside a data file of 64 KiB) and as a
// single-file checkpoint of format 1 or 2. Whatever opens, every tensor is
// read whole (when small); damage is an error, never a crash or a read
// outside the data.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CheckpointStore.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;

static void readAll(CheckpointReader &reader) {
  std::string error;
  for (const checkpoint::TensorRecord &t : reader.manifest().tensors()) {
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    int64_t elements = 1;
    bool small = true;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && elements > (int64_t(1) << 20) / d)) {
        small = false;
        break;
      }
      elements *= d;
    }
    if (!small || !program::DType_IsValid(t.dtype()) ||
        elementSize(static_cast<program::DType>(t.dtype())) == 0)
      continue;
    Tensor whole(static_cast<program::DType>(t.dtype()), shape);
    (void)reader.read(t.name(), shape, std::vector<int64_t>(shape.size(), 0),
                      whole, error);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::string dir = [] {
    char name[] = "/tmp/gptc-fuzz-checkpoint-XXXXXX";
    std::string d = mkdtemp(name) ? name : "/tmp";
    std::ofstream bin(d + "/rank-00000.bin", std::ios::binary);
    for (int i = 0; i < 65536; ++i)
      bin.put(static_cast<char>(i * 131));
    return d;
  }();
  std::string error;
  {
    std::ofstream out(dir + "/manifest.pb", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data),
              static_cast<std::streamsize>(size));
  }
  if (auto reader = CheckpointReader::open(dir, error))
    readAll(*reader);
  std::string file = dir + "/single.ckpt";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data),
              static_cast<std::streamsize>(size));
  }
  if (auto reader = CheckpointReader::open(file, error))
    readAll(*reader);
  return 0;
}
