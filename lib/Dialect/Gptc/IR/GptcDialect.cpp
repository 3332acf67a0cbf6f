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
      return parser.emitError(loc, "axis kinds must be \"data\", \"tensor\" "
                                   "or \"pipeline\", got \"")
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
                                   int64_t zeroStage, bool sequenceParallel) {
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
  return success();
}

Operation *GptcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
