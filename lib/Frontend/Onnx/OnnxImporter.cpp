//===- OnnxImporter.cpp - ONNX models to gptc IR ---------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One pass over the graph's nodes in order (ONNX requires topological
// order). Every value is either known at import time (initializers,
// Constant nodes and the shape arithmetic on them, evaluated here as
// torch-mlir's and onnx-mlir's importers fold it) or an SSA value of the
// function being built. A known value becomes IR only where an op that
// runs needs it: a float initializer as a parameter argument, anything else
// as a gptc.constant. Broadcasting is made explicit (gptc.reshape +
// gptc.broadcast), as gptc's ops have none.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/OnnxImporter.h"

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

using namespace mlir;
using namespace mlir::gptc;

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

namespace {
using DT = onnx::TensorProto::DataType;

/// The width in bytes of ONNX element type `t`, 0 when gptc reads none.
int64_t widthOf(int32_t t) {
  switch (t) {
  case DT::TensorProto_DataType_UINT8:
  case DT::TensorProto_DataType_INT8:
  case DT::TensorProto_DataType_BOOL:
    return 1;
  case DT::TensorProto_DataType_UINT16:
  case DT::TensorProto_DataType_INT16:
  case DT::TensorProto_DataType_FLOAT16:
  case DT::TensorProto_DataType_BFLOAT16:
    return 2;
  case DT::TensorProto_DataType_FLOAT:
  case DT::TensorProto_DataType_INT32:
  case DT::TensorProto_DataType_UINT32:
    return 4;
  case DT::TensorProto_DataType_DOUBLE:
  case DT::TensorProto_DataType_INT64:
  case DT::TensorProto_DataType_UINT64:
    return 8;
  default:
    return 0;
  }
}

bool isFloatType(int32_t t) {
  return t == DT::TensorProto_DataType_FLOAT ||
         t == DT::TensorProto_DataType_DOUBLE ||
         t == DT::TensorProto_DataType_FLOAT16 ||
         t == DT::TensorProto_DataType_BFLOAT16;
}

std::string typeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t))
    return onnx::TensorProto::DataType_Name(static_cast<DT>(t));
  return "type " + std::to_string(t);
}

/// The element count of `shape`, or -1 when negative or above 2^48.
int64_t countOf(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 48) / d))
      return -1;
    n *= d;
  }
  return n;
}
} // namespace

int64_t OnnxTensorData::numElements() const { return countOf(shape); }

/// Where an external tensor's bytes are: `dir`/location, from offset, for
/// length bytes (the rest of the file by default). ONNX's rule: the
/// location is relative to the model's directory and stays inside it.
static bool readExternalData(const onnx::TensorProto &proto,
                             llvm::StringRef dir, int64_t expected,
                             const std::string &what, std::string &bytes,
                             std::string &error) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &kv : proto.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (llvm::StringRef(kv.value()).getAsInteger(10, v) || v < 0) {
        error = what + "'s external data has " + kv.key() + " '" + kv.value() +
                "', not a byte count";
        return false;
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
    // "checksum" (a SHA-1 of the bytes) and other keys are not checked.
  }
  if (location.empty()) {
    error = what + " keeps its data in an external file but names none "
                   "(no 'location' in its external_data)";
    return false;
  }
  llvm::SmallString<256> path(location);
  bool escapes = llvm::sys::path::is_absolute(location) ||
                 llvm::any_of(llvm::make_range(llvm::sys::path::begin(path),
                                               llvm::sys::path::end(path)),
                              [](llvm::StringRef c) { return c == ".."; });
  if (escapes) {
    error = what + " keeps its data in '" + location +
            "', outside the model's directory (ONNX's external data is a "
            "path relative to the model, without '..')";
    return false;
  }
  path = dir;
  llvm::sys::path::append(path, location);
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(path, size)) {
    error = what + " keeps its data in '" + std::string(path) +
            "', which cannot be read (the external data file belongs beside "
            "the model)";
    return false;
  }
  if (length < 0)
    length = offset <= int64_t(size) ? int64_t(size) - offset : 0;
  if (uint64_t(offset) > size || uint64_t(length) > size - offset) {
    error = what + " reads bytes " + std::to_string(offset) + " to " +
            std::to_string(offset + length) + " of '" + std::string(path) +
            "', which has " + std::to_string(size);
    return false;
  }
  if (length != expected) {
    error = what + " has " + std::to_string(length) + " bytes in '" +
            std::string(path) + "' where its shape and type take " +
            std::to_string(expected);
    return false;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> slice =
      llvm::MemoryBuffer::getFileSlice(path, length, offset,
                                       /*IsVolatile=*/false);
  if (!slice) {
    error = what + ": reading '" + std::string(path) +
            "': " + slice.getError().message();
    return false;
  }
  bytes = (*slice)->getBuffer().str();
  return true;
}

/// `externalDir`: the directory external data is read from; none (the
/// default) refuses external data.
static bool decodeTensor(const onnx::TensorProto &proto, OnnxTensorData &out,
                         std::string &error,
                         std::optional<llvm::StringRef> externalDir = {}) {
  out.name = proto.name();
  out.onnxType = proto.data_type();
  out.shape.assign(proto.dims().begin(), proto.dims().end());
  std::string what = "tensor '" + proto.name() + "'";
  int64_t n = countOf(out.shape);
  if (n < 0) {
    error = what + " has an invalid shape";
    return false;
  }
  int64_t width = widthOf(out.onnxType);
  if (!width) {
    error = what + " has element type " + typeName(out.onnxType) +
            ", which gptc does not read";
    return false;
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!externalDir) {
      error = what + " keeps its data in an external file, which is not "
                     "read here (a model not read from a file)";
      return false;
    }
    return readExternalData(proto, *externalDir, n * width, what, out.bytes,
                            error);
  }
  auto wrongCount = [&](int64_t have) {
    error =
        what + " has " + std::to_string(have) + " elements for shape [" +
        llvm::join(llvm::map_range(out.shape,
                                   [](int64_t d) { return std::to_string(d); }),
                   ", ") +
        "]";
    return false;
  };
  if (proto.has_raw_data()) {
    if (int64_t(proto.raw_data().size()) != n * width)
      return wrongCount(int64_t(proto.raw_data().size()) / width);
    out.bytes = proto.raw_data();
    return true;
  }
  // The typed field's count is checked before anything is allocated: a
  // malformed shape must not size an allocation.
  auto copyFrom = [&](const auto &field) {
    if (int64_t(field.size()) != n)
      return wrongCount(field.size());
    out.bytes.assign(n * width, '\0');
    char *dst = out.bytes.data();
    for (int64_t i = 0; i < n; ++i) {
      auto v = field.Get(i);
      if (width == sizeof(v)) {
        std::memcpy(dst + i * width, &v, width);
      } else { // int32_data holds narrower types, one per entry.
        uint64_t bits = static_cast<uint64_t>(v);
        std::memcpy(dst + i * width, &bits, width);
      }
    }
    return true;
  };
  switch (out.onnxType) {
  case DT::TensorProto_DataType_FLOAT:
    return copyFrom(proto.float_data());
  case DT::TensorProto_DataType_DOUBLE:
    return copyFrom(proto.double_data());
  case DT::TensorProto_DataType_INT64:
    return copyFrom(proto.int64_data());
  case DT::TensorProto_DataType_UINT32:
  case DT::TensorProto_DataType_UINT64:
    return copyFrom(proto.uint64_data());
  default:
    return copyFrom(proto.int32_data());
  }
}

bool mlir::gptc::parseOnnxTensor(llvm::StringRef bytes, OnnxTensorData &tensor,
                                 std::string &error) {
  onnx::TensorProto proto;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), int(bytes.size()))) {
    error = "not a serialized ONNX TensorProto (malformed or truncated)";
    return false;
  }
  return decodeTensor(proto, tensor, error);
}

//===----------------------------------------------------------------------===//
// Values known at import time
//===----------------------------------------------------------------------===//

namespace {
/// `v` truncated toward zero, saturated to int64 (NaN is 0): ONNX leaves
/// out-of-range conversions undefined; gptc must not.
int64_t toInt(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return int64_t(std::trunc(v));
}

/// A tensor the importer knows: float elements in `f` (as double), integer
/// and bool elements in `i`.
struct Known {
  int32_t onnxType = DT::TensorProto_DataType_FLOAT;
  SmallVector<int64_t> shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  bool isFloat() const { return isFloatType(onnxType); }
  int64_t size() const { return countOf(shape); }
  double at(int64_t k) const { return isFloat() ? f[k] : double(i[k]); }
  int64_t intAt(int64_t k) const;
  static Known ints(ArrayRef<int64_t> shape, std::vector<int64_t> values,
                    int32_t type = DT::TensorProto_DataType_INT64) {
    Known k;
    k.onnxType = type;
    k.shape.assign(shape.begin(), shape.end());
    k.i = std::move(values);
    return k;
  }
  static Known floats(ArrayRef<int64_t> shape, std::vector<double> values,
                      int32_t type) {
    Known k;
    k.onnxType = type;
    k.shape.assign(shape.begin(), shape.end());
    k.f = std::move(values);
    return k;
  }
  /// An empty tensor of this one's type and `newShape`, sized.
  Known like(ArrayRef<int64_t> newShape) const {
    Known k;
    k.onnxType = onnxType;
    k.shape.assign(newShape.begin(), newShape.end());
    if (isFloat())
      k.f.resize(k.size());
    else
      k.i.resize(k.size());
    return k;
  }
  /// Element `src` of `from` (of either kind: a malformed graph may mix
  /// them) into element `dst`.
  void copyElement(const Known &from, int64_t src, int64_t dst) {
    if (isFloat())
      f[dst] = from.at(src);
    else
      i[dst] = from.intAt(src);
  }
};

int64_t Known::intAt(int64_t k) const { return isFloat() ? toInt(f[k]) : i[k]; }

Known toKnown(const OnnxTensorData &data) {
  Known k;
  k.onnxType = data.onnxType;
  k.shape.assign(data.shape.begin(), data.shape.end());
  int64_t n = data.numElements();
  const char *p = data.bytes.data();
  auto read = [&](auto zero, int64_t idx) {
    decltype(zero) v;
    std::memcpy(&v, p + idx * sizeof(v), sizeof(v));
    return v;
  };
  for (int64_t idx = 0; idx < n; ++idx) {
    switch (data.onnxType) {
    case DT::TensorProto_DataType_FLOAT:
      k.f.push_back(read(float(), idx));
      break;
    case DT::TensorProto_DataType_DOUBLE:
      k.f.push_back(read(double(), idx));
      break;
    case DT::TensorProto_DataType_FLOAT16:
    case DT::TensorProto_DataType_BFLOAT16: {
      uint16_t bits = read(uint16_t(), idx);
      const llvm::fltSemantics &sem =
          data.onnxType == DT::TensorProto_DataType_FLOAT16
              ? llvm::APFloat::IEEEhalf()
              : llvm::APFloat::BFloat();
      k.f.push_back(llvm::APFloat(sem, llvm::APInt(16, bits)).convertToFloat());
      break;
    }
    case DT::TensorProto_DataType_INT64:
      k.i.push_back(read(int64_t(), idx));
      break;
    case DT::TensorProto_DataType_UINT64:
      k.i.push_back(int64_t(read(uint64_t(), idx)));
      break;
    case DT::TensorProto_DataType_INT32:
      k.i.push_back(read(int32_t(), idx));
      break;
    case DT::TensorProto_DataType_UINT32:
      k.i.push_back(read(uint32_t(), idx));
      break;
    case DT::TensorProto_DataType_INT16:
      k.i.push_back(read(int16_t(), idx));
      break;
    case DT::TensorProto_DataType_UINT16:
      k.i.push_back(read(uint16_t(), idx));
      break;
    case DT::TensorProto_DataType_INT8:
      k.i.push_back(read(int8_t(), idx));
      break;
    default: // UINT8, BOOL
      k.i.push_back(read(uint8_t(), idx));
      break;
    }
  }
  return k;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// NumPy's broadcast of two shapes, or nullopt.
std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  SmallVector<int64_t> out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t x = k < r - a.size() ? 1 : a[k - (r - a.size())];
    int64_t y = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    out[k] = x == 1 ? y : x;
  }
  return out;
}

/// For each element of `out` (a broadcast of `in`), the index into `in`.
std::vector<int64_t> broadcastIndices(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> out) {
  int64_t n = countOf(out);
  std::vector<int64_t> idx(n);
  SmallVector<int64_t> inStrides = stridesOf(in);
  size_t lead = out.size() - in.size();
  SmallVector<int64_t> pos(out.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] != 1)
        src += pos[d + lead] * inStrides[d];
    idx[e] = src;
    for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) {
      if (++pos[d] < out[d])
        break;
      pos[d] = 0;
    }
  }
  return idx;
}
} // namespace

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace {
struct Entry {
  Value ir;
  std::optional<Known> known;
  /// A float initializer: a parameter argument when it reaches IR.
  bool parameter = false;
  const OnnxTensorData *data = nullptr;
  /// A known value computed from a parameter: where it must become IR, its
  /// node is converted after all (`producer`, at `producerIndex`), so that
  /// the parameter stays an argument that training updates.
  bool fromParameter = false;
  const onnx::NodeProto *producer = nullptr;
  int producerIndex = 0;
  /// A sequence of tensors (SplitToSequence's), which SequenceAt reads.
  std::optional<SmallVector<Value>> sequence;
  /// IsNaN of a value computed at run time: gptc has no bool tensors, so
  /// only Where reads it (the guard `Where(IsNaN(p), 0, p)`).
  Value nanTestOf;
};

/// The opsets gptc reads. What changed after 17 for the ops of the table:
/// ReduceMean's axes became an input (18), Split gained num_outputs (18),
/// Gelu is an op (20); the rest widened types (float8, int4, float4, and
/// bfloat16 in more ops). A tensor of a type gptc does not read is refused
/// naming the tensor and its type (a number for the types newer than
/// Debian's ONNX 1.12 schema).
constexpr int64_t kMinOpset = 13, kMaxOpset = 23;

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef fileName,
           const OnnxImportOptions &options)
      : ctx(ctx), b(ctx), fileName(fileName.str()), options(options) {}

  FailureOr<OnnxImport> run(const onnx::ModelProto &model);

private:
  /// Where external data is read from: the model's directory.
  std::optional<StringRef> externalDir() const {
    if (!options.readExternalData)
      return std::nullopt;
    return llvm::sys::path::parent_path(fileName);
  }

  using Node = onnx::NodeProto;

  // Diagnostics.
  /// An error at the current node, named with its op type.
  InFlightDiagnostic error(const Twine &message) {
    InFlightDiagnostic d = emitError(loc);
    if (node)
      d << "node '" << label << "' (" << node->op_type() << "): ";
    d << message;
    return d;
  }
  LogicalResult unsupported(const Twine &what) {
    return error(what), failure();
  }

  // Attributes.
  const onnx::AttributeProto *attr(StringRef name) const {
    for (const auto &a : node->attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(StringRef name, int64_t dflt) const {
    const auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  double floatAttr(StringRef name, double dflt) const {
    const auto *a = attr(name);
    return a ? a->f() : dflt;
  }
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) const {
    const auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }

  // Values.
  StringRef input(int k) const {
    return k < node->input_size() ? StringRef(node->input(k)) : StringRef();
  }
  bool hasInput(int k) const { return !input(k).empty(); }
  FailureOr<Entry *> lookup(StringRef name) {
    auto it = values.find(name);
    if (it == values.end()) {
      error("node reads '") << name
                            << "', which no earlier node, input or "
                               "initializer defines";
      return failure();
    }
    return &it->second;
  }
  const Known *known(int k) {
    if (!hasInput(k))
      return nullptr;
    auto it = values.find(input(k));
    return it == values.end() || !it->second.known ? nullptr
                                                   : &*it->second.known;
  }
  FailureOr<Value> ir(int k);
  FailureOr<Value> materialize(StringRef name, Entry &entry);
  FailureOr<Type> elementType(int32_t onnxType, StringRef what);
  /// Output `k` of the node is `v` (an output the node does not list is
  /// not needed by anything).
  void define(int k, Value v) {
    if (k < node->output_size())
      values[node->output(k)].ir = v;
  }
  void defineKnown(int k, Known v) {
    if (k >= node->output_size())
      return;
    Entry e;
    e.known = std::move(v);
    values[node->output(k)] = std::move(e);
  }
  FailureOr<SmallVector<int64_t>> knownInts(int k, StringRef what);

  // IR helpers.
  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    RankedTensorType t = typeOf(v);
    if (t.getShape() == shape)
      return v;
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()), v);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    bool identity = true;
    for (auto [k, p] : llvm::enumerate(perm))
      identity &= int64_t(k) == p;
    if (identity)
      return v;
    return TransposeOp::create(b, loc, v, perm);
  }
  Value splat(Type elementType, ArrayRef<int64_t> shape, double value) {
    auto t = RankedTensorType::get(shape, elementType);
    return ConstantOp::create(
        b, loc, t,
        DenseElementsAttr::get(t, b.getFloatAttr(elementType, value)));
  }
  FailureOr<Value> broadcastTo(Value v, ArrayRef<int64_t> shape);
  FailureOr<std::pair<Value, Value>> broadcastPair(Value x, Value y);
  Value binary(BinaryFn fn, Value x, Value y) {
    return BinaryOp::create(b, loc, fn, x, y);
  }
  Value unary(UnaryFn fn, Value x) { return UnaryOp::create(b, loc, fn, x); }
  /// Sum of `v` over `axes` (sorted), the dimensions kept as 1 if `keep`.
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keep);
  Value reduceMean(Value v, ArrayRef<int64_t> axes, bool keep);

  // Nodes.
  LogicalResult convert(const Node &n, int index);
  LogicalResult convertRunning(StringRef op);
  LogicalResult convertConstant();
  LogicalResult fold(StringRef op);
  LogicalResult foldShape(StringRef op);
  LogicalResult foldCast(StringRef op);
  LogicalResult foldMovement(StringRef op);
  LogicalResult foldMask(StringRef op);
  LogicalResult foldElementwise(StringRef op);
  bool resultTooLarge(ArrayRef<int64_t> shape);
  FailureOr<Known> castKnown(const Known &x, int32_t to);
  bool foldable(StringRef op);

public:
  /// How the importer handles one ONNX op type; every op is registered once,
  /// in ops(): what it needs, whether it is evaluated at import, and what
  /// it becomes.
  struct OpHandler {
    /// Inputs it needs before anything reads them (-1: every input it has).
    int minInputs = 1;
    enum Fold {
      /// Always converted to ops that run.
      Never,
      /// Evaluated at import when its inputs are known and small (shape
      /// arithmetic, masks), converted otherwise.
      WhenKnown,
      /// Only evaluated at import (its result is a shape or a constant).
      Always,
    } fold = Never;
    /// Converts the current node to ops that run (the op type given).
    LogicalResult (*convert)(Importer &, StringRef) = nullptr;
    /// Evaluates it at import (fold is not Never).
    LogicalResult (*evaluate)(Importer &, StringRef) = nullptr;
  };
  /// Every op type the importer knows.
  static const llvm::StringMap<OpHandler> &ops();
  static LogicalResult unsupportedAtRunTime(Importer &I, StringRef op);

private:
  LogicalResult convertElementwise(StringRef op);
  LogicalResult convertBinary(StringRef op, Value l, Value r);
  LogicalResult convertMatMul();
  LogicalResult convertGemm();
  LogicalResult convertSoftmax(bool log);
  LogicalResult convertLayerNorm();
  LogicalResult convertAttention();
  LogicalResult convertSoftmaxCrossEntropy();
  Value logSoftmaxLast(Value in);
  LogicalResult convertReduce(StringRef op);
  LogicalResult convertShapeOp(StringRef op);
  LogicalResult convertSplit();
  FailureOr<SmallVector<Value>>
  splitBySizes(Value x, int64_t axis, ArrayRef<int64_t> sizes, StringRef op);
  LogicalResult convertGelu();
  LogicalResult convertSlice();
  LogicalResult convertConcat();
  LogicalResult convertGather();
  LogicalResult convertCast();
  LogicalResult convertTrilu();
  LogicalResult convertWhere();
  LogicalResult convertNanGuard();
  LogicalResult convertIsNaN();
  LogicalResult convertSplitToSequence();
  LogicalResult convertSequenceAt();
  LogicalResult foldScan(StringRef op);
  Value gatherAlong(Value data, int64_t axis, Value ids);
  Value indexConstant(ArrayRef<int64_t> shape, ArrayRef<int32_t> values);

  // Shape rules shared by folding and IR.
  FailureOr<SmallVector<int64_t>>
  reshapeTarget(ArrayRef<int64_t> in, ArrayRef<int64_t> spec, bool allowZero);
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank);
  FailureOr<SmallVector<int64_t>> axesInput(int k, StringRef attrName,
                                            int64_t rank);
  FailureOr<SmallVector<int64_t>> resultShapeOf(StringRef op,
                                                ArrayRef<int64_t> in);
  struct SliceDims {
    SmallVector<int64_t> start, step, count;
  };
  FailureOr<SliceDims> sliceDims(ArrayRef<int64_t> shape);
  FailureOr<SmallVector<int64_t>> transposePerm(int64_t rank);

  MLIRContext *ctx;
  OpBuilder b;
  std::string fileName;
  const OnnxImportOptions &options;
  int64_t opset = 0;
  const Node *node = nullptr;
  std::string label;
  Location loc = UnknownLoc::get(ctx);
  Block *body = nullptr;
  llvm::StringMap<Entry> values;
  std::vector<std::unique_ptr<OnnxTensorData>> initializerData;
  /// Parameter arguments, in order, with their names and data.
  std::vector<const OnnxTensorData *> params;
  unsigned numParams = 0;
};
} // namespace

FailureOr<Type> Importer::elementType(int32_t onnxType, StringRef what) {
  switch (onnxType) {
  case DT::TensorProto_DataType_FLOAT:
    return Type(b.getF32Type());
  case DT::TensorProto_DataType_DOUBLE:
    return Type(b.getF64Type());
  case DT::TensorProto_DataType_FLOAT16:
    return Type(b.getF16Type());
  case DT::TensorProto_DataType_BFLOAT16:
    return Type(b.getBF16Type());
  case DT::TensorProto_DataType_INT64:
  case DT::TensorProto_DataType_INT32:
    return Type(b.getI32Type());
  default:
    error(what) << " has element type " << typeName(onnxType)
                << ", which gptc does not compute with (float, double, "
                   "float16, bfloat16, and int32/int64 ids)";
    return failure();
  }
}

FailureOr<Value> Importer::materialize(StringRef name, Entry &entry) {
  const Known &k = *entry.known;
  FailureOr<Type> element = elementType(k.onnxType, "'" + name.str() + "'");
  if (failed(element))
    return failure();
  auto type = RankedTensorType::get(k.shape, *element);
  if (entry.parameter && k.isFloat()) {
    Value arg = body->insertArgument(numParams++, type, loc);
    params.push_back(entry.data);
    entry.ir = arg;
    return arg;
  }
  if (k.size() > (int64_t(1) << 26))
    return error("'") << name << "' is too large to embed as a constant",
           failure();
  DenseElementsAttr attr;
  if (k.isFloat()) {
    SmallVector<APFloat> vals;
    const llvm::fltSemantics &sem =
        cast<FloatType>(*element).getFloatSemantics();
    for (double v : k.f) {
      APFloat x(v);
      bool lost;
      x.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(x);
    }
    attr = DenseElementsAttr::get(type, vals);
  } else {
    SmallVector<int32_t> vals;
    for (int64_t v : k.i) {
      if (v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max())
        return error("'") << name << "' holds " << v
                          << ", outside the 32-bit ids gptc computes with",
               failure();
      vals.push_back(int32_t(v));
    }
    attr = DenseElementsAttr::get(type, ArrayRef<int32_t>(vals));
  }
  // Constants go at the top of the body, so that every later use sees them.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  entry.ir = ConstantOp::create(b, loc, type, attr);
  return entry.ir;
}

FailureOr<Value> Importer::ir(int k) {
  if (!hasInput(k)) {
    error("node has no input ") << k;
    return failure();
  }
  std::string name = input(k).str();
  FailureOr<Entry *> entry = lookup(name);
  if (failed(entry))
    return failure();
  if ((*entry)->ir)
    return (*entry)->ir;
  if ((*entry)->sequence)
    return error("reads the sequence '")
               << name << "' as a tensor (gptc reads a sequence only with "
               << "SequenceAt)",
           failure();
  if ((*entry)->nanTestOf)
    return unsupported(Twine("reading IsNaN's result '") + name +
                       "' other than as Where's condition of the NaN guard "
                       "Where(IsNaN(x), 0, x)");
  if ((*entry)->fromParameter && (*entry)->producer) {
    // Folded from a parameter, needed by an op that runs: its node becomes
    // ops after all (and, recursively, the folded nodes it reads).
    const Node *saved = node;
    std::string savedLabel = label;
    Location savedLoc = loc;
    const Node &p = *(*entry)->producer;
    node = &p;
    label = p.name().empty()
                ? p.op_type() + "_" + std::to_string((*entry)->producerIndex)
                : p.name();
    loc = NameLoc::get(
        b.getStringAttr(label),
        FileLineColLoc::get(ctx, fileName, (*entry)->producerIndex + 1, 0));
    LogicalResult converted = convertRunning(p.op_type());
    node = saved;
    label = savedLabel;
    loc = savedLoc;
    if (failed(converted))
      return failure();
    Value v = values[name].ir;
    if (!v) {
      error("'") << name
                 << "' is computed from a parameter by an op gptc "
                    "evaluates only at import";
      return failure();
    }
    return v;
  }
  return materialize(name, **entry);
}

FailureOr<SmallVector<int64_t>> Importer::knownInts(int k, StringRef what) {
  const Known *v = known(k);
  if (!v) {
    error(what) << " ('" << input(k)
                << "') must be known when the model is imported: gptc "
                   "compiles static shapes";
    return failure();
  }
  SmallVector<int64_t> out;
  for (int64_t e = 0; e < v->size(); ++e)
    out.push_back(v->intAt(e));
  return out;
}

FailureOr<int64_t> Importer::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    error("axis ") << axis << " is out of range for rank " << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

FailureOr<Value> Importer::broadcastTo(Value v, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> in = typeOf(v).getShape();
  if (in == shape)
    return v;
  if (in.size() > shape.size()) {
    error("cannot broadcast a rank-")
        << in.size() << " operand to rank " << shape.size();
    return failure();
  }
  size_t lead = shape.size() - in.size();
  SmallVector<int64_t> kept, inserted;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t x = d < lead ? 1 : in[d - lead];
    if (x == shape[d] && d >= lead) {
      kept.push_back(x);
    } else if (x == 1) {
      inserted.push_back(d);
    } else {
      error("cannot broadcast dimension ")
          << d << " of size " << x << " to " << shape[d];
      return failure();
    }
  }
  Value r = reshape(v, kept);
  if (inserted.empty())
    return reshape(r, shape);
  return Value(BroadcastOp::create(
      b, loc, RankedTensorType::get(shape, typeOf(v).getElementType()), r,
      inserted));
}

FailureOr<std::pair<Value, Value>> Importer::broadcastPair(Value x, Value y) {
  auto shape = broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
  if (!shape) {
    error("operand shapes ")
        << typeOf(x) << " and " << typeOf(y) << " do not broadcast";
    return failure();
  }
  FailureOr<Value> bx = broadcastTo(x, *shape), by = broadcastTo(y, *shape);
  if (failed(bx) || failed(by))
    return failure();
  return std::make_pair(*bx, *by);
}

Value Importer::reduceSum(Value v, ArrayRef<int64_t> axes, bool keep) {
  RankedTensorType t = typeOf(v);
  SmallVector<int64_t> out, kept;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      out.push_back(t.getDimSize(d));
    kept.push_back(reduced ? 1 : t.getDimSize(d));
  }
  Value r = v;
  if (!axes.empty())
    r = ReduceSumOp::create(
        b, loc, RankedTensorType::get(out, t.getElementType()), v, axes);
  return keep ? reshape(r, kept) : r;
}

Value Importer::reduceMean(Value v, ArrayRef<int64_t> axes, bool keep) {
  RankedTensorType t = typeOf(v);
  int64_t n = 1;
  for (int64_t d : axes)
    n *= t.getDimSize(d);
  Value sum = reduceSum(v, axes, keep);
  return binary(BinaryFn::div, sum,
                splat(t.getElementType(), typeOf(sum).getShape(), double(n)));
}

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> Importer::reshapeTarget(ArrayRef<int64_t> in,
                                                        ArrayRef<int64_t> spec,
                                                        bool allowZero) {
  SmallVector<int64_t> out;
  int64_t inferred = -1, known = 1;
  for (size_t k = 0; k < spec.size(); ++k) {
    int64_t d = spec[k];
    if (d == 0 && !allowZero) {
      if (k >= in.size()) {
        error("Reshape: a 0 in the shape at position ")
            << k << " has no input dimension to copy";
        return failure();
      }
      d = in[k];
    }
    if (d == -1) {
      if (inferred >= 0) {
        error("Reshape: the shape has more than one -1");
        return failure();
      }
      inferred = k;
      out.push_back(1);
      continue;
    }
    if (d < 0) {
      error("Reshape: invalid dimension ") << d;
      return failure();
    }
    out.push_back(d);
    if (d > 0 && known > (int64_t(1) << 48) / d) {
      error("Reshape: the shape has too many elements");
      return failure();
    }
    known *= d;
  }
  int64_t total = countOf(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) {
      error("Reshape: cannot infer the -1 dimension of a reshape of ")
          << total << " elements";
      return failure();
    }
    out[inferred] = total / known;
  } else if (known != total) {
    error("Reshape: the shape has ")
        << known << " elements, the input " << total;
    return failure();
  }
  return out;
}

FailureOr<SmallVector<int64_t>> Importer::axesInput(int k, StringRef attrName,
                                                    int64_t rank) {
  SmallVector<int64_t> axes;
  if (opset >= 13 && hasInput(k)) {
    FailureOr<SmallVector<int64_t>> v = knownInts(k, "the axes");
    if (failed(v))
      return failure();
    axes = *v;
  } else if (auto a = intsAttr(attrName)) {
    axes = *a;
  }
  for (int64_t &a : axes) {
    FailureOr<int64_t> n = normalizeAxis(a, rank);
    if (failed(n))
      return failure();
    a = *n;
  }
  return axes;
}

/// The result shape of the shape-only ops (Reshape, Flatten, Squeeze,
/// Unsqueeze, Expand) on an input of shape `in`.
FailureOr<SmallVector<int64_t>> Importer::resultShapeOf(StringRef op,
                                                        ArrayRef<int64_t> in) {
  int64_t rank = in.size();
  if (op == "Reshape") {
    FailureOr<SmallVector<int64_t>> spec = knownInts(1, "Reshape's shape");
    if (failed(spec))
      return failure();
    return reshapeTarget(in, *spec, intAttr("allowzero", 0) != 0);
  }
  if (op == "Flatten") {
    int64_t a = intAttr("axis", 1);
    if (a < -rank || a > rank)
      return error("Flatten: axis ")
                 << a << " is out of range for rank " << rank,
             failure();
    std::optional<int64_t> axis = a < 0 ? a + rank : a;
    int64_t outer = countOf(in.take_front(*axis));
    return SmallVector<int64_t>{outer, countOf(in.drop_front(*axis))};
  }
  if (op == "Squeeze") {
    FailureOr<SmallVector<int64_t>> axes = axesInput(1, "axes", rank);
    if (failed(axes))
      return failure();
    SmallVector<int64_t> out;
    for (int64_t d = 0; d < rank; ++d) {
      bool drop = axes->empty() ? in[d] == 1 : llvm::is_contained(*axes, d);
      if (drop && in[d] != 1) {
        error("Squeeze: dimension ") << d << " has size " << in[d];
        return failure();
      }
      if (!drop)
        out.push_back(in[d]);
    }
    return out;
  }
  if (op == "Unsqueeze") {
    SmallVector<int64_t> raw;
    if (opset >= 13) {
      FailureOr<SmallVector<int64_t>> v = knownInts(1, "Unsqueeze's axes");
      if (failed(v))
        return failure();
      raw = *v;
    } else if (auto a = intsAttr("axes")) {
      raw = *a;
    }
    int64_t outRank = rank + raw.size();
    SmallVector<int64_t> axes;
    for (int64_t a : raw) {
      FailureOr<int64_t> n = normalizeAxis(a, outRank);
      if (failed(n))
        return failure();
      axes.push_back(*n);
    }
    SmallVector<int64_t> out;
    int64_t next = 0;
    for (int64_t d = 0; d < outRank; ++d) {
      if (llvm::is_contained(axes, d)) {
        out.push_back(1);
      } else if (next < rank) {
        out.push_back(in[next++]);
      } else {
        next = -1;
        break;
      }
    }
    if (next != rank) {
      error("Unsqueeze: repeated axes");
      return failure();
    }
    return out;
  }
  // Expand.
  FailureOr<SmallVector<int64_t>> spec = knownInts(1, "Expand's shape");
  if (failed(spec))
    return failure();
  auto out = broadcastShapes(in, *spec);
  if (!out) {
    error("Expand: the input does not broadcast to the shape");
    return failure();
  }
  return *out;
}

/// Transpose's `perm` (reversed dimensions by default), checked to be a
/// permutation of `rank` dimensions.
FailureOr<SmallVector<int64_t>> Importer::transposePerm(int64_t rank) {
  SmallVector<int64_t> perm;
  if (auto p = intsAttr("perm"))
    perm = *p;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  bool valid = int64_t(perm.size()) == rank;
  for (int64_t d = 0; valid && d < rank; ++d)
    valid = sorted[d] == d;
  if (!valid) {
    error("Transpose: perm is not a permutation of the input's ")
        << rank << " dimensions";
    return failure();
  }
  return perm;
}

FailureOr<Importer::SliceDims> Importer::sliceDims(ArrayRef<int64_t> shape) {
  int64_t rank = shape.size();
  SliceDims s;
  for (int64_t d = 0; d < rank; ++d) {
    s.start.push_back(0);
    s.step.push_back(1);
    s.count.push_back(shape[d]);
  }
  FailureOr<SmallVector<int64_t>> starts = knownInts(1, "Slice's starts");
  FailureOr<SmallVector<int64_t>> ends = knownInts(2, "Slice's ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (hasInput(3)) {
    FailureOr<SmallVector<int64_t>> a = knownInts(3, "Slice's axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t k = 0; k < starts->size(); ++k)
      axes.push_back(k);
  }
  if (hasInput(4)) {
    FailureOr<SmallVector<int64_t>> st = knownInts(4, "Slice's steps");
    if (failed(st))
      return failure();
    steps = *st;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size()) {
    error("Slice: starts, ends, axes and steps differ in length");
    return failure();
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    FailureOr<int64_t> axis = normalizeAxis(axes[k], rank);
    if (failed(axis))
      return failure();
    int64_t dim = shape[*axis], step = steps[k];
    if (step == 0) {
      error("Slice: a step of 0");
      return failure();
    }
    // Negative indices count from the end, then clamp: [0, dim] for
    // forward steps, [-1, dim - 1] for backward ones.
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < std::numeric_limits<int64_t>::min() + dim ? lo : v + dim;
      return std::clamp(v, lo, hi);
    };
    int64_t start = (*starts)[k], end = (*ends)[k];
    if (step > 0) {
      start = clampIndex(start, 0, dim);
      end = clampIndex(end, 0, dim);
    } else {
      start = clampIndex(start, -1, dim - 1);
      end = clampIndex(end, -1, dim - 1);
    }
    // start and end lie in [-1, dim]: their difference cannot overflow;
    // the step's magnitude is taken unsigned (INT64_MIN has no negation).
    uint64_t magnitude =
        step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
    int64_t span = step > 0 ? end - start : start - end;
    int64_t count =
        span <= 0 ? 0 : int64_t((uint64_t(span) - 1) / magnitude + 1);
    s.start[*axis] = start;
    s.step[*axis] = step;
    s.count[*axis] = count;
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Folding known values
//===----------------------------------------------------------------------===//

bool Importer::foldable(StringRef op) {
  const OpHandler &h = ops().find(op)->second;
  if (h.fold == OpHandler::Always)
    return true;
  if (h.fold != OpHandler::WhenKnown)
    return false;
  // Every data input known (a shape operand is required known anyway), and
  // small: folding is for shape arithmetic and masks, not for weights.
  // CastLike's second input gives only the type.
  int inputs = op == "CastLike" ? 1 : node->input_size();
  for (int k = 0; k < inputs; ++k) {
    if (!hasInput(k))
      continue;
    const Known *v = known(k);
    if (!v || v->size() > (int64_t(1) << 22))
      return false;
  }
  return node->input_size() > 0;
}

/// Evaluates the current node at import (Importer::ops says which ops
/// and when): its results become known values. One function per family.
LogicalResult Importer::fold(StringRef op) {
  const OpHandler &h = ops().find(op)->second;
  assert(h.evaluate && "an op evaluated at import has its evaluator");
  return h.evaluate(*this, op);
}

/// Folded results live in memory here: shapes that ask for more are
/// refused, not allocated.
bool Importer::resultTooLarge(ArrayRef<int64_t> shape) {
  int64_t n = countOf(shape);
  if (n >= 0 && n <= (int64_t(1) << 26))
    return false;
  error("the result (") << n
                        << " elements) is too large to evaluate "
                           "when the model is imported";
  return true;
}

/// Element conversion for Cast: floats keep their value rounded to the
/// target's precision; ints truncate toward zero.
FailureOr<Known> Importer::castKnown(const Known &x, int32_t to) {
  if (!widthOf(to))
    return error("Cast to ") << typeName(to) << " is not supported", failure();
  Known r;
  r.onnxType = to;
  r.shape = x.shape;
  for (int64_t e = 0; e < x.size(); ++e) {
    double v = x.at(e);
    if (isFloatType(to)) {
      if (to == DT::TensorProto_DataType_FLOAT)
        v = float(v);
      else if (to != DT::TensorProto_DataType_DOUBLE) {
        APFloat a(v);
        bool lost;
        a.convert(to == DT::TensorProto_DataType_FLOAT16 ? APFloat::IEEEhalf()
                                                         : APFloat::BFloat(),
                  APFloat::rmNearestTiesToEven, &lost);
        v = a.convertToDouble();
      }
      r.f.push_back(v);
    } else if (to == DT::TensorProto_DataType_BOOL) {
      r.i.push_back(v != 0);
    } else {
      r.i.push_back(x.isFloat() ? toInt(v) : x.i[e]);
    }
  }
  return r;
}

/// Shape, Size, ConstantOfShape, Range.
LogicalResult Importer::foldShape(StringRef op) {
  if (op == "Shape" || op == "Size") {
    FailureOr<Value> v;
    SmallVector<int64_t> shape;
    if (const Known *k = known(0)) {
      shape = k->shape;
    } else {
      v = ir(0);
      if (failed(v))
        return failure();
      shape.assign(typeOf(*v).getShape().begin(), typeOf(*v).getShape().end());
    }
    if (op == "Size")
      return defineKnown(0, Known::ints({}, {countOf(shape)})), success();
    int64_t rank = shape.size();
    int64_t start = intAttr("start", 0), end = intAttr("end", rank);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    std::vector<int64_t> dims(shape.begin() + start,
                              shape.begin() + std::max(start, end));
    int64_t n = dims.size();
    defineKnown(0, Known::ints({n}, std::move(dims)));
    return success();
  }
  if (op == "ConstantOfShape") {
    FailureOr<SmallVector<int64_t>> shape =
        knownInts(0, "ConstantOfShape's shape");
    if (failed(shape))
      return failure();
    Known fill = Known::floats({1}, {0.0}, DT::TensorProto_DataType_FLOAT);
    if (const auto *a = attr("value")) {
      OnnxTensorData data;
      std::string err;
      if (!decodeTensor(a->t(), data, err, externalDir()))
        return error(err), failure();
      fill = toKnown(data);
      if (fill.size() < 1)
        return error("ConstantOfShape: an empty value"), failure();
    }
    if (countOf(*shape) < 0 || countOf(*shape) > (int64_t(1) << 26))
      return error("ConstantOfShape: invalid or too large shape"), failure();
    Known r = fill.like(*shape);
    for (int64_t e = 0; e < r.size(); ++e)
      r.copyElement(fill, 0, e);
    defineKnown(0, std::move(r));
    return success();
  }
  if (op == "Range") {
    const Known *s = known(0), *l = known(1), *d = known(2);
    if (!s || !l || !d || s->size() < 1 || l->size() < 1 || d->size() < 1)
      return error("Range's operands must be known when the model is "
                   "imported"),
             failure();
    double start = s->at(0), limit = l->at(0), delta = d->at(0);
    if (delta == 0)
      return error("Range: a delta of 0"), failure();
    double count = std::ceil((limit - start) / delta);
    if (!(count <= double(int64_t(1) << 26)))
      return error("Range: too many elements"), failure();
    int64_t n = std::max<int64_t>(0, int64_t(count));
    if (n > (int64_t(1) << 26))
      return error("Range: too many elements"), failure();
    Known r = s->like({n});
    for (int64_t e = 0; e < n; ++e) {
      if (r.isFloat())
        r.f[e] = start + e * delta;
      else
        r.i[e] = int64_t(uint64_t(s->intAt(0)) +
                         uint64_t(e) * uint64_t(d->intAt(0)));
    }
    defineKnown(0, std::move(r));
    return success();
  }
  llvm_unreachable("not a shape op");
}

/// Identity and Cast, CastLike.
LogicalResult Importer::foldCast(StringRef op) {
  const Known &x = *known(0);
  if (op == "Identity")
    return defineKnown(0, x), success();
  if (op == "Cast" || op == "CastLike") {
    int32_t to = op == "Cast" ? int32_t(intAttr("to", 0)) : 0;
    if (op == "CastLike" && known(1)) {
      to = known(1)->onnxType;
    } else if (op == "CastLike") {
      // The target computed at run time: only its element type matters.
      FailureOr<Value> like = ir(1);
      if (failed(like))
        return failure();
      Type e = typeOf(*like).getElementType();
      to = e.isF32()    ? DT::TensorProto_DataType_FLOAT
           : e.isF64()  ? DT::TensorProto_DataType_DOUBLE
           : e.isF16()  ? DT::TensorProto_DataType_FLOAT16
           : e.isBF16() ? DT::TensorProto_DataType_BFLOAT16
                        : DT::TensorProto_DataType_INT64;
    }
    FailureOr<Known> r = castKnown(x, to);
    if (failed(r))
      return failure();
    return defineKnown(0, std::move(*r)), success();
  }
  llvm_unreachable("not a cast");
}

/// Reshape, Flatten, Squeeze, Unsqueeze, Expand, Transpose, Concat,
/// Gather, Slice.
LogicalResult Importer::foldMovement(StringRef op) {
  const Known &x = *known(0);
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze") {
    FailureOr<SmallVector<int64_t>> shape = resultShapeOf(op, x.shape);
    if (failed(shape))
      return failure();
    Known r = x;
    r.shape = *shape;
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Expand") {
    FailureOr<SmallVector<int64_t>> shape = resultShapeOf(op, x.shape);
    if (failed(shape) || resultTooLarge(*shape))
      return failure();
    Known r = x.like(*shape);
    std::vector<int64_t> idx = broadcastIndices(x.shape, *shape);
    for (int64_t e = 0; e < r.size(); ++e)
      r.copyElement(x, idx[e], e);
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Transpose") {
    int64_t rank = x.shape.size();
    FailureOr<SmallVector<int64_t>> permOr = transposePerm(rank);
    if (failed(permOr))
      return failure();
    SmallVector<int64_t> perm = *permOr;
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(x.shape[p]);
    Known r = x.like(shape);
    SmallVector<int64_t> inStrides = stridesOf(x.shape);
    SmallVector<int64_t> pos(rank, 0);
    for (int64_t e = 0; e < r.size(); ++e) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src += pos[d] * inStrides[perm[d]];
      r.copyElement(x, src, e);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++pos[d] < shape[d])
          break;
        pos[d] = 0;
      }
    }
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Concat") {
    int64_t rank = x.shape.size();
    FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), rank);
    if (failed(axis))
      return failure();
    SmallVector<int64_t> shape = x.shape;
    shape[*axis] = 0;
    for (int k = 0; k < node->input_size(); ++k) {
      const Known &in = *known(k);
      if (int64_t(in.shape.size()) != rank)
        return error("Concat: inputs of different ranks"), failure();
      for (int64_t d = 0; d < rank; ++d)
        if (d != *axis && in.shape[d] != x.shape[d])
          return error("Concat: inputs differ in dimension ") << d, failure();
      shape[*axis] += in.shape[*axis];
    }
    Known r = x.like(shape);
    int64_t outer = countOf(ArrayRef(shape).take_front(*axis));
    int64_t e = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int k = 0; k < node->input_size(); ++k) {
        const Known &in = *known(k);
        int64_t chunk = countOf(ArrayRef(in.shape).drop_front(*axis));
        for (int64_t c = 0; c < chunk; ++c)
          r.copyElement(in, o * chunk + c, e++);
      }
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Gather") {
    const Known &idx = *known(1);
    int64_t rank = x.shape.size();
    FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), rank);
    if (failed(axis))
      return failure();
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.begin() + *axis);
    shape.append(idx.shape.begin(), idx.shape.end());
    shape.append(x.shape.begin() + *axis + 1, x.shape.end());
    if (resultTooLarge(shape))
      return failure();
    Known r = x.like(shape);
    int64_t outer = countOf(ArrayRef(x.shape).take_front(*axis));
    int64_t dim = x.shape[*axis];
    int64_t inner = countOf(ArrayRef(x.shape).drop_front(*axis + 1));
    int64_t e = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < idx.size(); ++j) {
        int64_t id = idx.intAt(j);
        if (id < -dim || id >= dim)
          return error("Gather: index ")
                     << id << " is out of range for " << dim,
                 failure();
        id = id < 0 ? id + dim : id;
        for (int64_t c = 0; c < inner; ++c)
          r.copyElement(x, (o * dim + id) * inner + c, e++);
      }
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Slice") {
    FailureOr<SliceDims> s = sliceDims(x.shape);
    if (failed(s))
      return failure();
    Known r = x.like(s->count);
    int64_t rank = x.shape.size();
    SmallVector<int64_t> inStrides = stridesOf(x.shape);
    SmallVector<int64_t> pos(rank, 0);
    for (int64_t e = 0; e < r.size(); ++e) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src += (s->start[d] + pos[d] * s->step[d]) * inStrides[d];
      r.copyElement(x, src, e);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++pos[d] < s->count[d])
          break;
        pos[d] = 0;
      }
    }
    return defineKnown(0, std::move(r)), success();
  }
  llvm_unreachable("not a data-movement op");
}

/// Trilu and Where: masks.
LogicalResult Importer::foldMask(StringRef op) {
  const Known &x = *known(0);
  if (op == "Trilu") {
    int64_t kOff = 0;
    if (hasInput(1)) {
      FailureOr<SmallVector<int64_t>> k = knownInts(1, "Trilu's k");
      if (failed(k))
        return failure();
      kOff = k->empty() ? 0 : (*k)[0];
    }
    bool upper = intAttr("upper", 1) != 0;
    if (x.shape.size() < 2)
      return error("Trilu: the input has rank < 2"), failure();
    Known r = x;
    int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
    for (int64_t e = 0; e < r.size(); ++e) {
      int64_t c = e % cols, row = (e / cols) % rows;
      bool keep = upper ? c - row >= kOff : c - row <= kOff;
      if (!keep) {
        if (r.isFloat())
          r.f[e] = 0;
        else
          r.i[e] = 0;
      }
    }
    return defineKnown(0, std::move(r)), success();
  }
  if (op == "Where") {
    const Known &t = *known(1), &f = *known(2);
    auto s1 = broadcastShapes(x.shape, t.shape);
    auto shape = s1 ? broadcastShapes(*s1, f.shape) : std::nullopt;
    if (!shape)
      return error("Where: operand shapes do not broadcast"), failure();
    if (resultTooLarge(*shape))
      return failure();
    Known r = t.like(*shape);
    auto ic = broadcastIndices(x.shape, *shape);
    auto it = broadcastIndices(t.shape, *shape);
    auto iff = broadcastIndices(f.shape, *shape);
    for (int64_t e = 0; e < r.size(); ++e) {
      if (x.intAt(ic[e]))
        r.copyElement(t, it[e], e);
      else
        r.copyElement(f, iff[e], e);
    }
    return defineKnown(0, std::move(r)), success();
  }
  // Elementwise, unary then binary.
  llvm_unreachable("not a mask op");
}

/// Elementwise functions, arithmetic, comparisons and logic.
LogicalResult Importer::foldElementwise(StringRef op) {
  const Known &x = *known(0);
  static const llvm::StringMap<double (*)(double)> unaries = {
      {"Neg", [](double v) { return -v; }},
      {"Sqrt", [](double v) { return std::sqrt(v); }},
      {"Reciprocal", [](double v) { return 1.0 / v; }},
      {"Abs", [](double v) { return std::fabs(v); }},
      {"Exp", [](double v) { return std::exp(v); }},
      {"Log", [](double v) { return std::log(v); }},
      {"Tanh", [](double v) { return std::tanh(v); }},
      {"Erf", [](double v) { return std::erf(v); }},
      {"Relu", [](double v) { return v > 0 ? v : 0.0; }},
      {"Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {"Not", [](double v) { return double(v == 0); }}};
  if (op == "IsNaN" || op == "IsInf") {
    bool negative = intAttr("detect_negative", 1) != 0,
         positive = intAttr("detect_positive", 1) != 0;
    std::vector<int64_t> flags(x.size());
    for (int64_t e = 0; e < x.size(); ++e) {
      double v = x.at(e);
      flags[e] = op == "IsNaN" ? v != v
                               : std::isinf(v) && (v > 0 ? positive : negative);
    }
    return defineKnown(0, Known::ints(x.shape, std::move(flags),
                                      DT::TensorProto_DataType_BOOL)),
           success();
  }
  if (auto it = unaries.find(op); it != unaries.end()) {
    Known r = x;
    for (int64_t e = 0; e < r.size(); ++e) {
      double v = it->second(x.at(e));
      if (r.isFloat())
        r.f[e] = x.onnxType == DT::TensorProto_DataType_FLOAT ? float(v) : v;
      else
        r.i[e] = toInt(v);
    }
    return defineKnown(0, std::move(r)), success();
  }
  const Known &y = *known(1);
  auto shape = broadcastShapes(x.shape, y.shape);
  if (!shape)
    return error(op) << ": operand shapes do not broadcast", failure();
  if (resultTooLarge(*shape))
    return failure();
  bool compare = op == "Equal" || op == "Less" || op == "Greater" ||
                 op == "LessOrEqual" || op == "GreaterOrEqual" || op == "And" ||
                 op == "Or";
  Known r = compare ? Known::ints(*shape, std::vector<int64_t>(countOf(*shape)),
                                  DT::TensorProto_DataType_BOOL)
                    : x.like(*shape);
  auto ix = broadcastIndices(x.shape, *shape);
  auto iy = broadcastIndices(y.shape, *shape);
  for (int64_t e = 0; e < r.size(); ++e) {
    if (!compare && !r.isFloat()) {
      int64_t u = x.i[ix[e]], v = y.intAt(iy[e]);
      // Two's-complement wrap-around, as ONNX runtimes compute int64.
      auto wrap = [](uint64_t w) { return int64_t(w); };
      int64_t res =
          op == "Add"   ? wrap(uint64_t(u) + uint64_t(v))
          : op == "Max" ? std::max(u, v)
          : op == "Min" ? std::min(u, v)
          : op == "Sub" ? wrap(uint64_t(u) - uint64_t(v))
          : op == "Mul" ? wrap(uint64_t(u) * uint64_t(v))
          : op == "Div"
              ? (v == 0 || (v == -1 && u == std::numeric_limits<int64_t>::min())
                     ? 0
                     : u / v)
              : toInt(std::pow(double(u), double(v)));
      r.i[e] = res;
      continue;
    }
    double u = x.at(ix[e]), v = y.at(iy[e]);
    double res = op == "Add"   ? u + v
                 : op == "Max" ? (u != u || v != v ? NAN : std::max(u, v))
                 : op == "Min" ? (u != u || v != v ? NAN : std::min(u, v))
                 : op == "LessOrEqual"    ? double(u <= v)
                 : op == "GreaterOrEqual" ? double(u >= v)
                 : op == "Sub"            ? u - v
                 : op == "Mul"            ? u * v
                 : op == "Div"            ? u / v
                 : op == "Pow"            ? std::pow(u, v)
                 : op == "Equal"          ? double(u == v)
                 : op == "Less"           ? double(u < v)
                 : op == "Greater"        ? double(u > v)
                 : op == "And"            ? double(u != 0 && v != 0)
                                          : double(u != 0 || v != 0);
    if (compare)
      r.i[e] = int64_t(res);
    else
      r.f[e] = x.onnxType == DT::TensorProto_DataType_FLOAT ? float(res) : res;
  }
  return defineKnown(0, std::move(r)), success();
}

//===----------------------------------------------------------------------===//
// Ops that run
//===----------------------------------------------------------------------===//

/// Gelu (opset 20): gptc.gelu, the tanh form or the exact one (x/2 (1 +
/// erf(x / sqrt 2))).
LogicalResult Importer::convertGelu() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  if (!isa<FloatType>(t.getElementType()))
    return unsupported("Gelu on integer tensors");
  const auto *a = attr("approximate");
  std::string form = a ? a->s() : "none";
  if (form != "none" && form != "tanh")
    return error("Gelu: approximate is '")
               << form << "', where ONNX has 'none' or 'tanh'",
           failure();
  return define(0, GeluOp::create(b, loc, *x, /*exact=*/form == "none")),
         success();
}

LogicalResult Importer::convertElementwise(StringRef op) {
  static const llvm::StringMap<UnaryFn> unaries = {
      {"Neg", UnaryFn::neg},
      {"Sqrt", UnaryFn::sqrt},
      {"Exp", UnaryFn::exp},
      {"Log", UnaryFn::log},
      {"Tanh", UnaryFn::tanh},
      {"Erf", UnaryFn::erf},
      {"Reciprocal", UnaryFn::reciprocal},
      {"Relu", UnaryFn::relu},
      {"Sigmoid", UnaryFn::sigmoid},
      {"Abs", UnaryFn::abs}};
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  if (!isa<FloatType>(typeOf(*x).getElementType()))
    return unsupported(op + Twine(" on integer tensors computed at run time"));
  if (auto it = unaries.find(op); it != unaries.end())
    return define(0, unary(it->second, *x)), success();
  // A known integer operand of a float op (Pow's exponent) converts.
  if (const Known *k = known(1); k && !k->isFloat()) {
    Known f = Known::floats(k->shape, {}, DT::TensorProto_DataType_DOUBLE);
    for (int64_t e = 0; e < k->size(); ++e)
      f.f.push_back(double(k->i[e]));
    Entry converted;
    converted.known = std::move(f);
    FailureOr<Value> c = materialize(input(1), converted);
    if (failed(c))
      return failure();
    Type element = typeOf(*x).getElementType();
    if (typeOf(*c).getElementType() != element)
      *c = CastOp::create(
          b, loc, RankedTensorType::get(typeOf(*c).getShape(), element), *c);
    FailureOr<std::pair<Value, Value>> xy = broadcastPair(*x, *c);
    if (failed(xy))
      return failure();
    return convertBinary(op, xy->first, xy->second);
  }
  FailureOr<Value> y = ir(1);
  if (failed(y))
    return failure();
  if (typeOf(*x).getElementType() != typeOf(*y).getElementType())
    return error(op) << ": operands of different element types", failure();
  FailureOr<std::pair<Value, Value>> xy = broadcastPair(*x, *y);
  if (failed(xy))
    return failure();
  return convertBinary(op, xy->first, xy->second);
}

LogicalResult Importer::convertBinary(StringRef op, Value l, Value r) {
  if (op == "Add")
    return define(0, AddOp::create(b, loc, l, r)), success();
  BinaryFn fn = op == "Sub"   ? BinaryFn::sub
                : op == "Mul" ? BinaryFn::mul
                : op == "Div" ? BinaryFn::div
                              : BinaryFn::pow;
  define(0, binary(fn, l, r));
  return success();
}

LogicalResult Importer::convertMatMul() {
  FailureOr<Value> a = ir(0), bb = ir(1);
  if (failed(a) || failed(bb))
    return failure();
  ArrayRef<int64_t> sa = typeOf(*a).getShape(), sb = typeOf(*bb).getShape();
  if (sa.size() < 1 || sb.size() < 1)
    return unsupported("MatMul of scalars");
  if (typeOf(*a).getElementType() != typeOf(*bb).getElementType())
    return unsupported("MatMul of operands of different element types");
  // NumPy's 1-D promotions.
  Value lhs = *a, rhs = *bb;
  bool vecL = sa.size() == 1, vecR = sb.size() == 1;
  if (vecL)
    lhs = reshape(lhs, {1, sa[0]});
  if (vecR)
    rhs = reshape(rhs, {sb[0], 1});
  ArrayRef<int64_t> la = typeOf(lhs).getShape(), lb = typeOf(rhs).getShape();
  int64_t m = la[la.size() - 2], k = la.back(), k2 = lb[lb.size() - 2],
          n = lb.back();
  if (k != k2)
    return error("MatMul: contraction sizes ")
               << k << " and " << k2 << " differ",
           failure();
  Type element = typeOf(lhs).getElementType();
  auto batchShape = broadcastShapes(la.drop_back(2), lb.drop_back(2));
  if (!batchShape)
    return error("MatMul: batch dimensions do not broadcast"), failure();
  Value result;
  if (lb.size() == 2) {
    // [..., M, K] x [K, N]: rows of the left operand against one matrix.
    int64_t rows = countOf(la.drop_back(1));
    Value flat = reshape(lhs, {rows, k});
    Value prod =
        MatmulOp::create(b, loc, RankedTensorType::get({rows, n}, element),
                         flat, rhs, false, false);
    SmallVector<int64_t> shape(la.drop_back(1));
    shape.push_back(n);
    result = reshape(prod, shape);
  } else {
    SmallVector<int64_t> fullA(*batchShape), fullB(*batchShape);
    fullA.append({m, k});
    fullB.append({k, n});
    FailureOr<Value> ba = broadcastTo(lhs, fullA),
                     bbv = broadcastTo(rhs, fullB);
    if (failed(ba) || failed(bbv))
      return failure();
    int64_t batch = countOf(*batchShape);
    Value l3 = reshape(*ba, {batch, m, k}), r3 = reshape(*bbv, {batch, k, n});
    Value prod =
        MatmulOp::create(b, loc, RankedTensorType::get({batch, m, n}, element),
                         l3, r3, false, false);
    SmallVector<int64_t> shape(*batchShape);
    shape.append({m, n});
    result = reshape(prod, shape);
  }
  // Undo the 1-D promotions.
  SmallVector<int64_t> shape(typeOf(result).getShape());
  if (vecR)
    shape.pop_back();
  if (vecL)
    shape.erase(shape.end() - (vecR ? 1 : 2));
  define(0, reshape(result, shape));
  return success();
}

LogicalResult Importer::convertGemm() {
  FailureOr<Value> a = ir(0), bb = ir(1);
  if (failed(a) || failed(bb))
    return failure();
  if (typeOf(*a).getRank() != 2 || typeOf(*bb).getRank() != 2)
    return unsupported("Gemm with operands that are not matrices");
  bool ta = intAttr("transA", 0), tb = intAttr("transB", 0);
  ArrayRef<int64_t> sa = typeOf(*a).getShape(), sb = typeOf(*bb).getShape();
  int64_t m = ta ? sa[1] : sa[0], k = ta ? sa[0] : sa[1];
  int64_t k2 = tb ? sb[1] : sb[0], n = tb ? sb[0] : sb[1];
  if (k != k2)
    return error("Gemm: contraction sizes ") << k << " and " << k2 << " differ",
           failure();
  Type element = typeOf(*a).getElementType();
  Value y = MatmulOp::create(b, loc, RankedTensorType::get({m, n}, element), *a,
                             *bb, ta, tb);
  double alpha = floatAttr("alpha", 1.0), beta = floatAttr("beta", 1.0);
  if (alpha != 1.0)
    y = binary(BinaryFn::mul, y, splat(element, {m, n}, alpha));
  if (hasInput(2) && beta != 0.0) {
    FailureOr<Value> c = ir(2);
    if (failed(c))
      return failure();
    FailureOr<Value> bc = broadcastTo(*c, {m, n});
    if (failed(bc))
      return failure();
    Value cv = *bc;
    if (beta != 1.0)
      cv = binary(BinaryFn::mul, cv, splat(element, {m, n}, beta));
    y = AddOp::create(b, loc, y, cv);
  }
  define(0, y);
  return success();
}

LogicalResult Importer::convertSoftmax(bool log) {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  int64_t rank = t.getRank();
  if (rank == 0)
    return unsupported("Softmax of a scalar");
  FailureOr<int64_t> axis =
      normalizeAxis(intAttr("axis", opset >= 13 ? -1 : 1), rank);
  if (failed(axis))
    return failure();
  // Opsets < 13 normalize the flattened [outer, inner] matrix; 13 on, one
  // axis, which goes last for gptc's row-wise kernels.
  Value in = *x;
  SmallVector<int64_t> perm;
  if (opset < 13) {
    in = reshape(in, {countOf(t.getShape().take_front(*axis)),
                      countOf(t.getShape().drop_front(*axis))});
  } else {
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis)
        perm.push_back(d);
    perm.push_back(*axis);
    in = transpose(in, perm);
  }
  Value y = log ? logSoftmaxLast(in) : Value(SoftmaxOp::create(b, loc, in));
  if (opset < 13) {
    y = reshape(y, t.getShape());
  } else {
    SmallVector<int64_t> inverse(rank);
    for (int64_t d = 0; d < rank; ++d)
      inverse[perm[d]] = d;
    y = transpose(y, inverse);
  }
  define(0, y);
  return success();
}

/// log softmax over the last dimension: x - max - log(sum(exp(x - max))).
Value Importer::logSoftmaxLast(Value in) {
  RankedTensorType it = typeOf(in);
  SmallVector<int64_t> rows(it.getShape().drop_back());
  int64_t last = it.getRank() - 1;
  Value m = RowMaxOp::create(
      b, loc, RankedTensorType::get(rows, it.getElementType()), in);
  Value shifted =
      binary(BinaryFn::sub, in,
             BroadcastOp::create(b, loc, it, m, ArrayRef<int64_t>{last}));
  Value sum = reduceSum(unary(UnaryFn::exp, shifted), {last}, false);
  Value lse = unary(UnaryFn::log, sum);
  return binary(BinaryFn::sub, shifted,
                BroadcastOp::create(b, loc, it, lse, ArrayRef<int64_t>{last}));
}

LogicalResult Importer::convertSoftmaxCrossEntropy() {
  // scores [N, C, D1...] and labels [N, D1...]: the class axis moved last
  // for gptc.cross_entropy, whose mean skips ignored labels as ONNX's does;
  // a sum is the same op over a normalizer of 1.
  if (hasInput(2))
    return unsupported("SoftmaxCrossEntropyLoss with class weights");
  const auto *reductionAttr = attr("reduction");
  std::string reduction = reductionAttr ? reductionAttr->s() : "mean";
  if (reduction != "mean" && reduction != "sum")
    return unsupported("SoftmaxCrossEntropyLoss with reduction '" + reduction +
                       "' (gptc's loss is a mean or a sum)");
  FailureOr<Value> scores = ir(0), labels = ir(1);
  if (failed(scores) || failed(labels))
    return failure();
  RankedTensorType st = typeOf(*scores), lt = typeOf(*labels);
  if (st.getRank() < 2)
    return error("SoftmaxCrossEntropyLoss: scores of rank < 2"), failure();
  if (!isa<IntegerType>(lt.getElementType()))
    return error("SoftmaxCrossEntropyLoss: labels are not integers"), failure();
  SmallVector<int64_t> perm{0};
  for (int64_t d = 2; d < st.getRank(); ++d)
    perm.push_back(d);
  perm.push_back(1);
  Value logits = transpose(*scores, perm);
  if (lt.getShape() != typeOf(logits).getShape().drop_back())
    return error("SoftmaxCrossEntropyLoss: labels ")
               << lt << " do not match scores " << st,
           failure();
  Value normalizer;
  if (reduction == "sum")
    normalizer = splat(st.getElementType(), {}, 1.0);
  IntegerAttr ignore;
  if (const auto *a = attr("ignore_index"))
    ignore = b.getI64IntegerAttr(a->i());
  define(0,
         CrossEntropyOp::create(b, loc, logits, *labels, normalizer, ignore));
  if (node->output_size() > 1 && !node->output(1).empty()) {
    SmallVector<int64_t> inverse(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inverse[perm[d]] = d;
    define(1, transpose(logSoftmaxLast(logits), inverse));
  }
  return success();
}

LogicalResult Importer::convertLayerNorm() {
  FailureOr<Value> x = ir(0), scale = ir(1);
  if (failed(x) || failed(scale))
    return failure();
  RankedTensorType t = typeOf(*x);
  int64_t rank = t.getRank();
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  if (intAttr("stash_type", 1) != 1)
    return unsupported("LayerNormalization with a stash_type other than "
                       "float");
  ArrayRef<int64_t> shape = t.getShape();
  ArrayRef<int64_t> normShape = shape.drop_front(*axis);
  int64_t rows = countOf(shape.take_front(*axis)), cols = countOf(normShape);
  Type element = t.getElementType();
  // Scale and bias broadcast over the normalized dimensions, then flat.
  FailureOr<Value> w = broadcastTo(*scale, normShape);
  if (failed(w))
    return failure();
  Value bias;
  if (hasInput(2)) {
    FailureOr<Value> bv = ir(2);
    if (failed(bv))
      return failure();
    FailureOr<Value> bb = broadcastTo(*bv, normShape);
    if (failed(bb))
      return failure();
    bias = reshape(*bb, {cols});
  } else {
    bias = splat(element, {cols}, 0.0);
  }
  double eps = floatAttr("epsilon", 1e-5);
  if (!(float(eps) > 0) || !std::isfinite(float(eps)))
    return error("LayerNormalization: epsilon ")
               << eps << " is not positive and finite",
           failure();
  if (typeOf(*w).getElementType() != element ||
      typeOf(bias).getElementType() != element || !isa<FloatType>(element))
    return unsupported("LayerNormalization whose input, scale and bias are "
                       "not floats of one type");
  // gptc.layer_norm normalizes the last dimension of any rank: a norm over
  // it keeps its shape (no reshape for sequence parallelism to refuse);
  // over several, they are flattened into one.
  bool lastOnly = *axis == rank - 1;
  Value y = LayerNormOp::create(
      b, loc, lastOnly ? *x : reshape(*x, {rows, cols}), reshape(*w, {cols}),
      bias, b.getF64FloatAttr(double(float(eps))));
  define(0, lastOnly ? y : reshape(y, shape));
  // Mean and 1/sqrt(var + eps), shaped [d0, ..., d_axis-1, 1, ..., 1].
  bool wantMean = node->output_size() > 1 && !node->output(1).empty();
  bool wantInv = node->output_size() > 2 && !node->output(2).empty();
  if (wantMean || wantInv) {
    SmallVector<int64_t> statShape(shape.take_front(*axis));
    statShape.append(rank - *axis, 1);
    Value x2 = reshape(*x, {rows, cols});
    Value mean = reduceMean(x2, {1}, true);
    if (wantMean)
      define(1, reshape(mean, statShape));
    if (wantInv) {
      Value centred =
          binary(BinaryFn::sub, x2, *broadcastTo(mean, {rows, cols}));
      Value var =
          reduceMean(binary(BinaryFn::mul, centred, centred), {1}, true);
      Value inv = unary(
          UnaryFn::reciprocal,
          unary(UnaryFn::sqrt,
                AddOp::create(b, loc, var, splat(element, {rows, 1}, eps))));
      define(2, reshape(inv, statShape));
    }
  }
  return success();
}

/// ONNX's Attention (opset 23; what torch.onnx.export writes for
/// scaled_dot_product_attention there): softmax(scale Q K^T + mask) V per
/// head, on [B, H, S, D] operands or [B, S, H x D] ones with q_num_heads
/// and kv_num_heads; fewer key/value heads (grouped-query attention) are
/// repeated over the query heads. Causal self-attention (is_causal, or a
/// known causal mask, square) is gptc.causal_attention (a scale other than
/// 1/sqrt(D) scales Q); the rest is its decomposition: batched products, a
/// softmax and the mask added (a known boolean mask as 0 / -inf; a row it
/// hides entirely gives 0). Not: a key/value cache, softcap, the extra
/// outputs, operands other than f32.
LogicalResult Importer::convertAttention() {
  FailureOr<Value> q = ir(0), k = ir(1), v = ir(2);
  if (failed(q) || failed(k) || failed(v))
    return failure();
  if (hasInput(4) || hasInput(5))
    return unsupported("Attention with a key/value cache (past_key, "
                       "past_value)");
  for (int o = 1; o < node->output_size(); ++o)
    if (!node->output(o).empty())
      return unsupported("Attention's present_key, present_value or "
                         "qk_matmul_output outputs");
  if (floatAttr("softcap", 0.0) != 0.0)
    return unsupported("Attention with a softcap");
  RankedTensorType qt = typeOf(*q), kt = typeOf(*k), vt = typeOf(*v);
  int64_t rank = qt.getRank();
  Type element = qt.getElementType();
  if ((rank != 3 && rank != 4) || kt.getRank() != rank || vt.getRank() != rank)
    return error("Attention takes Q, K and V of rank 3 or 4, got ")
               << qt << ", " << kt << " and " << vt,
           failure();
  if (kt.getElementType() != element || vt.getElementType() != element ||
      !element.isF32())
    return unsupported("Attention whose Q, K and V are not all f32 (bf16 "
                       "is gptc's mixed precision of an f32 graph)");
  int64_t heads = rank == 4 ? qt.getDimSize(1) : intAttr("q_num_heads", 0);
  int64_t kvHeads = rank == 4 ? kt.getDimSize(1) : intAttr("kv_num_heads", 0);
  if (heads < 1 || kvHeads < 1 || heads % kvHeads)
    return error("Attention: ")
               << heads << " query heads do not share " << kvHeads
               << " key/value heads evenly"
               << (rank == 3 ? " (3-D operands need q_num_heads and "
                               "kv_num_heads)"
                             : ""),
           failure();
  // [B, H, S, D] each.
  auto split = [&](Value x, int64_t h) -> FailureOr<Value> {
    if (rank == 4)
      return x;
    ArrayRef<int64_t> s = typeOf(x).getShape();
    if (s[2] % h)
      return error("Attention: a hidden size of ")
                 << s[2] << " does not split into " << h << " heads",
             failure();
    return transpose(reshape(x, {s[0], s[1], h, s[2] / h}), {0, 2, 1, 3});
  };
  FailureOr<Value> q4 = split(*q, heads), k4 = split(*k, kvHeads),
                   v4 = split(*v, kvHeads);
  if (failed(q4) || failed(k4) || failed(v4))
    return failure();
  ArrayRef<int64_t> qs = typeOf(*q4).getShape(), ks = typeOf(*k4).getShape(),
                    vs = typeOf(*v4).getShape();
  int64_t B = qs[0], Sq = qs[2], D = qs[3], Skv = ks[2], Dv = vs[3];
  if (ks[0] != B || vs[0] != B || ks[3] != D || vs[2] != Skv || vs[1] != ks[1])
    return error("Attention: Q ")
               << typeOf(*q4) << ", K " << typeOf(*k4) << " and V "
               << typeOf(*v4) << " are not one attention's",
           failure();
  // Grouped-query attention: each key/value head serves heads / kvHeads
  // query heads.
  auto repeat = [&](Value x) -> FailureOr<Value> {
    ArrayRef<int64_t> s = typeOf(x).getShape();
    if (s[1] == heads)
      return x;
    int64_t g = heads / s[1];
    FailureOr<Value> wide = broadcastTo(reshape(x, {s[0], s[1], 1, s[2], s[3]}),
                                        {s[0], s[1], g, s[2], s[3]});
    if (failed(wide))
      return failure();
    return reshape(*wide, {s[0], heads, s[2], s[3]});
  };
  FailureOr<Value> kr = repeat(*k4), vr = repeat(*v4);
  if (failed(kr) || failed(vr))
    return failure();
  double defaultScale = 1.0 / std::sqrt(double(D));
  double scale = floatAttr("scale", defaultScale);
  bool causal = intAttr("is_causal", 0) != 0;

  // A known mask: causal ones (0 / true up to the diagonal, -inf or at
  // most -1e30 / false after it, over every leading index) are the causal
  // op's; others become an additive constant.
  Value mask;
  if (hasInput(3)) {
    const Known *m = known(3);
    if (m) {
      bool isBool = !m->isFloat();
      auto masked = [&](int64_t i) {
        return isBool ? m->intAt(i) == 0 : m->at(i) <= -1e30;
      };
      auto open = [&](int64_t i) {
        return isBool ? m->intAt(i) != 0 : m->at(i) == 0;
      };
      int64_t rows = m->shape.size() >= 2 ? m->shape[m->shape.size() - 2] : 1;
      int64_t cols = m->shape.empty() ? 1 : m->shape.back();
      bool isCausal = !causal && m->shape.size() >= 2 && rows == Sq &&
                      cols == Skv && Sq == Skv && m->size() > 0;
      for (int64_t i = 0; isCausal && i < m->size(); ++i) {
        int64_t r = (i / cols) % rows, c = i % cols;
        isCausal = c > r ? masked(i) : open(i);
      }
      if (isCausal) {
        causal = true;
      } else {
        std::vector<APFloat> additive;
        const auto &sem = cast<FloatType>(element).getFloatSemantics();
        for (int64_t i = 0; i < m->size(); ++i) {
          double x =
              isBool ? (m->intAt(i) ? 0.0
                                    : -std::numeric_limits<double>::infinity())
                     : m->at(i);
          APFloat f(x);
          bool lost;
          f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
          additive.push_back(f);
        }
        auto t = RankedTensorType::get(m->shape, element);
        mask =
            ConstantOp::create(b, loc, t, DenseElementsAttr::get(t, additive));
      }
    } else {
      FailureOr<Value> mv = ir(3);
      if (failed(mv))
        return failure();
      if (typeOf(*mv).getElementType() != element)
        return unsupported("Attention with a mask computed at run time "
                           "that is not of Q's float type");
      mask = *mv;
    }
  }

  // Causal self-attention: the fused op.
  if (causal && !mask && Sq == Skv && Dv == D) {
    Value qs4 = *q4;
    if (std::abs(scale - defaultScale) > 1e-6 * defaultScale)
      qs4 =
          binary(BinaryFn::mul, qs4,
                 splat(element, typeOf(qs4).getShape(), scale / defaultScale));
    auto merge = [&](Value x) {
      return reshape(transpose(x, {0, 2, 1, 3}), {B, Sq, heads * D});
    };
    Value y = CausalAttentionOp::create(b, loc, merge(qs4), merge(*kr),
                                        merge(*vr), heads, Value());
    define(0, rank == 3
                  ? y
                  : transpose(reshape(y, {B, Sq, heads, D}), {0, 2, 1, 3}));
    return success();
  }

  // The decomposition, per (batch, head): scale Q K^T (+ mask), softmax, V.
  int64_t bh = B * heads;
  Value q3 = reshape(*q4, {bh, Sq, D}), k3 = reshape(*kr, {bh, Skv, D}),
        v3 = reshape(*vr, {bh, Skv, Dv});
  Value scores =
      MatmulOp::create(b, loc, RankedTensorType::get({bh, Sq, Skv}, element),
                       q3, k3, false, true);
  scores = binary(BinaryFn::mul, scores, splat(element, {bh, Sq, Skv}, scale));
  scores = reshape(scores, {B, heads, Sq, Skv});
  if (causal) {
    // Upper-left aligned: query i sees keys 0..i.
    std::vector<APFloat> values;
    const auto &sem = cast<FloatType>(element).getFloatSemantics();
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Skv; ++j)
        values.push_back(j > i ? APFloat::getInf(sem, /*Negative=*/true)
                               : APFloat::getZero(sem));
    auto t = RankedTensorType::get({Sq, Skv}, element);
    FailureOr<Value> cm = broadcastTo(
        ConstantOp::create(b, loc, t, DenseElementsAttr::get(t, values)),
        {B, heads, Sq, Skv});
    if (failed(cm))
      return failure();
    scores = AddOp::create(b, loc, scores, *cm);
  }
  if (mask) {
    FailureOr<Value> mb = broadcastTo(mask, {B, heads, Sq, Skv});
    if (failed(mb))
      return failure();
    scores = AddOp::create(b, loc, scores, *mb);
  }
  Value p = SoftmaxOp::create(b, loc, reshape(scores, {bh, Sq, Skv}));
  // A row the mask hides entirely attends to nothing (ONNX's output is 0
  // there; the softmax's is NaN).
  if (mask)
    p = binary(BinaryFn::unless_nan, p, p);
  Value y =
      MatmulOp::create(b, loc, RankedTensorType::get({bh, Sq, Dv}, element), p,
                       v3, false, false);
  Value y4 = reshape(y, {B, heads, Sq, Dv});
  define(0, rank == 4
                ? y4
                : reshape(transpose(y4, {0, 2, 1, 3}), {B, Sq, heads * Dv}));
  return success();
}

LogicalResult Importer::convertReduce(StringRef op) {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  // ReduceSum takes its axes as an input from opset 13, ReduceMean from 18.
  bool axesAsInput = op == "ReduceSum" || opset >= 18;
  FailureOr<SmallVector<int64_t>> axes =
      axesAsInput ? axesInput(1, "axes", rank)
                  : [&]() -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> a;
    if (auto v = intsAttr("axes"))
      a = *v;
    for (int64_t &d : a) {
      FailureOr<int64_t> n = normalizeAxis(d, rank);
      if (failed(n))
        return failure();
      d = *n;
    }
    return a;
  }();
  if (failed(axes))
    return failure();
  if (axes->empty()) {
    if (axesAsInput && intAttr("noop_with_empty_axes", 0))
      return define(0, *x), success();
    for (int64_t d = 0; d < rank; ++d)
      axes->push_back(d);
  }
  llvm::sort(*axes);
  axes->erase(std::unique(axes->begin(), axes->end()), axes->end());
  bool keep = intAttr("keepdims", 1) != 0;
  define(0, op == "ReduceSum" ? reduceSum(*x, *axes, keep)
                              : reduceMean(*x, *axes, keep));
  return success();
}

LogicalResult Importer::convertShapeOp(StringRef op) {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  if (op == "Identity")
    return define(0, *x), success();
  if (op == "Transpose") {
    FailureOr<SmallVector<int64_t>> perm = transposePerm(typeOf(*x).getRank());
    if (failed(perm))
      return failure();
    return define(0, transpose(*x, *perm)), success();
  }
  FailureOr<SmallVector<int64_t>> shape =
      resultShapeOf(op, typeOf(*x).getShape());
  if (failed(shape))
    return failure();
  if (op == "Expand") {
    FailureOr<Value> e = broadcastTo(*x, *shape);
    if (failed(e))
      return failure();
    return define(0, *e), success();
  }
  define(0, reshape(*x, *shape));
  return success();
}

LogicalResult Importer::convertSplit() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = t.getDimSize(*axis), parts = node->output_size();
  if (parts < 1)
    return error("Split: the node has no outputs"), failure();
  SmallVector<int64_t> sizes;
  if (opset >= 13 && hasInput(1)) {
    FailureOr<SmallVector<int64_t>> s = knownInts(1, "Split's sizes");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = intsAttr("split")) {
    sizes = *s;
  } else if (const auto *n = attr("num_outputs"); n && opset >= 18) {
    // Opset 18: num_outputs parts of ceil(dim / num_outputs), the last
    // one smaller when it does not divide.
    if (n->i() != parts)
      return error("Split: num_outputs is ")
                 << n->i() << " but the node has " << parts << " outputs",
             failure();
    int64_t each = (dim + parts - 1) / parts;
    for (int64_t k = 0; k < parts; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(each, dim - k * each)));
  } else {
    if (dim % parts != 0)
      return error("Split: ")
                 << dim << " does not divide into " << parts << " equal parts",
             failure();
    sizes.assign(parts, dim / parts);
  }
  if (int64_t(sizes.size()) != parts)
    return error("Split: ")
               << sizes.size() << " sizes for " << parts << " parts",
           failure();
  FailureOr<SmallVector<Value>> pieces =
      splitBySizes(*x, *axis, sizes, "Split");
  if (failed(pieces))
    return failure();
  for (int64_t k = 0; k < parts; ++k)
    define(k, (*pieces)[k]);
  return success();
}

/// `x` cut along `axis` into pieces of `sizes` (each in [0, dim], adding
/// up to it): one gptc.split, or `x` itself for one piece.
FailureOr<SmallVector<Value>> Importer::splitBySizes(Value x, int64_t axis,
                                                     ArrayRef<int64_t> sizes,
                                                     StringRef op) {
  RankedTensorType t = typeOf(x);
  int64_t dim = t.getDimSize(axis), total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > dim)
      return error(op) << ": a size of " << s << " for a dimension of " << dim,
             failure();
    total += s;
  }
  if (total != dim || sizes.empty())
    return error(op) << ": sizes do not add up to " << dim, failure();
  if (sizes.size() == 1)
    return SmallVector<Value>{x};
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, t.getElementType()));
  }
  auto split = SplitOp::create(b, loc, types, x, axis);
  return SmallVector<Value>(split.getResults().begin(),
                            split.getResults().end());
}

LogicalResult Importer::convertSlice() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  FailureOr<SliceDims> s = sliceDims(t.getShape());
  if (failed(s))
    return failure();
  // Step-1 slices only: each sliced dimension is a split into up to three
  // pieces of which the middle one is kept.
  Value v = *x;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (s->count[d] == t.getDimSize(d) && s->start[d] == 0)
      continue;
    if (s->count[d] == 0)
      return unsupported("Slice with an empty result");
    if (s->step[d] != 1) {
      if (s->count[d] > (int64_t(1) << 26))
        return unsupported("strided Slice of more than 2^26 elements");
      // Strided or reversed: a gather of the known indices.
      SmallVector<int32_t> idx;
      for (int64_t k = 0; k < s->count[d]; ++k)
        idx.push_back(int32_t(s->start[d] + k * s->step[d]));
      v = gatherAlong(v, d, indexConstant({s->count[d]}, idx));
      continue;
    }
    RankedTensorType vt = typeOf(v);
    int64_t dim = vt.getDimSize(d);
    SmallVector<int64_t> sizes;
    if (s->start[d] > 0)
      sizes.push_back(s->start[d]);
    int64_t keep = sizes.size();
    sizes.push_back(s->count[d]);
    if (s->start[d] + s->count[d] < dim)
      sizes.push_back(dim - s->start[d] - s->count[d]);
    SmallVector<Type> types;
    for (int64_t size : sizes) {
      SmallVector<int64_t> shape(vt.getShape());
      shape[d] = size;
      types.push_back(RankedTensorType::get(shape, vt.getElementType()));
    }
    v = SplitOp::create(b, loc, types, v, d).getResult(keep);
  }
  define(0, v);
  return success();
}

LogicalResult Importer::convertConcat() {
  SmallVector<Value> inputs;
  for (int k = 0; k < node->input_size(); ++k) {
    FailureOr<Value> v = ir(k);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  RankedTensorType t = typeOf(inputs[0]);
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(t.getShape());
  shape[*axis] = 0;
  for (Value v : inputs) {
    if (typeOf(v).getRank() != t.getRank())
      return error("Concat: inputs of different ranks"), failure();
    shape[*axis] += typeOf(v).getDimSize(*axis);
  }
  if (inputs.size() == 1)
    return define(0, inputs[0]), success();
  define(0, ConcatOp::create(b, loc,
                             RankedTensorType::get(shape, t.getElementType()),
                             inputs, *axis));
  return success();
}

LogicalResult Importer::convertGather() {
  FailureOr<Value> data = ir(0);
  if (failed(data))
    return failure();
  RankedTensorType t = typeOf(*data);
  if (!isa<FloatType>(t.getElementType()))
    return unsupported("Gather from an integer tensor computed at run time");
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = t.getDimSize(*axis);
  FailureOr<Value> ids;
  // Known indices: negative ones counted from the end, range-checked here.
  if (const Known *idx = known(1)) {
    for (int64_t e = 0; e < idx->size(); ++e)
      if (idx->intAt(e) < -dim || idx->intAt(e) >= dim)
        return error("Gather: index ")
                   << idx->intAt(e) << " is out of range for " << dim,
               failure();
    Known fixed = *idx;
    fixed.onnxType = DT::TensorProto_DataType_INT64;
    fixed.i.clear();
    for (int64_t e = 0; e < idx->size(); ++e)
      fixed.i.push_back(idx->intAt(e) < 0 ? idx->intAt(e) + dim
                                          : idx->intAt(e));
    Entry normalized;
    normalized.known = std::move(fixed);
    FailureOr<Value> v = materialize(input(1), normalized);
    if (failed(v))
      return failure();
    ids = *v;
  } else {
    ids = ir(1);
  }
  if (failed(ids))
    return failure();
  if (!isa<IntegerType>(typeOf(*ids).getElementType()))
    return unsupported("Gather with non-integer indices");
  define(0, gatherAlong(*data, *axis, *ids));
  return success();
}

/// `data` gathered along `axis` at `ids` (ONNX's Gather, indices in range):
/// the axis moved first and the rest flattened, an embedding lookup.
Value Importer::gatherAlong(Value data, int64_t axis, Value ids) {
  RankedTensorType t = typeOf(data), it = typeOf(ids);
  int64_t dim = t.getDimSize(axis);
  SmallVector<int64_t> perm{axis};
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != axis)
      perm.push_back(d);
  Value table = transpose(data, perm);
  SmallVector<int64_t> rest(typeOf(table).getShape().drop_front());
  int64_t width = countOf(rest);
  table = reshape(table, {dim, width});
  SmallVector<int64_t> idsShape(it.getShape());
  Value flatIds = idsShape.empty() ? reshape(ids, {1}) : ids;
  SmallVector<int64_t> rowsShape(typeOf(flatIds).getShape());
  rowsShape.push_back(width);
  Value rows = EmbeddingOp::create(
      b, loc, RankedTensorType::get(rowsShape, t.getElementType()), flatIds,
      table, Value());
  // [ids..., rest...] -> [before axis..., ids..., after axis...].
  SmallVector<int64_t> gathered(idsShape);
  gathered.append(rest.begin(), rest.end());
  Value g = reshape(rows, gathered);
  int64_t ni = idsShape.size();
  SmallVector<int64_t> back;
  for (int64_t d = 0; d < axis; ++d)
    back.push_back(ni + d);
  for (int64_t d = 0; d < ni; ++d)
    back.push_back(d);
  for (int64_t d = axis; d < int64_t(rest.size()); ++d)
    back.push_back(ni + d);
  return transpose(g, back);
}

/// A known i32 index tensor of `shape` as IR.
Value Importer::indexConstant(ArrayRef<int64_t> shape,
                              ArrayRef<int32_t> values) {
  auto type = RankedTensorType::get(shape, b.getI32Type());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, values));
}

LogicalResult Importer::convertCast() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  int32_t to = int32_t(intAttr("to", 0));
  if (node->op_type() == "CastLike") {
    FailureOr<Entry *> like = lookup(input(1));
    if (failed(like))
      return failure();
    if ((*like)->known)
      to = (*like)->known->onnxType;
  }
  FailureOr<Type> element =
      node->op_type() == "CastLike" && !values[input(1)].known
          ? FailureOr<Type>(typeOf(values[input(1)].ir).getElementType())
          : elementType(to, "Cast's target");
  if (failed(element))
    return failure();
  RankedTensorType t = typeOf(*x);
  if (t.getElementType() == *element)
    return define(0, *x), success();
  if (!isa<FloatType>(t.getElementType()) || !isa<FloatType>(*element))
    return unsupported("Cast between integer and float tensors computed at "
                       "run time");
  define(0, CastOp::create(b, loc,
                           RankedTensorType::get(t.getShape(), *element), *x));
  return success();
}

LogicalResult Importer::convertTrilu() {
  // A run-time matrix times the known 0/1 mask of the kept triangle.
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  if (t.getRank() < 2)
    return error("Trilu: the input has rank < 2"), failure();
  if (!isa<FloatType>(t.getElementType()))
    return unsupported("Trilu of an integer tensor computed at run time");
  int64_t kOff = 0;
  if (hasInput(1)) {
    FailureOr<SmallVector<int64_t>> k = knownInts(1, "Trilu's k");
    if (failed(k))
      return failure();
    kOff = k->empty() ? 0 : (*k)[0];
  }
  bool upper = intAttr("upper", 1) != 0;
  int64_t rows = t.getDimSize(t.getRank() - 2),
          cols = t.getDimSize(t.getRank() - 1);
  if (countOf({rows, cols}) > (int64_t(1) << 26))
    return unsupported("Trilu of matrices over 2^26 elements");
  SmallVector<APFloat> mask;
  const llvm::fltSemantics &sem =
      cast<FloatType>(t.getElementType()).getFloatSemantics();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      bool keep = upper ? c - r >= kOff : c - r <= kOff;
      mask.push_back(APFloat::getZero(sem));
      if (keep)
        mask.back() = APFloat::getOne(sem);
    }
  auto mt = RankedTensorType::get({rows, cols}, t.getElementType());
  Value m = ConstantOp::create(b, loc, mt, DenseElementsAttr::get(mt, mask));
  FailureOr<Value> full = broadcastTo(m, t.getShape());
  if (failed(full))
    return failure();
  define(0, binary(BinaryFn::mul, *x, *full));
  return success();
}

LogicalResult Importer::convertWhere() {
  // A known condition: every element picked from the concatenation of the
  // broadcast branches by a known index (an embedding lookup), exact for
  // every value, infinities included, unlike a blend by a 0/1 mask.
  const Known &cond = *known(0);
  FailureOr<Value> x = ir(1), y = ir(2);
  if (failed(x) || failed(y))
    return failure();
  if (typeOf(*x).getElementType() != typeOf(*y).getElementType() ||
      !isa<FloatType>(typeOf(*x).getElementType()))
    return unsupported("Where with branches that are not floats of one type");
  auto s1 = broadcastShapes(cond.shape, typeOf(*x).getShape());
  auto shape = s1 ? broadcastShapes(*s1, typeOf(*y).getShape()) : std::nullopt;
  if (!shape)
    return error("Where: operand shapes do not broadcast"), failure();
  FailureOr<Value> bx = broadcastTo(*x, *shape), by = broadcastTo(*y, *shape);
  if (failed(bx) || failed(by))
    return failure();
  int64_t n = countOf(*shape);
  if (n < 0 || n > (int64_t(1) << 26))
    return unsupported("Where on more than 2^26 elements");
  Value table = ConcatOp::create(
      b, loc, RankedTensorType::get({2 * n}, typeOf(*x).getElementType()),
      ValueRange{reshape(*bx, {n}), reshape(*by, {n})}, 0);
  std::vector<int64_t> ci = broadcastIndices(cond.shape, *shape);
  SmallVector<int32_t> idx(n);
  for (int64_t e = 0; e < n; ++e)
    idx[e] = int32_t(cond.intAt(ci[e]) ? e : n + e);
  Value picked = gatherAlong(table, 0, indexConstant({n}, idx));
  define(0, reshape(picked, *shape));
  return success();
}

/// IsNaN of a value computed at run time: remembered for Where, the only
/// reader gptc takes (it computes no bool tensors).
LogicalResult Importer::convertIsNaN() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  if (node->output_size() > 0)
    values[node->output(0)].nanTestOf = *x;
  return success();
}

/// Where(IsNaN(x), c, x) with c a known 0: the NaN guard exporters write
/// after a softmax whose rows may be fully masked (PyTorch's
/// scaled_dot_product_attention decomposition): `gptc.binary unless_nan
/// x, x`, 0 where x is NaN; its gradient is dy where x is not NaN.
LogicalResult Importer::convertNanGuard() {
  Value x = values[input(0)].nanTestOf;
  auto kept = values.find(input(2));
  const Known *fill = known(1);
  bool guard = kept != values.end() && kept->second.ir == x && fill &&
               fill->size() == 1 && fill->isFloat() && fill->f[0] == 0;
  if (!guard)
    return unsupported(
        "Where on IsNaN other than the guard Where(IsNaN(x), 0, x) (gptc "
        "computes no bool tensors)");
  define(0, binary(BinaryFn::unless_nan, x, x));
  return success();
}

/// SplitToSequence: the pieces of a gptc.split (chunks of the `split`
/// input's size, the last smaller, or its sizes; without it, pieces of 1,
/// squeezed unless keepdims), kept for SequenceAt.
LogicalResult Importer::convertSplitToSequence() {
  FailureOr<Value> x = ir(0);
  if (failed(x))
    return failure();
  RankedTensorType t = typeOf(*x);
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = t.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (hasInput(1)) {
    const Known *k = known(1);
    FailureOr<SmallVector<int64_t>> s = knownInts(1, "SplitToSequence's split");
    if (failed(s))
      return failure();
    if (k->shape.empty()) {
      int64_t each = (*s)[0];
      if (each <= 0)
        return error("SplitToSequence: a split of ") << each, failure();
      for (int64_t at = 0; at < dim; at += each)
        sizes.push_back(std::min(each, dim - at));
    } else {
      sizes = *s;
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = intAttr("keepdims", 1) == 0;
  }
  FailureOr<SmallVector<Value>> split =
      splitBySizes(*x, *axis, sizes, "SplitToSequence");
  if (failed(split))
    return failure();
  SmallVector<Value> pieces = std::move(*split);
  if (squeeze)
    for (Value &p : pieces) {
      SmallVector<int64_t> shape(t.getShape());
      shape.erase(shape.begin() + *axis);
      p = reshape(p, shape);
    }
  if (node->output_size() > 0)
    values[node->output(0)].sequence = std::move(pieces);
  return success();
}

/// SequenceAt of a sequence SplitToSequence made, at a known position.
LogicalResult Importer::convertSequenceAt() {
  FailureOr<Entry *> entry = lookup(input(0));
  if (failed(entry))
    return failure();
  if (!(*entry)->sequence)
    return unsupported(Twine("SequenceAt of '") + input(0) +
                       "', which is not a sequence SplitToSequence made");
  FailureOr<SmallVector<int64_t>> at = knownInts(1, "SequenceAt's position");
  if (failed(at))
    return failure();
  const SmallVector<Value> &seq = *(*entry)->sequence;
  int64_t n = seq.size(), p = at->empty() ? 0 : (*at)[0];
  if (p < -n || p >= n)
    return error("SequenceAt: position ")
               << p << " is outside a sequence of " << n,
           failure();
  define(0, seq[p < 0 ? p + n : p]);
  return success();
}

/// CumSum (axis a known input; exclusive and reverse honoured) and
/// GatherND (batch_dims), on values known at import: the index arithmetic
/// of Hugging Face's mask builders.
LogicalResult Importer::foldScan(StringRef op) {
  const Known &x = *known(0);
  int64_t rank = x.shape.size();
  if (op == "CumSum") {
    FailureOr<SmallVector<int64_t>> a = knownInts(1, "CumSum's axis");
    if (failed(a))
      return failure();
    FailureOr<int64_t> axis = normalizeAxis(a->empty() ? 0 : (*a)[0], rank);
    if (failed(axis))
      return failure();
    bool exclusive = intAttr("exclusive", 0) != 0,
         reverse = intAttr("reverse", 0) != 0;
    int64_t n = x.shape[*axis], inner = 1;
    for (int64_t d = *axis + 1; d < rank; ++d)
      inner *= x.shape[d];
    Known r = x.like(x.shape);
    int64_t block = n * inner, outer = block ? x.size() / block : 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t s = 0; s < n; ++s) {
          int64_t j = reverse ? n - 1 - s : s;
          int64_t e = (o * n + j) * inner + i;
          if (exclusive) {
            r.isFloat() ? void(r.f[e] = fsum) : void(r.i[e] = isum);
          }
          if (r.isFloat())
            fsum += x.f[e];
          else
            isum = int64_t(uint64_t(isum) + uint64_t(x.i[e]));
          if (!exclusive) {
            r.isFloat() ? void(r.f[e] = fsum) : void(r.i[e] = isum);
          }
        }
      }
    return defineKnown(0, std::move(r)), success();
  }
  // GatherND.
  const Known &ind = *known(1);
  int64_t batch = intAttr("batch_dims", 0), q = ind.shape.size();
  if (q < 1 || batch < 0 || batch >= std::min<int64_t>(rank, q))
    return error("GatherND: batch_dims ")
               << batch << " for data of rank " << rank
               << " and indices of rank " << q,
           failure();
  int64_t k = ind.shape.back();
  if (k < 1 || batch + k > rank)
    return error("GatherND: index tuples of ")
               << k << " for data of rank " << rank << " after " << batch
               << " batch dimensions",
           failure();
  for (int64_t d = 0; d < batch; ++d)
    if (ind.shape[d] != x.shape[d])
      return error("GatherND: batch dimension ") << d << " differs", failure();
  SmallVector<int64_t> shape(ind.shape.begin(), ind.shape.end() - 1);
  shape.append(x.shape.begin() + batch + k, x.shape.end());
  if (resultTooLarge(shape))
    return failure();
  int64_t slice = 1, batchCount = 1;
  for (int64_t d = batch + k; d < rank; ++d)
    slice *= x.shape[d];
  for (int64_t d = 0; d < batch; ++d)
    batchCount *= x.shape[d];
  int64_t perBatchData = batchCount ? x.size() / batchCount : 0;
  int64_t tuples = k ? ind.size() / k : 0;
  int64_t tuplesPerBatch = batchCount ? tuples / batchCount : 0;
  Known r = x.like(shape);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t bIdx = tuplesPerBatch ? t / tuplesPerBatch : 0;
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = x.shape[batch + j], v = ind.intAt(t * k + j);
      if (v < -dim || v >= dim)
        return error("GatherND: index ")
                   << v << " is outside a dimension of " << dim,
               failure();
      offset = offset * dim + (v < 0 ? v + dim : v);
    }
    for (int64_t s = 0; s < slice; ++s)
      r.copyElement(x, bIdx * perBatchData + offset * slice + s, t * slice + s);
  }
  return defineKnown(0, std::move(r)), success();
}

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

bool mlir::gptc::parseOnnxDim(llvm::StringRef text, OnnxImportOptions &options,
                              std::string &error) {
  auto [name, value] = text.split('=');
  long long size = 0;
  if (name.empty() || value.getAsInteger(10, size) || size < 0) {
    error = "--onnx-dim '" + text.str() + "': expected NAME=N with N >= 0";
    return false;
  }
  options.dims[name.str()] = size;
  return true;
}

const llvm::StringMap<Importer::OpHandler> &Importer::ops() {
  using H = OpHandler;
  // Converters (to ops that run), one per family.
  auto elementwise =
      +[](Importer &I, StringRef op) { return I.convertElementwise(op); };
  auto shapeOp =
      +[](Importer &I, StringRef op) { return I.convertShapeOp(op); };
  auto cast = +[](Importer &I, StringRef) { return I.convertCast(); };
  auto atRunTime = &Importer::unsupportedAtRunTime;
  // Evaluators (at import), one per family.
  auto shapes = +[](Importer &I, StringRef op) { return I.foldShape(op); };
  auto arithmetic =
      +[](Importer &I, StringRef op) { return I.foldElementwise(op); };
  auto casts = +[](Importer &I, StringRef op) { return I.foldCast(op); };
  auto movement = +[](Importer &I, StringRef op) { return I.foldMovement(op); };
  auto masks = +[](Importer &I, StringRef op) { return I.foldMask(op); };
  static const llvm::StringMap<OpHandler> table = {
      {"Constant",
       {0, H::Never,
        +[](Importer &I, StringRef) { return I.convertConstant(); }}},
      // Shapes and constants: evaluated at import.
      {"Shape", {1, H::Always, nullptr, shapes}},
      {"Size", {1, H::Always, nullptr, shapes}},
      {"ConstantOfShape", {1, H::Always, nullptr, shapes}},
      {"Range", {3, H::Always, nullptr, shapes}},
      // Elementwise.
      {"Add", {2, H::WhenKnown, elementwise, arithmetic}},
      {"Sub", {2, H::WhenKnown, elementwise, arithmetic}},
      {"Mul", {2, H::WhenKnown, elementwise, arithmetic}},
      {"Div", {2, H::WhenKnown, elementwise, arithmetic}},
      {"Pow", {2, H::WhenKnown, elementwise, arithmetic}},
      {"Neg", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Sqrt", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Exp", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Log", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Tanh", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Erf", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Reciprocal", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Relu", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Sigmoid", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Abs", {1, H::WhenKnown, elementwise, arithmetic}},
      {"Gelu",
       {1, H::Never, +[](Importer &I, StringRef) { return I.convertGelu(); }}},
      // Comparisons and logic.
      {"Equal", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"Less", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"Greater", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"LessOrEqual", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"GreaterOrEqual", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"Max", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"Min", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"IsNaN",
       {1, H::WhenKnown,
        +[](Importer &I, StringRef) { return I.convertIsNaN(); }, arithmetic}},
      {"IsInf", {1, H::WhenKnown, atRunTime, arithmetic}},
      {"CumSum",
       {2, H::WhenKnown, atRunTime,
        +[](Importer &I, StringRef op) { return I.foldScan(op); }}},
      {"GatherND",
       {2, H::WhenKnown, atRunTime,
        +[](Importer &I, StringRef op) { return I.foldScan(op); }}},
      {"Not", {1, H::WhenKnown, atRunTime, arithmetic}},
      {"And", {2, H::WhenKnown, atRunTime, arithmetic}},
      {"Or", {2, H::WhenKnown, atRunTime, arithmetic}},
      // Masks.
      {"Where",
       {3, H::WhenKnown,
        +[](Importer &I, StringRef op) {
          // A mask known at import selects; IsNaN of a computed value is
          // the NaN guard; another computed one does not run.
          if (I.known(0))
            return I.convertWhere();
          if (I.values[I.input(0)].nanTestOf)
            return I.convertNanGuard();
          return unsupportedAtRunTime(I, op);
        },
        masks}},
      {"Trilu",
       {1, H::WhenKnown,
        +[](Importer &I, StringRef) { return I.convertTrilu(); }, masks}},
      // Products, normalizations, losses, reductions.
      {"MatMul",
       {2, H::Never,
        +[](Importer &I, StringRef) { return I.convertMatMul(); }}},
      {"Gemm",
       {2, H::Never, +[](Importer &I, StringRef) { return I.convertGemm(); }}},
      {"Softmax",
       {1, H::Never,
        +[](Importer &I, StringRef) { return I.convertSoftmax(false); }}},
      {"LogSoftmax",
       {1, H::Never,
        +[](Importer &I, StringRef) { return I.convertSoftmax(true); }}},
      {"LayerNormalization",
       {2, H::Never,
        +[](Importer &I, StringRef) { return I.convertLayerNorm(); }}},
      {"Attention",
       {3, H::Never,
        +[](Importer &I, StringRef) { return I.convertAttention(); }}},
      {"SoftmaxCrossEntropyLoss",
       {2, H::Never,
        +[](Importer &I, StringRef) {
          return I.convertSoftmaxCrossEntropy();
        }}},
      {"ReduceMean",
       {1, H::Never,
        +[](Importer &I, StringRef op) { return I.convertReduce(op); }}},
      {"ReduceSum",
       {1, H::Never,
        +[](Importer &I, StringRef op) { return I.convertReduce(op); }}},
      // Casts.
      {"Identity", {1, H::WhenKnown, shapeOp, casts}},
      {"Cast", {1, H::WhenKnown, cast, casts}},
      {"CastLike", {2, H::WhenKnown, cast, casts}},
      // Data movement.
      {"Reshape", {2, H::WhenKnown, shapeOp, movement}},
      {"Flatten", {1, H::WhenKnown, shapeOp, movement}},
      {"Squeeze", {1, H::WhenKnown, shapeOp, movement}},
      {"Unsqueeze", {1, H::WhenKnown, shapeOp, movement}},
      {"Transpose", {1, H::WhenKnown, shapeOp, movement}},
      {"Expand", {2, H::WhenKnown, shapeOp, movement}},
      {"Split",
       {1, H::Never, +[](Importer &I, StringRef) { return I.convertSplit(); }}},
      {"SplitToSequence",
       {1, H::Never,
        +[](Importer &I, StringRef) { return I.convertSplitToSequence(); }}},
      {"SequenceAt",
       {2, H::Never,
        +[](Importer &I, StringRef) { return I.convertSequenceAt(); }}},
      {"Slice",
       {3, H::WhenKnown,
        +[](Importer &I, StringRef) { return I.convertSlice(); }, movement}},
      {"Concat",
       {-1, H::WhenKnown,
        +[](Importer &I, StringRef) { return I.convertConcat(); }, movement}},
      {"Gather",
       {2, H::WhenKnown,
        +[](Importer &I, StringRef) { return I.convertGather(); }, movement}},
  };
  return table;
}

std::vector<std::string> mlir::gptc::supportedOnnxOps() {
  std::vector<std::string> names;
  for (const auto &entry : Importer::ops())
    names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}

LogicalResult Importer::convert(const Node &n, int index) {
  node = &n;
  StringRef op = n.op_type();
  label = n.name().empty() ? op.str() + "_" + std::to_string(index) : n.name();
  loc = NameLoc::get(b.getStringAttr(label),
                     FileLineColLoc::get(ctx, fileName, index + 1, 0));
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return unsupported(Twine("the op's domain '") + n.domain() +
                       "' is not ONNX's");
  auto handler = ops().find(op);
  if (handler == ops().end())
    return unsupported(Twine("op type '") + op +
                       "' is not supported by gptc's ONNX importer (the "
                       "supported ops are listed in docs/Onnx.md)");
  int required = handler->second.minInputs < 0 ? std::max(1, n.input_size())
                                               : handler->second.minInputs;
  for (int k = 0; k < required; ++k)
    if (!hasInput(k))
      return error("expects ")
                 << required << " input(s), input " << k << " is missing",
             failure();
  for (int k = 0; k < n.input_size(); ++k)
    if (hasInput(k) && failed(lookup(input(k))))
      return failure();
  if (foldable(op)) {
    if (failed(fold(op)))
      return failure();
    // Results computed from a parameter remember their node (shape
    // functions aside: a shape does not depend on the values).
    static const llvm::StringSet<> shapeOnly = {"Shape", "Size"};
    bool fromParameter = false;
    for (int k = 0; k < n.input_size(); ++k)
      if (hasInput(k)) {
        const Entry &in = values[input(k)];
        fromParameter |= in.parameter || in.fromParameter;
      }
    if (fromParameter && !shapeOnly.contains(op))
      for (int k = 0; k < n.output_size(); ++k) {
        Entry &out = values[n.output(k)];
        out.fromParameter = true;
        out.producer = &n;
        out.producerIndex = index;
      }
    return success();
  }
  return convertRunning(op);
}

/// Converts the current node to ops that run (no folding).
LogicalResult Importer::convertRunning(StringRef op) {
  auto handler = ops().find(op);
  if (handler == ops().end() || !handler->second.convert)
    return unsupported(Twine("op type '") + op +
                       "' is only evaluated when the model is imported; "
                       "its inputs here are computed at run time");
  return handler->second.convert(*this, op);
}

/// A Constant's value, known at import.
/// Comparisons, logic and a computed mask on values known only when the
/// step runs: gptc evaluates them at import only.
LogicalResult Importer::unsupportedAtRunTime(Importer &I, StringRef op) {
  return I.unsupported(op + Twine(" on tensors computed at run time (gptc "
                                  "evaluates it only on values known at "
                                  "import)"));
}

LogicalResult Importer::convertConstant() {
  if (const auto *a = attr("value")) {
    OnnxTensorData data;
    std::string err;
    if (!decodeTensor(a->t(), data, err, externalDir()))
      return error(err), failure();
    defineKnown(0, toKnown(data));
  } else if (const auto *a = attr("value_float")) {
    defineKnown(0, Known::floats({}, {a->f()}, DT::TensorProto_DataType_FLOAT));
  } else if (const auto *a = attr("value_floats")) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    int64_t k = v.size();
    defineKnown(
        0, Known::floats({k}, std::move(v), DT::TensorProto_DataType_FLOAT));
  } else if (const auto *a = attr("value_int")) {
    defineKnown(0, Known::ints({}, {a->i()}));
  } else if (const auto *a = attr("value_ints")) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    int64_t k = v.size();
    defineKnown(0, Known::ints({k}, std::move(v)));
  } else {
    return unsupported("Constant without a tensor, float or int value");
  }
  return success();
}

/// The module's parameters as torch.onnx.export (torch.export) lists them
/// in the graph's `pkg.torch.export.ExportedProgram.graph_signature`
/// metadata (`p_x: PARAMETER target='x'` lines), or nothing when the model
/// has none. GraphProto's metadata_props (field 16) is newer than Debian's
/// ONNX 1.12 schema: it is read from the unknown fields.
static std::optional<llvm::StringSet<>>
exportedParameters(const onnx::GraphProto &graph) {
  const google::protobuf::UnknownFieldSet &unknown = graph.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    if (f.number() != 16 ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (!entry.ParseFromString(f.length_delimited()) ||
        entry.key() != "pkg.torch.export.ExportedProgram.graph_signature")
      continue;
    llvm::StringSet<> names;
    SmallVector<StringRef> lines;
    StringRef(entry.value()).split(lines, '\n');
    for (StringRef line : lines) {
      size_t at = line.find(": PARAMETER target='");
      if (at == StringRef::npos)
        continue;
      StringRef rest = line.drop_front(at + strlen(": PARAMETER target='"));
      names.insert(rest.take_until([](char c) { return c == '\''; }));
    }
    return names;
  }
  return std::nullopt;
}

FailureOr<OnnxImport> Importer::run(const onnx::ModelProto &model) {
  loc = FileLineColLoc::get(ctx, fileName, 0, 0);
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset == 0)
    opset = 1;
  if (opset < kMinOpset || opset > kMaxOpset)
    return emitError(loc, "the model imports ONNX opset ")
               << opset << "; gptc reads opsets " << kMinOpset << " to "
               << kMaxOpset,
           failure();
  const onnx::GraphProto &graph = model.graph();

  OnnxImport result;
  result.raiseLayers = options.raiseLayers;
  result.module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(result.module->getBody());
  auto func = func::FuncOp::create(b, loc, options.functionName,
                                   b.getFunctionType({}, {}));
  body = new Block();
  func.getBody().push_back(body);

  // 1. Initializers: known values; float ones are parameters (those the
  // exporter's signature names, where it has one).
  std::optional<llvm::StringSet<>> signature = exportedParameters(graph);
  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  if (signature)
    for (const auto &name : *signature)
      if (!initializerNames.contains(name.getKey()))
        result.foldedParameters.push_back(name.getKey().str());
  llvm::sort(result.foldedParameters);
  for (const auto &init : graph.initializer()) {
    auto data = std::make_unique<OnnxTensorData>();
    std::string err;
    if (!decodeTensor(init, *data, err, externalDir()))
      return emitError(loc, "initializer: ") << err, failure();
    Entry e;
    e.known = toKnown(*data);
    e.parameter = isFloatType(data->onnxType) &&
                  (!signature || signature->contains(init.name()));
    e.data = data.get();
    initializerData.push_back(std::move(data));
    values[init.name()] = std::move(e);
  }
  // 2. Inputs that are not initializers: arguments, with static shapes.
  SmallVector<std::string> inputNames;
  for (const auto &in : graph.input()) {
    if (values.count(in.name()))
      continue;
    if (auto bound = options.knownInputs.find(in.name());
        bound != options.knownInputs.end()) {
      Entry e;
      e.known = toKnown(bound->second);
      values[in.name()] = std::move(e);
      continue;
    }
    std::string what = "graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      return emitError(loc, what) << " is not a tensor", failure();
    const auto &tt = in.type().tensor_type();
    SmallVector<int64_t> shape;
    if (!tt.has_shape())
      return emitError(loc, what) << " has no shape", failure();
    for (const auto &[k, d] : llvm::enumerate(tt.shape().dim())) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        shape.push_back(d.dim_value());
        continue;
      }
      auto it = d.has_dim_param() ? options.dims.find(d.dim_param())
                                  : options.dims.end();
      if (it == options.dims.end())
        return emitError(loc, what)
                   << " has dynamic dimension " << k
                   << (d.has_dim_param() ? " ('" + d.dim_param() + "')"
                                         : std::string())
                   << ", which gptc cannot resolve: give it a size (gptc "
                      "--onnx-dim "
                   << (d.has_dim_param() ? d.dim_param() : "NAME") << "=N)",
               failure();
      shape.push_back(it->second);
    }
    FailureOr<Type> element = elementType(tt.elem_type(), what);
    if (failed(element))
      return failure();
    Value arg = body->addArgument(RankedTensorType::get(shape, *element), loc);
    values[in.name()].ir = arg;
    inputNames.push_back(in.name());
  }
  // 3. The nodes, in order.
  b.setInsertionPointToEnd(body);
  for (const auto &[index, n] : llvm::enumerate(graph.node()))
    if (failed(convert(n, index)))
      return failure();
  // 4. Outputs.
  loc = FileLineColLoc::get(ctx, fileName, 0, 0);
  node = nullptr;
  SmallVector<Value> outputs;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return emitError(loc, "graph output '")
                 << out.name() << "' is not computed by any node",
             failure();
    FailureOr<Value> v = it->second.ir ? FailureOr<Value>(it->second.ir)
                                       : materialize(out.name(), it->second);
    if (failed(v))
      return failure();
    outputs.push_back(*v);
  }
  func::ReturnOp::create(b, loc, outputs);
  func.setFunctionType(b.getFunctionType(body->getArgumentTypes(),
                                         ValueRange(outputs).getTypes()));
  for (unsigned k = 0; k < numParams; ++k)
    func.setArgAttr(k, kParamAttrName, b.getStringAttr(params[k]->name));
  for (auto [k, name] : llvm::enumerate(inputNames))
    func.setArgAttr(numParams + k, kInputAttrName,
                    InputAttr::get(b.getContext(), InputKind::Graph,
                                   b.getStringAttr(name), -1));
  for (auto [k, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(k, kOutputAttrName,
                       OutputAttr::get(b.getContext(), OutputKind::Graph,
                                       b.getStringAttr(out.name()), -1));
  for (const OnnxTensorData *p : params)
    result.parameters.push_back(*p);
  if (failed(mlir::verify(*result.module)))
    return failure();
  return result;
}

FailureOr<OnnxImport>
mlir::gptc::importOnnxModel(llvm::StringRef bytes, llvm::StringRef fileName,
                            MLIRContext *context,
                            const OnnxImportOptions &options) {
  context->loadDialect<GptcDialect, func::FuncDialect>();
  Location loc = FileLineColLoc::get(context, fileName, 0, 0);
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    return emitError(loc, "the model file is larger than 2 GiB, which "
                          "protobuf cannot read: save it with its weights "
                          "as external data (a .onnx.data file beside it)"),
           failure();
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    return emitError(loc, "not a serialized ONNX model (malformed or "
                          "truncated protobuf)"),
           failure();
  if (!model.has_graph())
    return emitError(loc, "the ONNX model has no graph"), failure();
  return Importer(context, fileName, options).run(model);
}

void mlir::gptc::registerOnnxImporterDialects(DialectRegistry &registry) {
  registry.insert<GptcDialect, func::FuncDialect>();
}
