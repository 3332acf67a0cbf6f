//===- Train.h - gptc train and gptc sample --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_TRAIN_H
#define GPTC_TOOLS_GPTC_TRAIN_H

#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir::gptc {

/// `gptc train MODEL.pbtxt`: compiles the training step through the
/// driver (with the flags of CompileFlags.h) and runs it, one process per
/// device of the mesh.
int runTrain(const std::string &modelPath, const DialectRegistry &registry);

/// `gptc sample CHECKPOINT`: recompiles the checkpoint's model for sampling
/// and prints generated text.
int runSample(const std::string &checkpointPath,
              const DialectRegistry &registry);

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_TRAIN_H
