//===- ExportProgram.h - gptc IR to the runtime's artifact -----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers every `func.func` of a module of gptc ops into a program.proto
// Function: one kernel per op, one value per SSA value. Values keep their
// own storage (offset -1) unless a buffer plan (`gptc.offset` on the
// defining op, set by gptc-plan-buffers) says otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TARGET_EXPORTPROGRAM_H
#define GPTC_TARGET_EXPORTPROGRAM_H

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Runtime/program.pb.h"

#include "gptc/Runtime/ProgramFormat.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::gptc {

/// The artifact format version this compiler writes (the runtime's).
inline constexpr int kProgramFormatVersion =
    ::gptc::runtime::kProgramFormatVersion;

/// A copy of `module` with only the functions named in `functions` (all of
/// them when empty): what a target compiles the exported kernels from, so
/// that its functions are the ones exportProgram's symbols name.
OwningOpRef<ModuleOp> cloneExported(ModuleOp module,
                                    ArrayRef<StringRef> functions);

/// The artifact's learning-rate decay for the IR's.
::gptc::program::ScheduleParams::Decay scheduleDecay(LrDecay decay);

/// Lowers the functions of `module` (all of them when `functions` is empty)
/// into `program`, reporting ops without a kernel as errors at the op.
LogicalResult exportProgram(ModuleOp module, ArrayRef<StringRef> functions,
                            ::gptc::program::Program &program);

} // namespace mlir::gptc

#endif // GPTC_TARGET_EXPORTPROGRAM_H
