//===- Sample.cpp - gptc sample --------------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `gptc sample CHECKPOINT`: the description a checkpoint carries compiled to
// @logits for one sequence, its parameters loaded by name, and bytes (or
// token ids) sampled from it.
//
//===----------------------------------------------------------------------===//

#include "Train.h"

#include "CompileFlags.h"
#include "Onnx.h"

#include "gptc/Driver/Driver.h"
#include "gptc/Frontend/Importer.h"
#include "gptc/Frontend/ModelSpec.h"
#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/Pipelines/Pipelines.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CheckpointStore.h"
#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Sampling.h"
#include "gptc/Runtime/checkpoint.pb.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::gptc;
namespace cl = llvm::cl;
namespace rt = ::gptc::runtime;

static cl::OptionCategory sampleCategory("gptc sample options");

static cl::opt<int64_t> lengthOpt("length",
                                  cl::desc("Bytes (token ids) to generate"),
                                  cl::init(300), cl::cat(sampleCategory));
static cl::opt<std::string> promptOpt("prompt", cl::desc("Text to continue"),
                                      cl::init("\n"), cl::cat(sampleCategory));
static cl::opt<double> temperatureOpt("temperature",
                                      cl::desc("Softmax temperature"),
                                      cl::init(0.8), cl::cat(sampleCategory));
static cl::opt<int64_t>
    topKOpt("top-k", cl::desc("Sample among the K likeliest (0: all)"),
            cl::init(40), cl::cat(sampleCategory));
static cl::opt<uint64_t> seedOpt("seed", cl::desc("Sampling seed"), cl::init(0),
                                 cl::cat(sampleCategory));
static cl::opt<bool> tokenIdsOpt(
    "token-ids",
    cl::desc("Sample token ids, not bytes: --prompt is ids (\"464 318\"), "
             "and the ids generated are printed (a model with its own "
             "tokenizer, e.g. an imported GPT-2)"),
    cl::init(false), cl::cat(sampleCategory));

static int fail(const std::string &message) {
  llvm::errs() << "gptc: error: " << message << "\n";
  return 1;
}

int mlir::gptc::runSample(const std::string &checkpointPath,
                          const DialectRegistry &registry) {
  if (!std::isfinite(temperatureOpt) || temperatureOpt < 0)
    return fail("--temperature takes a finite value >= 0 (0: always the "
                "likeliest byte), got " +
                std::to_string(temperatureOpt.getValue()));
  if (lengthOpt < 0)
    return fail("--length takes a byte count >= 0, got " +
                std::to_string(lengthOpt));
  if (topKOpt < 0)
    return fail("--top-k takes K >= 0 (0: all), got " +
                std::to_string(topKOpt));
  // 1. The checkpoint and the description it carries.
  std::string error;
  auto reader = rt::CheckpointReader::open(checkpointPath, error);
  if (!reader || !reader->verifyAll(error))
    return fail(error);
  const ::gptc::checkpoint::Manifest &ck = reader->manifest();

  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(ck.description(),
                                           checkpointPath + ":description"),
      llvm::SMLoc());
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(sourceMgr, &context);
  if (failed(desc))
    return 1;
  // 2. Compile @logits for one sequence (an ONNX model's for the graph's
  //    batch, whose first row is sampled).
  OwningOpRef<ModuleOp> module;
  if (std::string onnxPath = desc->getOnnxModelPath(); !onnxPath.empty()) {
    OnnxImportOptions onnxOptions;
    if (!getOnnxImportOptions(onnxOptions))
      return 1;
    if (!llvm::sys::fs::exists(onnxPath))
      return fail("'" + checkpointPath + "' was trained from the ONNX model '" +
                  onnxPath + "', which gptc sample reads again: it is gone");
    module = importOnnxLogits(onnxPath, &context, onnxOptions);
    if (!module)
      return 1;
  } else {
    module = importLogits(*desc, &context, 1);
  }
  ::gptc::program::Program program;
  auto cleanup = [](OpPassManager &pm) {
    FrontendPipelineOptions options;
    options.verifyModel = false;
    buildFrontendPipeline(pm, options);
  };
  FailureOr<CompileOptions> options = getCompileOptions();
  if (failed(options))
    return 1;
  options->device = DeviceKind::CPU;
  if (!module || failed(runPasses(*module, *options, cleanup)) ||
      failed(emitProgram(*module, {"logits"}, *options, ProgramCode::Compiled,
                         program)))
    return 1;
  auto exec = rt::Executor::create(program.functions(0), error);
  if (!exec)
    return fail(error);

  // 3. Parameters by name.
  const auto &fn = program.functions(0);
  int64_t logitsVocab = fn.values(fn.outputs(0)).type().shape().empty()
                            ? 0
                            : *fn.values(fn.outputs(0)).type().shape().rbegin();
  std::vector<rt::Tensor> params;
  params.reserve(fn.inputs_size());
  for (int i = 0; i + 1 < fn.inputs_size(); ++i) {
    const auto &v = fn.values(fn.inputs(i));
    std::vector<int64_t> shape(v.type().shape().begin(),
                               v.type().shape().end());
    rt::Tensor t(v.type().dtype(), shape);
    // A vocabulary table padded by the mesh that trained it (tensor
    // parallelism) loads without its padding rows.
    if (!reader->read(v.name(), shape, std::vector<int64_t>(shape.size(), 0), t,
                      error, rt::vocabularyRows(v, shape, logitsVocab)))
      return fail(error);
    params.push_back(std::move(t));
  }
  std::vector<const rt::Tensor *> ptrs;
  for (const rt::Tensor &t : params)
    ptrs.push_back(&t);

  // 4. Bytes (ids 0-255), or with --token-ids any id of the vocabulary.
  int64_t vocab = fn.values(fn.outputs(0)).type().shape().empty()
                      ? 0
                      : *fn.values(fn.outputs(0)).type().shape().rbegin();
  std::vector<int32_t> prompt;
  if (tokenIdsOpt) {
    SmallVector<StringRef> words;
    StringRef(promptOpt).split(words, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef word : words) {
      int64_t id;
      if (word.trim().getAsInteger(10, id) || id < 0 || id >= vocab)
        return fail("--token-ids: the prompt's '" + word.trim().str() +
                    "' is not a token id of the model's vocabulary [0, " +
                    std::to_string(vocab) + ")");
      prompt.push_back(static_cast<int32_t>(id));
    }
    if (prompt.empty())
      return fail("--token-ids needs a --prompt of token ids, e.g. "
                  "--prompt \"464 318\"");
  } else {
    for (unsigned char c : promptOpt.getValue().empty() ? std::string("\n")
                                                        : promptOpt.getValue())
      if (c >= vocab)
        return fail("the prompt's byte " + std::to_string(c) +
                    " is outside the model's vocabulary of " +
                    std::to_string(vocab) +
                    " ids: give token ids with --token-ids");
      else
        prompt.push_back(c);
  }
  std::vector<int32_t> generated;
  if (!rt::sampleTokens(*exec, ptrs, prompt, lengthOpt, temperatureOpt, topKOpt,
                        seedOpt, tokenIdsOpt ? vocab : 256, generated, error))
    return fail(error);
  if (tokenIdsOpt) {
    for (size_t i = 0; i < prompt.size() + generated.size(); ++i)
      llvm::outs() << (i ? " " : "")
                   << (i < prompt.size() ? prompt[i]
                                         : generated[i - prompt.size()]);
  } else {
    llvm::outs() << promptOpt;
    for (int32_t id : generated)
      llvm::outs() << static_cast<char>(id);
  }
  llvm::outs() << "\n";
  return 0;
}
