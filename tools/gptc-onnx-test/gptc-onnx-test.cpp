//===- gptc-onnx-test.cpp - ONNX backend node tests -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
//   gptc-onnx-test /usr/share/libonnx-testdata/data/node [--filter=REGEX]
//                  [--verbose]
//
// Runs ONNX's own backend test cases (a directory per case: model.onnx and
// test_data_set_<n>/{input,output}_<k>.pb) through gptc: import, kernel
// formation, CPU code generation, the runtime; compares every output with
// ONNX's tolerances (rtol 1e-3, atol 1e-7). A case whose graph uses an op
// the importer does not support is not run. Prints one line per case that
// does not pass (every case with --verbose) and the summary
//
//   gptc-onnx-test: 212 cases of supported ops: 190 passed, 0 failed, 22
//   rejected by the importer; 720 cases of other ops not run
//
// "rejected" is a clean diagnostic (an element type, attribute or dynamic
// shape gptc does not support); "failed" is a wrong result, a runtime error
// or a compiler error after import. Exits 1 when a case failed.
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/Transforms/Passes.h"
#include "gptc/Frontend/OnnxImporter.h"
#include "gptc/InitAll.h"
#include "gptc/Runtime/CPU/KernelLibrary.h"
#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/ProgramFormat.h"
#include "gptc/Target/CPU/CompileProgram.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>

using namespace mlir;
namespace cl = llvm::cl;
namespace rt = ::gptc::runtime;
namespace pg = ::gptc::program;

static cl::OptionCategory category("gptc-onnx-test options");
static cl::list<std::string> roots(cl::Positional, cl::OneOrMore,
                                   cl::desc("<node test directory>..."),
                                   cl::cat(category));
static cl::opt<std::string> filter("filter",
                                   cl::desc("Only the cases whose name "
                                            "matches this regular expression"),
                                   cl::init(""), cl::cat(category));
static cl::list<std::string> expectedFailures(
    "expect-fail",
    cl::desc("A case known to fail, with the reason in the test that names "
             "it; passing it is an error"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<bool> verbose("verbose", cl::desc("A line for every case"),
                             cl::init(false), cl::cat(category));

namespace {
enum class Outcome { Passed, Failed, Rejected, NotRun };

std::optional<std::string> readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().str();
}

} // namespace

/// `data` as the runtime tensor the function's argument `type` expects.
static bool toRuntime(const mlir::gptc::OnnxTensorData &data,
                      RankedTensorType type, rt::Tensor &out,
                      std::string &error) {
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  if (shape != data.shape) {
    error = "input '" + data.name + "' has another shape than the model's";
    return false;
  }
  int64_t n = data.numElements();
  Type element = type.getElementType();
  const char *src = data.bytes.data();
  if (element.isF32() && data.onnxType == onnx::TensorProto::FLOAT) {
    out = rt::Tensor(pg::F32, shape);
    if (n)
      std::memcpy(out.data<float>(), src, n * 4);
  } else if (element.isF64() && data.onnxType == onnx::TensorProto::DOUBLE) {
    out = rt::Tensor(pg::F64, shape);
    if (n)
      std::memcpy(out.data<double>(), src, n * 8);
  } else if ((element.isF16() && data.onnxType == onnx::TensorProto::FLOAT16) ||
             (element.isBF16() &&
              (data.onnxType == onnx::TensorProto::BFLOAT16 ||
               data.onnxType == onnx::TensorProto::UINT16))) {
    // ONNX's test data stores bfloat16 as its UINT16 bits.
    out = rt::Tensor(element.isF16() ? pg::F16 : pg::BF16, shape);
    if (n)
      std::memcpy(out.data<uint16_t>(), src, n * 2);
  } else if (element.isInteger(32) &&
             (data.onnxType == onnx::TensorProto::INT64 ||
              data.onnxType == onnx::TensorProto::INT32)) {
    out = rt::Tensor(pg::I32, shape);
    int32_t *dst = out.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      if (data.onnxType == onnx::TensorProto::INT64) {
        std::memcpy(&v, src + 8 * i, 8);
      } else {
        int32_t w;
        std::memcpy(&w, src + 4 * i, 4);
        v = w;
      }
      if (v != int32_t(v)) {
        error = "input '" + data.name + "' holds an id outside 32 bits";
        return false;
      }
      dst[i] = int32_t(v);
    }
  } else {
    error = "input '" + data.name +
            "' has an element type the runtime does "
            "not take for this argument";
    return false;
  }
  return true;
}

static double halfToDouble(uint16_t bits, bool bf16) {
  return llvm::APFloat(bf16 ? llvm::APFloat::BFloat()
                            : llvm::APFloat::IEEEhalf(),
                       llvm::APInt(16, bits))
      .convertToDouble();
}

/// Element `i` of `t` as a double, for comparison.
static std::optional<double> elementOf(const rt::Tensor &t, int64_t i) {
  switch (t.dtype) {
  case pg::F16:
  case pg::BF16:
    return halfToDouble(t.data<uint16_t>()[i], t.dtype == pg::BF16);
  case pg::F32:
    return t.data<float>()[i];
  case pg::F64:
    return t.data<double>()[i];
  case pg::I32:
    return t.data<int32_t>()[i];
  case pg::I64:
    return double(t.data<int64_t>()[i]);
  default:
    return std::nullopt;
  }
}

static std::optional<double> elementOf(const mlir::gptc::OnnxTensorData &d,
                                       int64_t i) {
  const char *p = d.bytes.data();
  switch (d.onnxType) {
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return halfToDouble(v, d.onnxType == onnx::TensorProto::BFLOAT16);
  }
  case onnx::TensorProto::FLOAT: {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  case onnx::TensorProto::DOUBLE: {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    return v;
  }
  case onnx::TensorProto::INT64: {
    int64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return double(v);
  }
  case onnx::TensorProto::INT32: {
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  default:
    return std::nullopt;
  }
}

/// Compares an output with the expected one (numpy.testing.assert_allclose
/// with ONNX's rtol 1e-3, atol 1e-7; NaN equals NaN).
static bool compare(const rt::Tensor &got, mlir::gptc::OnnxTensorData want,
                    std::string &why) {
  // ONNX's test data stores bfloat16 as its UINT16 bits.
  if (got.dtype == pg::BF16 && want.onnxType == onnx::TensorProto::UINT16)
    want.onnxType = onnx::TensorProto::BFLOAT16;
  if (got.shape != want.shape) {
    why = "output '" + want.name + "' has another shape";
    return false;
  }
  int64_t n = want.numElements();
  for (int64_t i = 0; i < n; ++i) {
    std::optional<double> g = elementOf(got, i), w = elementOf(want, i);
    if (!g || !w) {
      why = "output '" + want.name +
            "' has an element type the comparison "
            "does not read";
      return false;
    }
    if ((std::isnan(*g) && std::isnan(*w)) || *g == *w)
      continue;
    if (!(std::fabs(*g - *w) <= 1e-7 + 1e-3 * std::fabs(*w))) {
      why = "output '" + want.name + "' element " + std::to_string(i) + " is " +
            std::to_string(*g) + ", expected " + std::to_string(*w);
      return false;
    }
  }
  return true;
}

/// Imports, compiles and runs data set `set` of a case.
static Outcome runDataSet(const std::string &dir, const std::string &bytes,
                          const onnx::ModelProto &model, const std::string &set,
                          std::string &message) {
  // The graph's inputs (initializers aside) in order: input_<k>.pb each.
  // Integer and bool inputs are bound at import, as shape operands, axes
  // and indices must be known to compile static shapes; float inputs are
  // the function's arguments.
  llvm::StringSet<> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  mlir::gptc::OnnxImportOptions options;
  std::vector<mlir::gptc::OnnxTensorData> runtimeInputs;
  int k = 0;
  for (const auto &in : model.graph().input()) {
    if (initializers.contains(in.name()))
      continue;
    std::string path = set + "/input_" + std::to_string(k++) + ".pb";
    std::optional<std::string> pb = readFile(path);
    mlir::gptc::OnnxTensorData data;
    if (!pb || !mlir::gptc::parseOnnxTensor(*pb, data, message)) {
      message = path + ": " + (pb ? message : "missing");
      return pb ? Outcome::Rejected : Outcome::Failed;
    }
    int32_t t = in.type().tensor_type().elem_type();
    bool isFloat =
        t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE ||
        t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16;
    if (isFloat)
      runtimeInputs.push_back(std::move(data));
    else
      options.knownInputs[in.name()] = std::move(data);
  }

  DialectRegistry registry;
  mlir::gptc::registerAllDialects(registry);
  MLIRContext context(registry);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  FailureOr<mlir::gptc::OnnxImport> imported = mlir::gptc::importOnnxModel(
      bytes, dir + "/model.onnx", &context, options);
  if (failed(imported)) {
    message = diagnostics;
    return Outcome::Rejected;
  }
  ModuleOp module = *imported->module;
  auto func = *module.getOps<func::FuncOp>().begin();
  SmallVector<Type> argTypes(func.getArgumentTypes());
  PassManager pm(&context);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.nest<func::FuncOp>().addPass(mlir::gptc::createGptcFormKernelsPass());
  if (failed(pm.run(module))) {
    message = "compiler: " + diagnostics;
    return Outcome::Failed;
  }
  pg::Program program;
  if (failed(mlir::gptc::compileProgram(module, {}, program))) {
    message = "compiler: " + diagnostics;
    return Outcome::Failed;
  }
  std::string error;
  std::unique_ptr<rt::KernelLibrary> kernels;
  if (!program.kernel_library().empty()) {
    kernels = rt::KernelLibrary::load(program.kernel_library(), error);
    if (!kernels) {
      message = error;
      return Outcome::Failed;
    }
  }
  auto exec = rt::Executor::create(program.functions(0), error, kernels.get());
  if (!exec) {
    message = error;
    return Outcome::Failed;
  }
  std::vector<mlir::gptc::OnnxTensorData> args = imported->parameters;
  for (auto &in : runtimeInputs)
    args.push_back(std::move(in));
  if (args.size() != argTypes.size()) {
    message = "the function takes " + std::to_string(argTypes.size()) +
              " arguments, the case gives " + std::to_string(args.size());
    return Outcome::Failed;
  }
  std::vector<rt::Tensor> in(args.size());
  std::vector<const rt::Tensor *> ptrs;
  for (size_t a = 0; a < args.size(); ++a) {
    if (!toRuntime(args[a], cast<RankedTensorType>(argTypes[a]), in[a],
                   message))
      return Outcome::Rejected;
    ptrs.push_back(&in[a]);
  }
  std::vector<rt::Tensor> out;
  if (!exec->run(ptrs, out, error)) {
    message = "runtime: " + error;
    return Outcome::Failed;
  }
  for (size_t o = 0; o < out.size(); ++o) {
    std::string path = set + "/output_" + std::to_string(o) + ".pb";
    std::optional<std::string> pb = readFile(path);
    mlir::gptc::OnnxTensorData want;
    if (!pb || !mlir::gptc::parseOnnxTensor(*pb, want, message)) {
      message = path + ": " + (pb ? message : "missing");
      return Outcome::Failed;
    }
    if (!compare(out[o], want, message))
      return Outcome::Failed;
  }
  return Outcome::Passed;
}

/// Runs every data set of one case; `message` says why it did not pass.
static Outcome runCase(const std::string &dir, const llvm::StringSet<> &ops,
                       std::string &message) {
  std::optional<std::string> bytes = readFile(dir + "/model.onnx");
  if (!bytes) {
    message = "no model.onnx";
    return Outcome::Failed;
  }
  // Which ops the graph uses: cases of other ops are not run.
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) {
    message = "model.onnx does not parse";
    return Outcome::Failed;
  }
  for (const auto &node : model.graph().node())
    if (!ops.contains(node.op_type())) {
      message = "uses " + node.op_type();
      return Outcome::NotRun;
    }
  int sets = 0;
  for (int s = 0;; ++s) {
    std::string set = dir + "/test_data_set_" + std::to_string(s);
    if (!llvm::sys::fs::is_directory(set))
      break;
    ++sets;
    Outcome o = runDataSet(dir, *bytes, model, set, message);
    if (o != Outcome::Passed)
      return o;
  }
  if (!sets) {
    message = "no test_data_set_0";
    return Outcome::Failed;
  }
  return Outcome::Passed;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  mlir::gptc::hideUnrelatedCommandLineOptions(&category);
  cl::ParseCommandLineOptions(argc, argv,
                              "gptc-onnx-test: ONNX node tests through gptc\n");
  llvm::StringSet<> ops;
  for (const std::string &op : mlir::gptc::supportedOnnxOps())
    ops.insert(op);
  llvm::Regex re(filter);
  std::string reError;
  if (!filter.empty() && !re.isValid(reError)) {
    llvm::errs() << "gptc-onnx-test: --filter: " << reError << "\n";
    return 2;
  }
  std::vector<std::string> cases;
  for (const std::string &root : roots) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(root, ec), end; it != end && !ec;
         it.increment(ec))
      if (llvm::sys::fs::exists(it->path() + "/model.onnx"))
        cases.push_back(it->path());
    if (ec) {
      llvm::errs() << "gptc-onnx-test: " << root << ": " << ec.message()
                   << "\n";
      return 2;
    }
  }
  llvm::sort(cases);
  llvm::StringSet<> xfail;
  for (const std::string &name : expectedFailures)
    xfail.insert(name);
  int counts[4] = {0, 0, 0, 0}, expected = 0, unexpectedPasses = 0;
  for (const std::string &dir : cases) {
    std::string name = llvm::sys::path::filename(dir).str();
    if (!filter.empty() && !re.match(name))
      continue;
    std::string message;
    Outcome o = runCase(dir, ops, message);
    if (xfail.contains(name)) {
      if (o == Outcome::Failed) {
        ++expected;
        if (verbose)
          llvm::outs() << "XFAIL " << name << ": " << message << "\n";
        continue;
      }
      ++unexpectedPasses;
      llvm::outs() << "XPASS " << name << " (listed in --expect-fail)\n";
    }
    ++counts[int(o)];
    static const char *labels[] = {"PASS", "FAIL", "REJECTED", "NOT RUN"};
    if (o == Outcome::Failed || o == Outcome::Rejected ||
        (verbose && o != Outcome::NotRun))
      llvm::outs() << labels[int(o)] << " " << name
                   << (message.empty() ? "" : ": " + message) << "\n";
  }
  int supported = counts[0] + counts[1] + counts[2] + expected;
  llvm::outs() << "gptc-onnx-test: " << supported
               << " cases of supported ops: " << counts[0] << " passed, "
               << counts[1] << " failed, " << expected << " expected failures, "
               << counts[2] << " rejected by the importer; " << counts[3]
               << " cases of other ops not run\n";
  return counts[1] || unexpectedPasses ? 1 : 0;
}
