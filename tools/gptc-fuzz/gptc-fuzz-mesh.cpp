//===- gptc-fuzz-mesh.cpp - Fuzzing the --mesh parser -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `--mesh` values from untrusted bytes: accepted or an error message,
// never a crash or an overflow.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/ModelSpec.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::gptc::DescriptionOverrides overrides;
  std::string error;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (succeeded(overrides.parseMesh(text, error))) {
    // An accepted mesh has named axes of size >= 1 (their product is the
    // description's check).
    for (const mlir::gptc::MeshAxis &a : *overrides.mesh)
      if (a.size < 1 || a.name.empty())
        __builtin_trap();
  } else if (error.empty()) {
    __builtin_trap(); // a rejection always says why
  }
  return 0;
}
