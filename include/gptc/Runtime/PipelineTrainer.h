//===- PipelineTrainer.h - Training on pipeline stages ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs a pipeline program (program.proto's PipelinePlan): one process per
// stage executes its steps in order, each chunk's forward and backward
// through the CPU executor, activations and their gradients as MPI
// messages between stages, then the optimizer step on the stage's
// parameters with the gradient norm of the whole model. The backward of a
// chunk recomputes its forward from the chunk's input, so a stage keeps
// only its in-flight microbatches' inputs. See docs/Pipeline.md.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_PIPELINETRAINER_H
#define GPTC_RUNTIME_PIPELINETRAINER_H

#include "gptc/Runtime/Trainer.h"

#include <iosfwd>
#include <memory>
#include <string>

namespace gptc::runtime {

/// The schedule's name as `--pipeline-schedule` spells it ("gpipe", "1f1b",
/// "interleaved", "zb-h1"; "unspecified" for none).
const char *scheduleName(program::PipelineSchedule schedule);

class PipelineTrainer : public TrainingRun {
public:
  /// Checks the plan and the functions it names and prepares this rank's
  /// stage (rank = stage). Null with `error` set otherwise. `backend` runs
  /// the chunks (null: the CPU's); a device backend keeps the parameters,
  /// gradients and moments resident, and the gradients' sums, reductions
  /// and the update run there too (Backend's state operations).
  static std::unique_ptr<PipelineTrainer>
  create(const program::Program &program, const TrainOptions &options,
         std::string &error, Communicator *comm,
         std::unique_ptr<Backend> backend = nullptr);
  ~PipelineTrainer() override;

  /// Draws every parameter as one device would (or takes the value
  /// setInitialValues gave it) and keeps this stage's.
  void initialize() override;
  bool setInitialValues(std::map<std::string, std::string> values,
                        std::string &error) override;
  /// Mean loss over the fixed validation batches (as Trainer::evaluate),
  /// each passed forward through the stages; every rank gets it.
  bool evaluate(const Dataset &data, double &loss, std::string &error) override;
  int64_t numParameters() const override;
  /// What runs the chunks (Backend::describe).
  std::string device() const override;
  /// The whole model's state in the one-device checkpoint format (rank 0
  /// receives the other stages' tensors and writes): a pipeline's
  /// checkpoint resumes on one device or another mesh and the other way.
  bool saveCheckpoint(const std::string &path, int64_t stepsDone,
                      std::string &error) const override;
  /// Every rank reads the file and keeps its stage's tensors.
  bool loadCheckpoint(const std::string &path, std::string &error) override;
  /// The plan's parameters, in @forward's order, and their whole shapes.
  const std::vector<std::string> &parameterNames() const override;
  const std::vector<int64_t> &parameterShape(size_t i) const override;
  /// Every whole parameter on every rank: the first stage holding it
  /// gathers its tensor-parallel blocks and the stages share it.
  bool wholeParameters(std::vector<Tensor> &out,
                       std::string &error) const override;
  /// Each stage holding `name` keeps its block of `whole`.
  bool writeParameter(const std::string &name, const Tensor &whole,
                      std::string &error) override;

private:
  PipelineTrainer() = default;
  TrainOptions &runOptions() override;
  /// One step (TrainingRun::train's loop): the stage's program for every
  /// microbatch, then the gradients' sums and reductions, the norm, and
  /// AdamW where the state lives. Every rank reports the same loss,
  /// gradient norm and learning rate.
  bool beginSteps(int64_t first, int64_t stop, TraceRecorder *trace,
                  std::string &error) override;
  bool runStep(int64_t step, Tensor &tokens, Tensor &labels, StepResult &result,
               std::string &error) override;
  void endSteps() override;
  /// Each rank's final parameters (whole, on the first stage holding each)
  /// into the dump directory (beginSteps writes the initial ones).
  bool finishSteps(std::ostream &log, const Progress &progress,
                   std::string &error) override;
  /// `<dump dir>/<prefix>.<name>.npy` for each parameter, whole, written by
  /// the first stage holding it (replica 0, tensor rank 0); nothing without
  /// a dump directory.
  bool dumpParameters(const std::string &prefix, std::string &error) const;
  int64_t batchRows() const override;
  Communicator *communicator() const override;
  /// Pipeline stages stop at a non-finite step (nan_policy SKIP is refused
  /// at compile time).
  bool canSkipNonFinite() const override { return false; }
  bool keepForRollBack(std::string &error) override;
  void rollBack() override;
  bool hasLossScale() const override;
  struct Impl;
  std::unique_ptr<Impl> impl;
  /// What keepForRollBack kept: fp16's loss scale and its counters.
  float keptLossScale = 1;
  int32_t keptGoodSteps = 0, keptUpdates = 0;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_PIPELINETRAINER_H
