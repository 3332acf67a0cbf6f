/*===- example.c - Training a model through gptc's C API -----------------===*\
|*                                                                            *|
|* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * gptc-capi-example MODEL STEPS CHECKPOINT [MESH]: compiles MODEL (on MESH,
 * e.g. "dp=2", under mpirun: every rank runs this program), trains STEPS
 * steps one at a time printing each loss, scales a parameter through
 * read/write, saves CHECKPOINT, overwrites the parameter, loads the
 * checkpoint back and checks that it restored the parameter. Also shows
 * the errors a caller gets back.
 */
#include "gptc-c/Trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int report(const char *what, char *error) {
  fprintf(stderr, "%s: %s\n", what, error ? error : "(no message)");
  gptcFreeString(error);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s MODEL STEPS CHECKPOINT [MESH]\n", argv[0]);
    return 2;
  }
  char *error = NULL;
  GptcTrainerOptions options = gptcTrainerOptionsGetDefault();
  options.steps = atoll(argv[2]);
  options.mesh = argc == 5 ? argv[4] : NULL;
  GptcTrainer t = gptcTrainerCreate(argv[1], &options, &error);
  if (gptcTrainerIsNull(t))
    return report("create", error);
  /* Under mpirun every rank prints; the test reads rank 0's lines. */
  if (gptcTrainerGetRank(t) != 0 && !freopen("/dev/null", "w", stdout))
    return 1;
  printf("mesh '%s': rank %lld of %lld processes\n", gptcTrainerGetMesh(t),
         (long long)gptcTrainerGetRank(t),
         (long long)gptcTrainerGetNumProcesses(t));
  printf("model: %lld parameters in %lld tensors, batch %lld x %lld, %lld "
         "steps\n",
         (long long)gptcTrainerGetNumParameters(t),
         (long long)gptcTrainerGetNumTensors(t),
         (long long)gptcTrainerGetBatchSize(t),
         (long long)gptcTrainerGetSeqLen(t),
         (long long)gptcTrainerGetNumSteps(t));
  const char *first = gptcTrainerGetTensorName(t, 0);
  printf("tensor 0: %s, rank %lld, dims %lld x %lld\n", first,
         (long long)gptcTrainerGetTensorRank(t, 0),
         (long long)gptcTrainerGetTensorDim(t, 0, 0),
         (long long)gptcTrainerGetTensorDim(t, 0, 1));

  for (int64_t s = 0; s < gptcTrainerGetNumSteps(t); ++s) {
    double loss;
    if (!gptcTrainerTrain(t, NULL, 1, &loss, &error))
      return report("train", error);
    printf("step %lld loss %.6f\n", (long long)gptcTrainerGetStep(t), loss);
  }
  double val;
  if (!gptcTrainerEvaluate(t, NULL, &val, &error))
    return report("evaluate", error);
  printf("validation loss %.6f\n", val);

  /* Read a parameter, halve it, write it back, read it again. */
  int64_t n =
      gptcTrainerGetTensorDim(t, 0, 0) * gptcTrainerGetTensorDim(t, 0, 1);
  float *w = malloc(sizeof(float) * n), *again = malloc(sizeof(float) * n);
  if (!gptcTrainerReadParameter(t, first, w, n, &error))
    return report("read", error);
  for (int64_t i = 0; i < n; ++i)
    w[i] *= 0.5f;
  if (!gptcTrainerWriteParameter(t, first, w, n, &error) ||
      !gptcTrainerReadParameter(t, first, again, n, &error))
    return report("write", error);
  printf("write then read: %s\n",
         memcmp(w, again, sizeof(float) * n) ? "differs" : "same");

  if (!gptcTrainerSaveCheckpoint(t, argv[3], &error))
    return report("save", error);
  for (int64_t i = 0; i < n; ++i)
    again[i] = 0.0f;
  if (!gptcTrainerWriteParameter(t, first, again, n, &error) ||
      !gptcTrainerLoadCheckpoint(t, argv[3], &error) ||
      !gptcTrainerReadParameter(t, first, again, n, &error))
    return report("load", error);
  printf("loaded checkpoint: step %lld, %s\n", (long long)gptcTrainerGetStep(t),
         memcmp(w, again, sizeof(float) * n) ? "parameters differ"
                                             : "same parameters");

  /* Errors come back as messages. */
  if (!gptcTrainerReadParameter(t, "nope", w, n, &error))
    report("error", error);
  if (!gptcTrainerReadParameter(t, first, w, 3, &error))
    report("error", error);
  if (!gptcTrainerTrain(t, NULL, 1, NULL, &error))
    report("error", error);
  if (!gptcTrainerTrain(t, "/nonexistent/data.bin", 1, NULL, &error))
    report("error", error);
  GptcTrainer bad = gptcTrainerCreate("/nonexistent.pbtxt", NULL, &error);
  if (gptcTrainerIsNull(bad))
    report("error", error);
  free(w);
  free(again);
  gptcTrainerDestroy(t);
  return 0;
}
