//===- ProgramFormat.h - The artifact format version -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The one number the compiler writes into every Program and the runtime
// checks before running it (program.proto, `format_version`).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PROGRAMFORMAT_H
#define GPTC_RUNTIME_PROGRAMFORMAT_H

namespace gptc::runtime {

/// Incremented on every incompatible change of program.proto.
/// 2: kernel attributes are typed messages (`Kernel.params`).
/// 3: elementwise functions and the pipeline's schedule are enums.
inline constexpr int kProgramFormatVersion = 3;

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PROGRAMFORMAT_H
