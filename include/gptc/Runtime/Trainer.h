//===- Trainer.h - The training loop of gptc's runtime ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs a compiled program's @train_step over a byte-level dataset, evaluates
// @forward on held-out data, and saves and loads checkpoints. Independent of
// MLIR: it sees only the artifact.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_TRAINER_H
#define GPTC_RUNTIME_TRAINER_H

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Dataset.h"
#include "gptc/Runtime/checkpoint.pb.h"

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gptc::runtime {

class Progress;
class TraceRecorder;

struct TrainOptions {
  /// The settings an artifact carries (its TrainSettings and model name):
  /// what gptc train, gptc-runtime and the C API start from before their
  /// own flags or options replace some (docs/Runtime.md).
  static TrainOptions fromProgram(const program::Program &program);

  std::string model;       ///< the model's name
  std::string description; ///< the model description's text (for sampling)
  /// The settings checkpoints record and a resumed run compares
  /// (TrainSettings.recipe; gptc train adds "data"), and which differences
  /// loading a checkpoint accepts.
  Recipe recipe;
  ResumePolicy resumePolicy;
  int64_t batch = 0, seqLen = 0, vocab = 0;
  int64_t steps = 0;
  /// Train up to this step (default: `steps`); the schedule spans `steps`.
  int64_t stopAfter = -1;
  int64_t evalInterval = 0, evalBatches = 8;
  int64_t checkpointInterval = 0;
  /// Also a checkpoint once this many minutes have passed since the last
  /// (rank 0's clock decides for every rank; <= 0: none).
  double checkpointMinutes = 0;
  /// Stop after the step in progress when a SIGTERM, SIGINT or SIGUSR1
  /// arrives (installPreemptionHandlers; every rank after the same step).
  bool stopOnSignal = false;
  /// Step directories kept in the checkpoint directory (< 1: all).
  int keepCheckpoints = 1;
  /// nan_policy SKIP: the step carries a skip flag (\"overflow\" output);
  /// a flagged step is reported and training goes on (ten in a row stop).
  bool skipNonFinite = false;
  /// Under several processes: an operation that waits longer than this
  /// (seconds, at least five times the slowest step; ten minutes in the
  /// first step, checkpoints and evaluations) ends the job naming the ranks
  /// it waits for (Communicator::setWatchdog). 0: no watchdog.
  double collectiveTimeout = 20;
  /// Under several processes: a collective the compiler's schedule lets
  /// overlap later kernels runs non-blocking while they compute
  /// (Communicator::setOverlapCollectives); off: every collective
  /// completes where it stands (`--collective-overlap=false`, the
  /// benchmark's baseline).
  bool overlapCollectives = true;
  std::string checkpointPath;
  /// The run continues the checkpoint at checkpointPath (--resume).
  bool resumed = false;
  /// A fresh run may replace the checkpoints already at checkpointPath
  /// (--overwrite); without it, it refuses to start there.
  bool overwrite = false;
  uint64_t initSeed = 0, dataSeed = 0;
  /// Print a progress line every `logInterval` steps (and a live line on a
  /// terminal).
  int64_t logInterval = 10;
  bool liveProgress = false;
  /// Time each kernel and print where the step's time goes, by kind and
  /// by class, with the GEMMs' FLOP/s and the memory-bound kernels'
  /// bandwidth (KernelProfile.h), over the steps after the first.
  bool profile = false;
  /// With `profile`: rank 0 also writes the profile per kernel as JSON
  /// here.
  std::string profileJson;
  /// Write each step's batch and the losses as .npy/.tsv files here
  /// (reference checks; the loop, for every trainer), the initial
  /// parameters (one program per device), and at the end the final
  /// parameters (`final.<name>.npy`, whole) and, for one program on a
  /// mesh, each rank's own blocks (`rank<r>.final.<name>.npy`).
  std::string dumpDir;
  /// Testing fp16's overflow handling: at this 0-based step, on rank
  /// `injectOverflowRank`, a gradient becomes infinite just before the
  /// norm is taken (-1: never).
  int64_t injectOverflowStep = -1;
  int injectOverflowRank = 0;
  /// Record the run's timeline (steps, kernels, evaluations, checkpoints)
  /// as a Chrome trace here; under several processes each rank writes
  /// its own file, `.rank<r>` before the extension.
  std::string tracePath;
};

/// A training run as its callers drive it (gptc train, gptc-runtime, the C
/// API): one program per device (Trainer) or a pipeline mesh's stages
/// (PipelineTrainer). Under several processes every process makes the same
/// calls in the same order.
class TrainingRun {
public:
  virtual ~TrainingRun();
  /// Every parameter from its init (or the value setInitialValues gave
  /// it), the optimizer state zero, at step 0.
  virtual void initialize() = 0;
  /// The initial values of some parameters, by name, for initialize: each
  /// the whole tensor's elements in its dtype, little-endian (an imported
  /// model's weights). Fails naming a parameter the program does not have
  /// or whose size differs.
  virtual bool setInitialValues(std::map<std::string, std::string> values,
                                std::string &error) = 0;
  /// Trains to options.stopAfter (options.steps by default). One loop for
  /// every trainer (TrainLoop.cpp): each step's batch, the watchdog, the
  /// progress lines and table, the non-finite policy, evaluation and
  /// checkpoint cadence, the timeline; the trainer runs the step
  /// (runStep). Fails on a non-finite step (naming it) or a runtime error.
  bool train(const Dataset &data, std::ostream &log, std::string &error);
  /// Trains up to `count` more steps (not past the schedule's length):
  /// the C API's step-by-step training.
  bool trainSteps(const Dataset &data, int64_t count, std::ostream &log,
                  std::string &error);
  /// One step on a batch the caller gives (`tokens`, `labels`: the step's
  /// whole batch, batchRows() x seqLen i32, every rank the same): the
  /// PyTorch bridge's training on the user's batches. `loss` and `norm`
  /// are the step's; fails past the schedule's length, on a batch of
  /// another shape, or on a non-finite step the trainer did not skip.
  bool trainBatch(Tensor &tokens, Tensor &labels, double &loss, double &norm,
                  std::string &error);
  /// The step's whole batch: sequences over all ranks, and tokens each.
  int64_t wholeBatchRows() const { return batchRows(); }
  /// Mean loss over the fixed validation batches; every rank gets it.
  virtual bool evaluate(const Dataset &data, double &loss,
                        std::string &error) = 0;
  /// The whole state after `stepsDone` steps, in the mesh-independent
  /// checkpoint format (docs/Checkpoints.md).
  virtual bool saveCheckpoint(const std::string &path, int64_t stepsDone,
                              std::string &error) const = 0;
  virtual bool loadCheckpoint(const std::string &path, std::string &error) = 0;
  /// The steps done (the next step's 0-based index).
  int64_t getStep() const { return step; }
  /// The loss of the last step trained.
  double getLastLoss() const { return lastLoss; }
  /// The signal that stopped the last train call before its end (0: it
  /// ran to its end); the steps done are getStep().
  int getStoppedBySignal() const { return stoppedBySignal; }
  /// The step of the checkpoint last written or loaded (-1: none).
  int64_t getCheckpointStep() const { return checkpointStep; }
  /// What the last loadCheckpoint accepted that differs from the
  /// checkpoint's settings (lines; "" where nothing did).
  const std::string &getResumeNotes() const { return resumeNotes; }
  /// Whether the last error is every rank's, the same text on each (a
  /// checkpoint's write, which the ranks agree on): one rank may report
  /// it for all.
  bool getErrorOnEveryRank() const { return errorOnEveryRank; }
  /// Which differences from a checkpoint's settings loadCheckpoint accepts.
  void setResumePolicy(const ResumePolicy &policy) {
    runOptions().resumePolicy = policy;
  }
  /// After a checkpoint failed to be written to `path`: what is left (the
  /// previous checkpoint, untouched, or none), for the error message.
  std::string lastGoodCheckpoint(const std::string &path) const;
  /// Parameters of the whole model.
  virtual int64_t numParameters() const = 0;
  /// What runs the steps ("cpu", or the GPU's name).
  virtual std::string device() const = 0;
  /// The parameters' names and whole shapes, in the program's order.
  virtual const std::vector<std::string> &parameterNames() const = 0;
  virtual const std::vector<int64_t> &parameterShape(size_t i) const = 0;
  /// Every whole parameter on every rank (gathered from blocks and stages).
  virtual bool wholeParameters(std::vector<Tensor> &out,
                               std::string &error) const = 0;
  /// Replaces the parameter `name` by `whole`; each rank keeps what it
  /// holds of it. The optimizer state is kept.
  virtual bool writeParameter(const std::string &name, const Tensor &whole,
                              std::string &error) = 0;

protected:
  /// The run's options (trainSteps moves its stopAfter).
  virtual TrainOptions &runOptions() = 0;

  // The trainer's part of the loop (train).
  /// What one step reports.
  struct StepResult {
    double loss = 0, norm = 0, lr = 0;
    /// The step carried the skip flag (fp16's overflow, nan_policy SKIP):
    /// the state was left as it was.
    bool skipped = false;
    std::optional<double> lossScale;
  };
  /// Before the first step of a train call that runs steps `first` to
  /// `stop` (exclusive): buffers, the profile, and the timeline's recorder
  /// (null: none) for the trainer's own slices and kernels.
  virtual bool beginSteps(int64_t first, int64_t stop, TraceRecorder *trace,
                          std::string &error) = 0;
  /// Step `step` on the step's whole batch (`tokens`, `labels`:
  /// batchRows() x seqLen, every rank the same).
  virtual bool runStep(int64_t step, Tensor &tokens, Tensor &labels,
                       StepResult &result, std::string &error) = 0;
  /// After the steps, whether they succeeded or not: what beginSteps set
  /// up is released and the recorder detached.
  virtual void endSteps() = 0;
  /// After the steps succeeded: the final dumps and the kernel profile.
  virtual bool finishSteps(std::ostream &log, const Progress &progress,
                           std::string &error) = 0;
  /// Sequences per step over all ranks.
  virtual int64_t batchRows() const = 0;
  /// The processes' communicator (null: one process).
  virtual Communicator *communicator() const = 0;
  /// Whether the step carries fp16's loss scale (the progress shows it).
  virtual bool hasLossScale() const { return false; }
  /// Whether the program can skip a non-finite step (nan_policy SKIP).
  virtual bool canSkipNonFinite() const { return true; }
  /// trainBatch's transaction: before the step, what a non-finite step
  /// could change is kept (the scalar state, fp16's loss scale; the whole
  /// state where the step's program cannot skip an update); rollBack puts
  /// it back, so that a failed call leaves the trainer as it was.
  virtual bool keepForRollBack(std::string &error) = 0;
  virtual void rollBack() = 0;
  /// Set for trainBatch's step: a non-finite loss or gradient norm skips
  /// the update on every rank, whatever nan_policy says.
  bool guardNonFinite = false;

  int64_t step = 0;
  double lastLoss = 0;
  int stoppedBySignal = 0;
  /// The step of the checkpoint last written or loaded (-1: none).
  mutable int64_t checkpointStep = -1;
  std::string resumeNotes;
  mutable bool errorOnEveryRank = false;
  /// Before loading `reader`'s checkpoint: that it is of the model with
  /// `signature`, and that its settings and step fit the run's
  /// (CheckpointReader::checkSettings, the notes kept for getResumeNotes).
  bool checkResume(const CheckpointReader &reader, const std::string &signature,
                   std::string &error, const std::string &legacy = "");
  /// nan_policy SKIP: non-finite steps skipped in a row; this many stop.
  int64_t nonFiniteInARow = 0;
  static constexpr int64_t kMaxNonFiniteInARow = 10;
};

class Trainer : public TrainingRun {
public:
  /// Checks that `program` has @train_step and @forward of the expected
  /// shape and prepares their executors.
  /// `comm` runs the collectives of a program for several devices (one
  /// process per device; null for one device). Rank 0 writes checkpoints
  /// and dumps; every rank computes the same losses. `backend` runs the
  /// functions (null: the CPU).
  static std::unique_ptr<Trainer>
  create(const program::Program &program, const TrainOptions &options,
         std::string &error, Communicator *comm = nullptr,
         std::unique_ptr<Backend> backend = nullptr);

  /// Initializes every parameter from its `init` (seeded normal, zeros,
  /// ones), or from the value setInitialValues gave it, and zeroes the
  /// optimizer state.
  void initialize() override;
  bool setInitialValues(std::map<std::string, std::string> values,
                        std::string &error) override;
  /// Loads parameters and optimizer state; fails on a checkpoint of
  /// another model.
  bool loadCheckpoint(const std::string &path, std::string &error) override;
  /// Writes a checkpoint atomically (temporary file, then rename).
  bool saveCheckpoint(const std::string &path, std::string &error) const;
  /// Same, recording `stepsDone` completed steps (mid-run checkpoints).
  bool saveCheckpoint(const std::string &path, int64_t stepsDone,
                      std::string &error) const override;

  /// Mean loss of @forward over the fixed validation batches.
  bool evaluate(const Dataset &data, double &loss, std::string &error) override;

  /// The parameters' names and whole shapes, in the program's order.
  const std::vector<std::string> &parameterNames() const override {
    return names;
  }
  const std::vector<int64_t> &parameterShape(size_t i) const override {
    return layouts[i].shape;
  }
  /// Replaces the parameter `name` by `whole` (the whole tensor, of its
  /// dtype and shape); this rank keeps its block. The optimizer state is
  /// kept.
  bool writeParameter(const std::string &name, const Tensor &whole,
                      std::string &error) override;

  /// Parameters of the whole model (not of this rank's blocks).
  int64_t numParameters() const override;
  /// The whole parameters (gathered from the ranks' blocks when sharded).
  bool wholeParameters(std::vector<Tensor> &out,
                       std::string &error) const override;
  int rank() const { return comm ? comm->rank() : 0; }
  /// What runs the steps ("cpu", or the GPU's name).
  std::string device() const override { return backend->describe(); }

  ~Trainer() override;

private:
  Trainer();
  TrainOptions &runOptions() override { return options; }
  bool beginSteps(int64_t first, int64_t stop, TraceRecorder *trace,
                  std::string &error) override;
  bool runStep(int64_t step, Tensor &tokens, Tensor &labels, StepResult &result,
               std::string &error) override;
  void endSteps() override;
  bool finishSteps(std::ostream &log, const Progress &progress,
                   std::string &error) override;
  int64_t batchRows() const override { return stepRows; }
  Communicator *communicator() const override { return comm; }
  bool hasLossScale() const override;
  bool keepForRollBack(std::string &error) override;
  void rollBack() override;
  /// What keepForRollBack kept: the scalar state's values, and the
  /// parameters and moments (3n, stateTensor's order) where the program
  /// has no skip flag (empty otherwise).
  std::vector<Tensor> keptScalars, keptState;
  /// State tensor k of 3n: params[k], m[k - n] or v[k - 2n].
  Tensor &stateTensor(int64_t k);
  /// The buffers and plan of the steps of one train call (beginSteps).
  struct StepBuffers;
  std::unique_ptr<StepBuffers> run;

  TrainOptions options;
  /// What runs the functions (before the runners it creates, so that it
  /// is destroyed after them).
  std::unique_ptr<Backend> backend;
  std::unique_ptr<FunctionRunner> trainStep, forward;
  /// The state (parameters and moments) lives in the backend between runs;
  /// the host copies are brought up to date before they are read.
  void keepStateResident();
  bool syncState(std::string &error) const;
  /// The checkpoint fields of this run after `stepsDone` steps.
  checkpoint::Manifest checkpointHeader(int64_t stepsDone) const;
  std::vector<std::string> names;
  std::vector<Tensor> params, m, v;
  std::vector<program::ParamInit> inits;
  /// setInitialValues's values, by name.
  std::map<std::string, std::string> initialValues;
  /// How params, m and v (3 x n, in that order) are split over the grid.
  std::vector<BlockLayout> layouts;
  /// How @forward takes the parameters (whole, or tensor-parallel blocks).
  std::vector<BlockLayout> forwardLayouts;
  /// The data inputs of @train_step after `step`: name and batch layout.
  struct DataInput {
    std::string name;
    bool labels = false;
    program::BatchLayout layout;
    std::vector<int64_t> shape;
  };
  std::vector<DataInput> dataInputs;
  /// Scalar state beside the parameters and moments, fed back each step
  /// and checkpointed by name: fp16's loss scale and its counters.
  struct ScalarState {
    std::string name;
    program::Role role = program::ROLE_NONE;
    Tensor value;
    program::ParamInit init;
    int output = -1;
  };
  std::vector<ScalarState> scalars;
  /// The outputs the loop reads, by role; `overflow` is -1 without loss
  /// scaling.
  int lossOut = -1, normOut = -1, lrOut = -1, overflowOut = -1;
  /// What feeds each @train_step input: a parameter or moment (found
  /// through stateIn), the step, scalar state or data (by index).
  struct Slot {
    enum Kind { State, Step, Scalar, Data } kind;
    int index;
  };
  std::vector<Slot> inputSlots;
  /// The input and output of params[i], m[i], v[i] at i, n + i, 2n + i.
  std::vector<int> stateIn, stateOut;
  /// The scalar state's starting values.
  void initializeScalars();
  std::vector<int64_t> grid;
  Communicator *comm = nullptr;
  /// Sequences per step over all ranks.
  int64_t stepRows = 0;
  /// Copies this rank's rows of the step's batch `whole` into `out`.
  void layOutRows(const Tensor &whole, const program::BatchLayout &layout,
                  int32_t pad, Tensor &out) const;
  /// The final parameters into the dump directory.
  bool dumpFinal(std::string &error) const;
  /// Whole tensors of one state group (gathered when split).
  bool gather(const std::vector<Tensor> &group, int offset,
              std::vector<Tensor> &out, std::string &error) const;
  double lastValLoss = 0;
  bool haveValLoss = false;
  std::string fingerprint;
  /// The signature with padded shapes (what checkpoints before logical
  /// vocabulary rows recorded), accepted on load.
  std::string paddedSignature;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_TRAINER_H
