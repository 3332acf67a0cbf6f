//===- HardwareDescription.h - Hardware descriptions -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The hardware `gptc plan` prices plans for: a `.pbtxt` of
// include/gptc/Frontend/hardware.proto, or a built-in preset (the files of
// hardware/, compiled in).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_HARDWAREDESCRIPTION_H
#define GPTC_FRONTEND_HARDWAREDESCRIPTION_H

#include "gptc/Analysis/Planner.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::gptc {

/// Parses and validates the main buffer of `sourceMgr`, reporting each
/// error at its field through `context`'s diagnostics.
FailureOr<HardwareSpec> parseHardware(llvm::SourceMgr &sourceMgr,
                                      MLIRContext *context);

/// The built-in presets: their names ("h100-node", ...) and texts.
const std::vector<std::pair<std::string, std::string>> &hardwarePresets();

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_HARDWAREDESCRIPTION_H
