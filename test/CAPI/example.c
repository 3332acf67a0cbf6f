/*===- example.c - Training a model through gptc's C API -----------------===*\
|*                                                                            *|
|* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * gptc-capi-example MODEL STEPS CHECKPOINT: compiles MODEL, trains STEPS
 * steps one at a time printing each loss, scales a parameter through
 * read/write, saves CHECKPOINT, then loads it into a second trainer and
 * checks that both hold the same parameters. Also shows the errors a
 * caller gets back.
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
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL STEPS CHECKPOINT\n", argv[0]);
    return 2;
  }
  char *error = NULL;
  GptcTrainer t = gptcTrainerCreate(argv[1], atoll(argv[2]), &error);
  if (gptcTrainerIsNull(t))
    return report("create", error);
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
  int64_t n = gptcTrainerGetTensorDim(t, 0, 0) * gptcTrainerGetTensorDim(t, 0, 1);
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
  GptcTrainer u = gptcTrainerCreate(argv[1], atoll(argv[2]), &error);
  if (gptcTrainerIsNull(u) || !gptcTrainerLoadCheckpoint(u, argv[3], &error))
    return report("load", error);
  if (!gptcTrainerReadParameter(u, first, again, n, &error))
    return report("read", error);
  printf("loaded checkpoint: step %lld, %s\n", (long long)gptcTrainerGetStep(u),
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
  GptcTrainer bad = gptcTrainerCreate("/nonexistent.pbtxt", 0, &error);
  if (gptcTrainerIsNull(bad))
    report("error", error);
  free(w);
  free(again);
  gptcTrainerDestroy(u);
  gptcTrainerDestroy(t);
  return 0;
}
