/*===- gptc-c/Trainer.h - C API for training with gptc -----------*- C -*-===*\
|*                                                                            *|
|* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception                    *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* gptc as a library, in the style of MLIR's C API: opaque handles passed by  *|
|* value, functions named gptc<Type><Verb>, errors returned as messages the   *|
|* caller frees. A trainer is a model compiled by gptc's driver and trained   *|
|* by its runtime, as `gptc train` does (one process per device of its mesh,  *|
|* pipeline stages included), with its parameters and optimizer state.       *|
|* Python reaches it through ctypes.                                          *|
|*                                                                            *|
|* Not thread-safe: one thread uses a trainer at a time.                      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef GPTC_C_TRAINER_H
#define GPTC_C_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPTC_CAPI_EXPORTED __attribute__((visibility("default")))

/// A compiled model with its parameters and optimizer state.
typedef struct GptcTrainer {
  void *ptr;
} GptcTrainer;

/// Whether `trainer` is the null handle (a failed gptcTrainerCreate).
static inline bool gptcTrainerIsNull(GptcTrainer trainer) {
  return !trainer.ptr;
}

/// How a trainer is compiled; zero-initialized fields keep the
/// description's settings (gptcTrainerOptionsGetDefault).
typedef struct GptcTrainerOptions {
  /// > 0: replaces `training.steps` (the learning-rate schedule's length).
  int64_t steps;
  /// NULL or "": the description's mesh; "dp=2,tp=2" (as gptc's --mesh);
  /// or "auto": the first plan of gptc plan for `devices` devices of
  /// `hardware`. A mesh of several devices trains one process per device:
  /// every process of `mpirun -np N` creates the trainer and makes the
  /// same calls (MPI is initialized by the first such trainer; one per
  /// process). A mesh with a pipeline axis ("pp=2", "dp=2,pp=2") trains
  /// its stages, one per process, as `gptc train` does.
  const char *mesh;
  /// With mesh "auto": a preset (a100-80gb-node, h100-node, h200-node) or
  /// a hardware description file, and the devices to plan for.
  const char *hardware;
  int64_t devices;
  /// >= 0: replaces `parallel.zero_stage`; < 0: the description's.
  int zeroStage;
  /// NULL or "cpu": the CPU; "cuda": an NVIDIA GPU per process;
  /// "virtual-cuda": the GPU runtime on the virtual CUDA device (CPU
  /// stand-ins of CUDA, cuBLASLt and NCCL; for tests, slow). As gptc
  /// train's --device.
  const char *device;

  /// The rest are gptc train's flags of the same names, each unset as
  /// gptcTrainerOptionsGetDefault leaves it (the description's or gptc
  /// train's default); a value out of its domain is refused by name.
  /// Words are NULL or "" when unset.
  /// --pipeline-schedule ("gpipe", "1f1b", "interleaved", "zb-h1"),
  /// --virtual-stages (> 0; 0 unset), --pipeline-layers ("3,5": each
  /// chunk's layers).
  const char *pipelineSchedule;
  int64_t virtualStages;
  const char *pipelineLayers;
  /// --recompute ("none", "selective", "full"), --grad-accum (> 0; 0
  /// unset), --sequence-parallel (0 or 1; -1 unset), --context-attention
  /// ("ring", "all-gather"), --zero-reduce ("step", "microbatch").
  const char *recompute;
  int64_t gradAccum;
  int sequenceParallel;
  const char *contextAttention;
  const char *zeroReduce;
  /// --bucket-mb (>= 0; < 0 unset: 25), --gemm-epilogues (0 or 1; -1 unset),
  /// --codegen (0 or 1; -1 unset: 1).
  double bucketMb;
  int gemmEpilogues;
  int codegen;
  /// --nan-policy ("stop", "skip"; the C API's steps are transactions
  /// either way: a failed call changes nothing).
  const char *nanPolicy;
  /// --lr (> 0; 0 unset), --warmup-steps (>= 0; -1 unset), --lr-decay
  /// ("cosine", "linear", "constant"), --min-lr-ratio (in [0, 1]; -1
  /// unset).
  double lr;
  int64_t warmupSteps;
  const char *lrDecay;
  double minLrRatio;
  /// The checkpoints gptcTrainerTrain writes as it goes, as gptc train's
  /// --checkpoint (NULL: none), --checkpoint-interval (a step count, 0:
  /// none) and --keep-checkpoints (-1 unset: the description's).
  const char *checkpoint;
  int64_t checkpointInterval;
  int64_t keepCheckpoints;
} GptcTrainerOptions;

static inline GptcTrainerOptions gptcTrainerOptionsGetDefault(void) {
  GptcTrainerOptions o = {0, 0,  0,  0,  -1, 0, 0,  0, 0,  0, 0, -1, 0,
                          0, -1, -1, -1, 0,  0, -1, 0, -1, 0, 0, -1};
  return o;
}

/// Compiles the training step of the model at `modelPath`, a description
/// (`.pbtxt`, gptc's GPT or `onnx_model:`) or an ONNX model (`.onnx`), for
/// the CPU or `options->device`, and initializes it as `gptc train` does: the
/// description's seeded initialization, or the ONNX initializers. `options` may
/// be NULL (the defaults). On failure returns the null handle and, when `error`
/// is not NULL, sets `*error` to the diagnostics (free it with gptcFreeString).
GPTC_CAPI_EXPORTED GptcTrainer gptcTrainerCreate(
    const char *modelPath, const GptcTrainerOptions *options, char **error);

/// This process's rank and the number of processes (0 and 1 for one
/// device).
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetRank(GptcTrainer trainer);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetNumProcesses(GptcTrainer trainer);
/// The mesh the trainer runs ("dp=2,tp=2"; "" for one device).
GPTC_CAPI_EXPORTED const char *gptcTrainerGetMesh(GptcTrainer trainer);

/// Releases the trainer (null handles are ignored).
GPTC_CAPI_EXPORTED void gptcTrainerDestroy(GptcTrainer trainer);

/// The optimizer steps taken (0 after creation), and the schedule's length.
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetStep(GptcTrainer trainer);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetNumSteps(GptcTrainer trainer);
/// One step's batch: sequences x tokens.
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetBatchSize(GptcTrainer trainer);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetSeqLen(GptcTrainer trainer);

/// The parameters: their count (tensors), each one's name, rank and
/// dimensions (whole tensors, float32), and all their elements.
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetNumTensors(GptcTrainer trainer);
GPTC_CAPI_EXPORTED const char *gptcTrainerGetTensorName(GptcTrainer trainer,
                                                        int64_t index);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetTensorRank(GptcTrainer trainer,
                                                    int64_t index);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetTensorDim(GptcTrainer trainer,
                                                   int64_t index, int64_t dim);
GPTC_CAPI_EXPORTED int64_t gptcTrainerGetNumParameters(GptcTrainer trainer);

/// Copies the parameter `name` (`count` float32 elements, row-major) out
/// of or into the trainer. Writing keeps the optimizer state.
GPTC_CAPI_EXPORTED bool gptcTrainerReadParameter(GptcTrainer trainer,
                                                 const char *name, float *data,
                                                 int64_t count, char **error);
GPTC_CAPI_EXPORTED bool gptcTrainerWriteParameter(GptcTrainer trainer,
                                                  const char *name,
                                                  const float *data,
                                                  int64_t count, char **error);

/// Trains `steps` more steps on `dataPath` (a text file, or uint16 token
/// ids as nanoGPT's train.bin or llm.c's .bin; NULL: the GPL-3 text), with
/// the batches `gptc train` draws at those steps; `*loss` (when not NULL)
/// is the last step's loss. More steps than the schedule has left is an
/// error, nothing trained.
GPTC_CAPI_EXPORTED bool gptcTrainerTrain(GptcTrainer trainer,
                                         const char *dataPath, int64_t steps,
                                         double *loss, char **error);

/// One step on the caller's batch: `tokens` and `labels` are the step's
/// whole batch, `rows` x `seqLen` token ids row-major (rows =
/// gptcTrainerGetBatchSize, seqLen = gptcTrainerGetSeqLen; labels are the
/// tokens each position predicts), the same on every rank of a mesh. The
/// step's loss and gradient norm go to `*loss` and `*norm` (when not
/// NULL). Fails past the schedule, on another shape, an id outside the
/// vocabulary, or a non-finite step.
GPTC_CAPI_EXPORTED bool
gptcTrainerTrainBatch(GptcTrainer trainer, const int32_t *tokens,
                      const int32_t *labels, int64_t rows, int64_t seqLen,
                      double *loss, double *norm, char **error);

/// The mean loss over the validation batches of `dataPath` (its last 10%).
GPTC_CAPI_EXPORTED bool gptcTrainerEvaluate(GptcTrainer trainer,
                                            const char *dataPath, double *loss,
                                            char **error);

/// Writes a checkpoint directory (as `gptc train --checkpoint`), or loads
/// one (a directory, a step directory in it, or a single-file checkpoint).
GPTC_CAPI_EXPORTED bool
gptcTrainerSaveCheckpoint(GptcTrainer trainer, const char *path, char **error);
/// Loading refuses a checkpoint past the end of the trainer's schedule, and
/// one trained with other settings (the learning rate or its schedule, its
/// length included, the batch, the precision, ...), naming what differs.
GPTC_CAPI_EXPORTED bool
gptcTrainerLoadCheckpoint(GptcTrainer trainer, const char *path, char **error);
/// Loads a checkpoint trained with other settings (not one past the
/// schedule's end); `*notes` (when not NULL; free it with gptcFreeString)
/// says what differs and, for the schedule's length, what the learning
/// rate does next ("" where nothing does).
GPTC_CAPI_EXPORTED bool gptcTrainerLoadCheckpointChanged(GptcTrainer trainer,
                                                         const char *path,
                                                         char **notes,
                                                         char **error);

/// Frees a message returned through an `error` argument.
GPTC_CAPI_EXPORTED void gptcFreeString(char *string);

#ifdef __cplusplus
}
#endif

#endif /* GPTC_C_TRAINER_H */
