//===- GptcDialect.cpp - gptc dialect registration ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Dialect/Gptc/IR/GptcDialect.h"
#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gptc;

#include "gptc/Dialect/Gptc/IR/GptcOpsDialect.cpp.inc"

#include "gptc/Dialect/Gptc/IR/GptcEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "gptc/Dialect/Gptc/IR/GptcAttrs.cpp.inc"

void GptcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "gptc/Dialect/Gptc/IR/GptcOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "gptc/Dialect/Gptc/IR/GptcAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

FailureOr<APFloat> mlir::gptc::parseF64Parameter(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return APFloat(value);
}

FailureOr<bool> mlir::gptc::parseBoolParameter(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  if (word == "true")
    return true;
  if (word == "false")
    return false;
  return parser.emitError(loc, "expected 'true' or 'false'");
}

LogicalResult OptimizerAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, APFloat lrF, APFloat minLrF,
    int64_t warmupSteps, int64_t totalSteps, LrDecay decay, APFloat beta1F,
    APFloat beta2F, APFloat epsF, APFloat weightDecayF, bool decayEmbeddings,
    APFloat gradClipF, int64_t accumulationSteps, int64_t batchSize,
    APFloat initialLossScaleF, int64_t lossScaleGrowthInterval) {
  double lr = lrF.convertToDouble(), minLr = minLrF.convertToDouble(),
         beta1 = beta1F.convertToDouble(), beta2 = beta2F.convertToDouble(),
         eps = epsF.convertToDouble(),
         weightDecay = weightDecayF.convertToDouble(),
         gradClip = gradClipF.convertToDouble(),
         initialLossScale = initialLossScaleF.convertToDouble();
  if (!(lr >= 0) || !(minLr >= 0))
    return emitError() << "learning rates must be non-negative, got lr = " << lr
                       << ", min_lr = " << minLr;
  if (warmupSteps < 0 || totalSteps < 0)
    return emitError() << "step counts must be non-negative";
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return emitError() << "beta1 and beta2 must lie in [0, 1), got " << beta1
                       << " and " << beta2;
  if (!(eps > 0))
    return emitError() << "eps must be positive, got " << eps;
  if (!(weightDecay >= 0))
    return emitError() << "weight_decay must be non-negative";
  if (!(gradClip >= 0))
    return emitError() << "grad_clip must be non-negative (0: no clipping)";
  if (accumulationSteps < 1)
    return emitError() << "accumulation_steps must be >= 1, got "
                       << accumulationSteps;
  if (batchSize < 0)
    return emitError() << "batch_size must be non-negative";
  if (!(initialLossScale > 0) || lossScaleGrowthInterval < 1)
    return emitError() << "the initial loss scale must be positive and the "
                          "growth interval at least 1";
  return success();
}

FailureOr<SmallVector<MeshAxisKind>>
mlir::gptc::parseAxisKinds(AsmParser &parser) {
  SmallVector<MeshAxisKind> kinds;
  auto parseOne = [&]() -> ParseResult {
    llvm::SMLoc loc = parser.getCurrentLocation();
    std::string name;
    if (parser.parseString(&name))
      return failure();
    std::optional<MeshAxisKind> kind = symbolizeMeshAxisKind(name);
    if (!kind)
      return parser.emitError(loc, "axis kinds must be \"data\", \"tensor\", "
                                   "\"pipeline\" or \"context\", got \"")
             << name << "\"";
    kinds.push_back(*kind);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return failure();
  return kinds;
}

void mlir::gptc::printAxisKinds(AsmPrinter &printer,
                                ArrayRef<MeshAxisKind> kinds) {
  printer << "[";
  llvm::interleaveComma(kinds, printer, [&](MeshAxisKind kind) {
    printer << "\"" << stringifyMeshAxisKind(kind) << "\"";
  });
  printer << "]";
}

LogicalResult ParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayAttr axes, ArrayRef<MeshAxisKind> kinds,
                                   int64_t zeroStage, bool sequenceParallel,
                                   bool contextAllGather) {
  if (axes.size() != kinds.size())
    return emitError() << "needs one kind per axis, got " << axes.size()
                       << " axes and " << kinds.size() << " kinds";
  for (Attribute a : axes)
    if (!isa<StringAttr>(a))
      return emitError() << "axis names must be strings";
  if (zeroStage < 0 || zeroStage > 3)
    return emitError() << "zero_stage must be 0, 1, 2 or 3, got " << zeroStage;
  return success();
}

std::optional<unsigned> ParallelAttr::findAxis(MeshAxisKind kind) const {
  for (auto [i, k] : llvm::enumerate(getKinds()))
    if (k == kind)
      return static_cast<unsigned>(i);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Roles: gptc.input, gptc.output, gptc.state
//===----------------------------------------------------------------------===//

namespace {
/// What a role kind carries besides itself.
enum class RoleOperand { None, Name, Index };

RoleOperand operandOf(InputKind kind) {
  return kind == InputKind::Graph ? RoleOperand::Name
         : kind == InputKind::Cotangent || kind == InputKind::Saved
             ? RoleOperand::Index
             : RoleOperand::None;
}
RoleOperand operandOf(OutputKind kind) {
  return kind == OutputKind::Graph ? RoleOperand::Name
         : kind == OutputKind::Boundary || kind == OutputKind::Saved
             ? RoleOperand::Index
             : RoleOperand::None;
}
RoleOperand operandOf(StateKind kind) {
  return kind == StateKind::MomentM || kind == StateKind::MomentV
             ? RoleOperand::Name
             : RoleOperand::None;
}

/// `<kind>`, `<kind "name">` or `<kind index>`.
template <typename AttrT, typename KindT>
Attribute parseRole(AsmParser &parser,
                    std::optional<KindT> (*symbolize)(StringRef)) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseLess() || parser.parseKeyword(&word))
    return {};
  std::optional<KindT> kind = symbolize(word);
  if (!kind) {
    parser.emitError(loc, "unknown ")
        << AttrT::getMnemonic() << " kind '" << word << "'";
    return {};
  }
  StringAttr name;
  int64_t index = -1;
  switch (operandOf(*kind)) {
  case RoleOperand::Name: {
    std::string text;
    if (parser.parseString(&text))
      return {};
    name = parser.getBuilder().getStringAttr(text);
    break;
  }
  case RoleOperand::Index:
    if (parser.parseInteger(index))
      return {};
    break;
  case RoleOperand::None:
    break;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<AttrT>(loc, parser.getContext(), *kind, name, index);
}

template <typename KindT>
void printRole(AsmPrinter &printer, KindT kind, StringAttr name,
               int64_t index) {
  printer << "<" << stringifyEnum(kind);
  switch (operandOf(kind)) {
  case RoleOperand::Name:
    printer << " ";
    printer.printString(name.getValue());
    break;
  case RoleOperand::Index:
    printer << " " << index;
    break;
  case RoleOperand::None:
    break;
  }
  printer << ">";
}

template <typename KindT>
LogicalResult verifyRole(function_ref<InFlightDiagnostic()> emitError,
                         StringRef what, KindT kind, StringAttr name,
                         int64_t index) {
  RoleOperand operand = operandOf(kind);
  if ((operand == RoleOperand::Name) != bool(name))
    return emitError() << what << " '" << stringifyEnum(kind) << "' "
                       << (name ? "takes no name" : "needs a name");
  if (operand == RoleOperand::Name && name.getValue().empty())
    return emitError() << what << " '" << stringifyEnum(kind)
                       << "' needs a non-empty name";
  if ((operand == RoleOperand::Index) != (index >= 0))
    return emitError() << what << " '" << stringifyEnum(kind) << "' "
                       << (index >= 0 ? "takes no index"
                                      : "needs an index of at least 0");
  return success();
}
} // namespace

Attribute InputAttr::parse(AsmParser &parser, Type) {
  return parseRole<InputAttr, InputKind>(parser, symbolizeInputKind);
}
void InputAttr::print(AsmPrinter &printer) const {
  printRole(printer, getKind(), getName(), getIndex());
}
LogicalResult InputAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                InputKind kind, StringAttr name,
                                int64_t index) {
  return verifyRole(emitError, "input", kind, name, index);
}
std::string InputAttr::str() const {
  switch (getKind()) {
  case InputKind::Cotangent:
    return "pipeline.cot." + std::to_string(getIndex());
  case InputKind::Saved:
    return "pipeline.saved." + std::to_string(getIndex());
  case InputKind::Graph:
    return getName().str();
  default:
    return stringifyEnum(getKind()).str();
  }
}

Attribute OutputAttr::parse(AsmParser &parser, Type) {
  return parseRole<OutputAttr, OutputKind>(parser, symbolizeOutputKind);
}
void OutputAttr::print(AsmPrinter &printer) const {
  printRole(printer, getKind(), getName(), getIndex());
}
LogicalResult OutputAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 OutputKind kind, StringAttr name,
                                 int64_t index) {
  return verifyRole(emitError, "output", kind, name, index);
}
std::string OutputAttr::str() const {
  switch (getKind()) {
  case OutputKind::Boundary:
    return "pipeline.out." + std::to_string(getIndex());
  case OutputKind::Saved:
    return "pipeline.saved." + std::to_string(getIndex());
  case OutputKind::Graph:
    return getName().str();
  default:
    return stringifyEnum(getKind()).str();
  }
}

Attribute StateAttr::parse(AsmParser &parser, Type) {
  return parseRole<StateAttr, StateKind>(parser, symbolizeStateKind);
}
void StateAttr::print(AsmPrinter &printer) const {
  printRole(printer, getKind(), getName(), getIndex());
}
LogicalResult StateAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StateKind kind, StringAttr name,
                                int64_t index) {
  return verifyRole(emitError, "state", kind, name, index);
}
std::string StateAttr::str() const {
  switch (getKind()) {
  case StateKind::MomentM:
    return "m:" + getName().str();
  case StateKind::MomentV:
    return "v:" + getName().str();
  default:
    return stringifyEnum(getKind()).str();
  }
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat std, APFloat value,
                               int64_t rows) {
  if (kind == InitKind::Normal && !(std.convertToDouble() > 0))
    return emitError() << "a normal initializer needs std > 0";
  if (rows < 0)
    return emitError() << "rows must be at least 0, got " << rows;
  return success();
}

OptimizerAttr mlir::gptc::getOptimizerConfig(Operation *module) {
  return GptcDialect::OptimizerAttrHelper(module->getContext()).getAttr(module);
}

ParallelAttr mlir::gptc::getParallelConfig(Operation *module) {
  return GptcDialect::ParallelAttrHelper(module->getContext()).getAttr(module);
}

Precision mlir::gptc::getPrecision(Operation *module) {
  PrecisionAttr attr =
      GptcDialect::PrecisionAttrHelper(module->getContext()).getAttr(module);
  return attr ? attr.getValue() : Precision::FP32;
}

/// The module configuration must have its declared type: a dictionary where
/// `#gptc.optimizer<...>` belongs is an error here, not a silent "one
/// device" or "no optimizer" later.
LogicalResult GptcDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "'" << name << "' must be " << what;
  };
  if (name == OptimizerAttrHelper::getNameStr())
    return expect(isa<OptimizerAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a #gptc.optimizer<...> attribute on the module");
  if (name == ParallelAttrHelper::getNameStr())
    return expect(isa<ParallelAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a #gptc.parallel<...> attribute on the module");
  if (name == RecomputeAttrHelper::getNameStr())
    return expect(isa<RecomputeAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a #gptc.recompute<none|selective|full> attribute on the "
                  "module");
  if (name == PrecisionAttrHelper::getNameStr())
    return expect(isa<PrecisionAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a #gptc.precision<fp32|bf16|fp16> attribute on the module");
  if (name == NanPolicyAttrHelper::getNameStr())
    return expect(isa<NanPolicyAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a #gptc.nan_policy<stop|skip> attribute on the module");
  if (name == TensorParallelAttrHelper::getNameStr())
    return expect(isa<TensorParallelAttr>(attr.getValue()),
                  "a #gptc.tensor_parallel<column|row|vocab> attribute");
  return success();
}

/// The role attributes of arguments and results must have their types: a
/// string where `#gptc.input<...>` belongs is an error here, not a value
/// the exporter silently gives no role.
static LogicalResult verifyValueAttribute(Operation *op, NamedAttribute attr,
                                          StringRef where) {
  StringRef name = attr.getName().getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "'" << name << "' on " << where << " must be "
                           << what << ", got " << attr.getValue();
  };
  Attribute value = attr.getValue();
  if (name == GptcDialect::InputAttrHelper::getNameStr())
    return expect(isa<InputAttr>(value), "a #gptc.input<...> attribute");
  if (name == GptcDialect::OutputAttrHelper::getNameStr())
    return expect(isa<OutputAttr>(value), "a #gptc.output<...> attribute");
  if (name == GptcDialect::StateAttrHelper::getNameStr())
    return expect(isa<StateAttr>(value), "a #gptc.state<...> attribute");
  if (name == GptcDialect::InitAttrHelper::getNameStr())
    return expect(isa<InitAttr>(value), "a #gptc.init<...> attribute");
  return success();
}

LogicalResult GptcDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  return verifyValueAttribute(op, attr, "argument " + std::to_string(argIndex));
}

LogicalResult GptcDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  return verifyValueAttribute(op, attr,
                              "result " + std::to_string(resultIndex));
}

Operation *GptcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
