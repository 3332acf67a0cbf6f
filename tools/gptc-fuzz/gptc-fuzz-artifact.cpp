//===- gptc-fuzz-artifact.cpp - Fuzzing the artifact loader -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A compiled artifact (program.proto, what gptc-runtime and gptc-run load)
// from untrusted bytes: parsed, its version checked, and each function
// prepared for execution (Executor::create validates the values, ops and
// their attributes). Rejections are errors; nothing may crash.
//
// Not covered: an artifact's kernel library, a shared object gptc loads
// with dlopen (an artifact is code; docs/Limitations.md).
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <string>

using namespace gptc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  program::Program p;
  if (!p.ParseFromArray(data, static_cast<int>(size)) ||
      p.format_version() != runtime::kProgramFormatVersion)
    return 0;
  for (const program::Function &f : p.functions()) {
    std::string error;
    auto exec = runtime::Executor::create(f, error);
    if (!exec && error.empty())
      __builtin_trap(); // a rejection always says why
  }
  return 0;
}
