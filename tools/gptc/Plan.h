//===- Plan.h - gptc plan --------------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTC_PLAN_H
#define GPTC_TOOLS_GPTC_PLAN_H

#include "gptc/Driver/Driver.h"
#include "gptc/Driver/Planning.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Frontend/OnnxImporter.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <string>

namespace mlir::gptc {

/// `gptc plan MODEL.pbtxt --hardware NAME|FILE --devices N [--top K]`:
/// ranks the plans the model can train with on that hardware and details
/// the best.
int runPlan(const std::string &modelPath, const DialectRegistry &registry);

/// `[mpirun -np N] gptc calibrate [-o FILE]`: measures this machine (one
/// device per process) and writes its hardware description.
int runCalibrate(const std::string &outputPath);

/// Parses the description in `sourceMgr` with the command line's parallel
/// options; `--mesh auto` (with --hardware and --devices) replaces the
/// mesh, ZeRO stage, sequence parallelism, microbatches and pipeline
/// schedule by gptc plan's first plan, reported as a remark at the
/// description.
///
/// For a description of an ONNX model the planner reads the architecture of
/// the graph's raised blocks: from `onnxShape` where the caller imported the
/// graph (gptc train MODEL.onnx), else from a new import.
/// The description in `sourceMgr` with the flags (--mesh and the other
/// parallel and learning-rate flags), or planned by `--mesh auto` (its
/// compiler choices into `options`).
FailureOr<ModelDescription>
parseDescription(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                 CompileOptions &options,
                 const OnnxTrainingShape *onnxShape = nullptr);

/// `--mesh auto`'s hardware and devices (checked: both given, no parallel
/// flag beside it); none without --mesh auto.
FailureOr<std::optional<AutoMesh>> autoMeshFlags();

/// The parallel settings that size the description gptc writes for
/// MODEL.onnx (onnxTrainingDescription): the command line's, or with
/// `--mesh auto` a data axis over --devices (the plans then share a step of
/// one graph-sized microbatch per device).
FailureOr<DescriptionOverrides> getOnnxDescriptionOverrides();

} // namespace mlir::gptc

#endif // GPTC_TOOLS_GPTC_PLAN_H
