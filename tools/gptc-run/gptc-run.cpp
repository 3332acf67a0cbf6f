//===- gptc-run.cpp - Compile and run one gptc function --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
//   gptc-run model.mlir --function=forward_backward \
//            --input=a.npy --input=b.npy --output-dir=out/
//
// Lowers the module's functions to the runtime's artifact, runs one of them
// on the CPU with the given inputs and writes each output as
// out/<index>.npy. The reference and finite-difference checks drive the
// compiled code through it.
//
//   gptc-run model.onnx --input=ids.npy ... [--onnx-dim batch=2]
//
// imports an ONNX model instead (docs/Onnx.md), forms kernels and runs its
// function with the initializers as the parameters: --input gives the
// graph's inputs only (int64 ids narrowed to the i32 the function takes).
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Frontend/InputFile.h"
#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/InitAll.h"
#include "gptc/Runtime/Communicator.h"
#ifdef GPTC_HAVE_NCCL
#include "gptc/Runtime/CUDA/NcclCommunicator.h"
#endif
#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/Npy.h"
#include "gptc/Target/CPU/CompileProgram.h"
#include "gptc/Target/ExportProgram.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <google/protobuf/text_format.h>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("gptc-run options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<module.mlir>"),
                                      cl::init("-"), cl::cat(category));
static cl::opt<std::string> functionName("function",
                                         cl::desc("The function to run"),
                                         cl::init("forward"),
                                         cl::cat(category));
static cl::list<std::string> inputs("input", cl::desc("An input, as .npy"),
                                    cl::cat(category));
static cl::opt<std::string> outputDir("output-dir",
                                      cl::desc("Where to write <i>.npy"),
                                      cl::init("."), cl::cat(category));
static cl::opt<std::string>
    emitProgram("emit-program",
                cl::desc("Also write the compiled artifact (binary)"),
                cl::init(""), cl::cat(category));

static cl::opt<bool> useMpi(
    "mpi",
    cl::desc("Run as one rank of an MPI job (mpirun -np N gptc-run --mpi "
             "...); '%r' in --input and --output-dir becomes the rank"),
    cl::init(false), cl::cat(category));

static cl::opt<bool> useNccl(
    "nccl",
    cl::desc("With --mpi: run the collectives over NCCL on this rank's GPU "
             "(MPI only bootstraps); needs a build with NCCL"),
    cl::init(false), cl::cat(category));

static cl::list<std::string>
    onnxDims("onnx-dim", cl::desc("NAME=N: an ONNX model's symbolic dimension"),
             cl::cat(category));

static cl::opt<bool> printProgram(
    "print-program",
    cl::desc("Print the compiled artifact in protobuf text format and exit"),
    cl::init(false), cl::cat(category));

static int fail(const std::string &message) {
  // One write, so that the lines of several ranks do not interleave.
  llvm::errs() << ("gptc-run: " + message + "\n");
  return 1;
}

/// Replaces every "%r" in `path` with `rank`.
static std::string withRank(std::string path, int rank) {
  for (size_t at = path.find("%r"); at != std::string::npos;
       at = path.find("%r", at))
    path.replace(at, 2, std::to_string(rank));
  return path;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  mlir::gptc::hideUnrelatedCommandLineOptions(&category);
  cl::ParseCommandLineOptions(argc, argv,
                              "gptc-run: run a compiled function\n");

  DialectRegistry registry;
  mlir::gptc::registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  auto buffer = openInputFile(inputFile, &error);
  if (!buffer)
    return fail(error);
  // An ONNX model: imported, its initializers the leading arguments.
  std::vector<::gptc::runtime::Tensor> params;
  OwningOpRef<ModuleOp> module;
  if (StringRef(inputFile).ends_with(".onnx")) {
    mlir::gptc::OnnxImportOptions options;
    for (const std::string &dim : onnxDims)
      if (!mlir::gptc::parseOnnxDim(dim, options, error))
        return fail(error);
    FailureOr<mlir::gptc::OnnxImport> imported = mlir::gptc::importOnnxModel(
        buffer->getBuffer(), inputFile, &context, options);
    if (failed(imported))
      return 1;
    for (const mlir::gptc::OnnxTensorData &p : imported->parameters) {
      if (p.onnxType != 1) // FLOAT
        return fail("initializer '" + p.name + "' is not float32");
      ::gptc::runtime::Tensor t(::gptc::program::F32, p.shape);
      if (!p.bytes.empty())
        std::memcpy(t.data<float>(), p.bytes.data(), p.bytes.size());
      params.push_back(std::move(t));
    }
    module = std::move(imported->module);
    PassManager pm(&context);
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    pm.nest<func::FuncOp>().addPass(mlir::gptc::createGptcFormKernelsPass());
    if (failed(pm.run(*module)))
      return 1;
  } else {
    sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1;
  }

  ::gptc::program::Program program;
  if (failed(mlir::gptc::compileProgram(*module, {}, program)))
    return 1;
  if (!emitProgram.empty()) {
    auto out = mlir::gptc::OutputFile::open(emitProgram, error);
    if (!out)
      return fail(error);
    std::string bytes;
    program.SerializeToString(&bytes);
    out->os() << bytes;
    if (!out->finish(error))
      return fail(error);
  }

  if (printProgram) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(program, &text);
    llvm::outs() << text;
    return 0;
  }

  if (program.format_version() != ::gptc::runtime::kProgramFormatVersion)
    return fail("the program has format version " +
                std::to_string(program.format_version()) +
                "; this runtime reads " +
                std::to_string(::gptc::runtime::kProgramFormatVersion));
  const ::gptc::program::Function *function = nullptr;
  for (const auto &f : program.functions())
    if (f.name() == functionName)
      function = &f;
  if (!function)
    return fail("no function '" + functionName + "'");
  std::unique_ptr<::gptc::runtime::KernelLibrary> kernels;
  if (!program.kernel_library().empty()) {
    kernels =
        ::gptc::runtime::KernelLibrary::load(program.kernel_library(), error);
    if (!kernels)
      return fail(error);
  }
  auto exec =
      ::gptc::runtime::Executor::create(*function, error, kernels.get());
  if (!exec)
    return fail(error);
  std::unique_ptr<::gptc::runtime::Communicator> comm;
  int rank = 0;
  std::unique_ptr<::gptc::runtime::Communicator> nccl;
  if (useNccl && !useMpi)
    return fail("--nccl needs --mpi (MPI bootstraps the NCCL groups)");
  if (useMpi) {
    comm = ::gptc::runtime::createMpiCommunicator(&argc, &argv);
    rank = comm->rank();
    exec->setCommunicator(comm.get());
  }
  if (useNccl) {
#ifdef GPTC_HAVE_NCCL
    nccl = ::gptc::runtime::createNcclCommunicator(*comm, error);
    if (!nccl)
      return fail(error);
    exec->setCommunicator(nccl.get());
#else
    return fail("--nccl: this gptc-run was built without NCCL");
#endif
  }
  std::string outDir = withRank(outputDir, rank);
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    return fail("cannot create '" + outDir + "': " + ec.message());

  std::vector<::gptc::runtime::Tensor> in(inputs.size());
  std::vector<const ::gptc::runtime::Tensor *> ptrs;
  for (const ::gptc::runtime::Tensor &p : params)
    ptrs.push_back(&p);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!::gptc::runtime::readNpy(withRank(inputs[i], rank), in[i], error))
      return fail(error);
    // An ONNX model's int64 ids: narrowed to the i32 its function takes.
    size_t arg = params.size() + i;
    if (!params.empty() || StringRef(inputFile).ends_with(".onnx")) {
      if (in[i].dtype == ::gptc::program::I64 &&
          arg < size_t(function->inputs_size()) &&
          function->values(function->inputs(arg)).type().dtype() ==
              ::gptc::program::I32) {
        ::gptc::runtime::Tensor narrow(::gptc::program::I32, in[i].shape);
        for (int64_t k = 0; k < in[i].numElements(); ++k) {
          int64_t v = in[i].data<int64_t>()[k];
          if (v != int32_t(v))
            return fail(inputs[i] + ": an id outside 32 bits");
          narrow.data<int32_t>()[k] = int32_t(v);
        }
        in[i] = std::move(narrow);
      }
    }
    ptrs.push_back(&in[i]);
  }
  std::vector<::gptc::runtime::Tensor> outputs;
  if (!exec->run(ptrs, outputs, error))
    return fail(error);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!::gptc::runtime::writeNpy(outDir + "/" + std::to_string(i) + ".npy",
                                   outputs[i], error))
      return fail(error);
  return 0;
}
