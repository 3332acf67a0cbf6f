//===- TrainSession.h - One home for a training run -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A training run from a model to its last checkpoint, in one place, as
// IREE's tools are clients of its compiler session: `gptc train` turns its
// flags into a TrainRequest, the C API (and so the Python binding and the
// PyTorch bridge) its options; both call TrainSession::create, and what
// gptc train trains, they train, with the same messages.
//
//   TrainRequest --(the description, planned for `--mesh auto`; the ONNX
//     graph)--> ModelDescription --(the processes; compileTraining)-->
//   program --(rt::RunSession: data, trainer, resume)--> run()
//
// What the session has to say goes to a SessionObserver: the compiler's
// diagnostics to its stream, the run's notes and errors to its calls (the
// tool prints them, the C API collects them). gptc-runtime, which has no
// compiler, starts at the artifact: rt::RunSession::fromArtifact.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DRIVER_TRAINSESSION_H
#define GPTC_DRIVER_TRAINSESSION_H

#include "gptc/Dialect/Gptc/IR/GptcOps.h"
#include "gptc/Driver/Driver.h"
#include "gptc/Driver/Planning.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/Runtime/Session.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::gptc {

/// What a session reports: the run's notes and errors (rt::RunObserver),
/// and the compiler's located diagnostics (errors, warnings, remarks).
class SessionObserver : public ::gptc::runtime::RunObserver {
public:
  /// Where the diagnostics are written (rank 0's; the other ranks of a
  /// launcher compile the same description quietly).
  virtual llvm::raw_ostream &diagnostics() = 0;
};

/// Everything a training run is asked for: the model, what replaces the
/// description's settings, the compiler's options and the run's.
struct TrainRequest {
  /// A model description (.pbtxt) or an ONNX model (.onnx: its graph is
  /// the model, the training settings gptc's defaults and the overrides).
  std::string modelPath;
  OnnxImportOptions onnx;
  /// The description's settings replaced (gptc train's --mesh, --zero-stage,
  /// --grad-accum, --sequence-parallel, --context-attention, --recompute,
  /// --lr, --warmup-steps, --lr-decay, --min-lr-ratio).
  DescriptionOverrides overrides;
  /// `--mesh auto`: the planner's best plan for this hardware and device
  /// count replaces the parallel settings (the overrides then hold the
  /// learning-rate settings only).
  std::optional<AutoMesh> autoMesh;
  /// The schedule's length (--steps); unset: the description's.
  std::optional<int64_t> steps;
  /// A step whose loss or gradients are not finite (--nan-policy); unset:
  /// the description's.
  std::optional<NanPolicy> nanPolicy;
  /// Under a launcher of N processes, a description without a mesh (and
  /// no mesh in the overrides) trains data parallel over them.
  bool meshFromLauncher = true;
  /// Every step of one program per device carries the skip flag, so that
  /// a non-finite step changes nothing whatever the policy says (the C
  /// API's calls are transactions); a pipeline's stages guard their own
  /// update.
  bool guardEveryStep = false;
  /// Every rank reports its errors and diagnostics (the C API: each
  /// process's caller gets its own); otherwise rank 0 alone says what
  /// every rank finds.
  bool reportOnEveryRank = false;
  CompileOptions compile;
  ::gptc::runtime::RunOptions run;
};

/// A compiled and opened training run (create), ready to run.
class TrainSession {
public:
  /// The description of `request` (planned, with the ONNX graph it names),
  /// its checks, the processes of its mesh, the compiled program and its
  /// run, opened: initialized, or resumed with `request.run.resume`. The
  /// leader's notes say what trains where. Null when a step fails, its
  /// error reported to `observer` once.
  static std::unique_ptr<TrainSession> create(const TrainRequest &request,
                                              MLIRContext &context,
                                              SessionObserver &observer);

  /// Trains to the end (or a stop signal) and saves: 0,
  /// kPreemptedExitCode, or 1 with the error reported.
  int run() { return runtime().run(); }

  ::gptc::runtime::RunSession &runtime() { return *session; }
  ::gptc::runtime::TrainingRun &trainer() { return session->trainer(); }
  /// The mesh as it trains ("dp=2,tp=2"; "" for one device).
  const std::string &mesh() const { return meshText; }
  /// The optimizer step's whole batch, in sequences.
  int64_t batchSize() const { return batch; }

private:
  std::unique_ptr<::gptc::runtime::RunSession> session;
  std::string meshText;
  int64_t batch = 0;
};

} // namespace mlir::gptc

#endif // GPTC_DRIVER_TRAINSESSION_H
