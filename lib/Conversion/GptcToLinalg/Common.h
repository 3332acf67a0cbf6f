//===- Common.h - Shared helpers of the gptc-to-linalg patterns -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Conversion/GptcToLinalg: building destination tensors and
// linalg.generic ops in the shape every pattern set uses.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_LIB_CONVERSION_GPTCTOLINALG_COMMON_H
#define GPTC_LIB_CONVERSION_GPTCTOLINALG_COMMON_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::gptc::linalg_lowering {

/// A tensor of `shape` and `element` type to write into (tensor.empty).
inline Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                         Type element) {
  return tensor::EmptyOp::create(b, loc, shape, element);
}

/// A tensor of `shape` filled with `value` (linalg.fill): the initial value
/// of a reduction.
inline Value filledTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                          FloatType element, double value) {
  Value init = emptyTensor(b, loc, shape, element);
  Value v = arith::ConstantOp::create(b, loc, element,
                                      b.getFloatAttr(element, value));
  return linalg::FillOp::create(b, loc, v, init).getResult(0);
}

/// The type reductions and products accumulate in: f32 for 16-bit floats,
/// the element type otherwise (what the runtime's kernels do).
inline FloatType accumulatorType(Type element) {
  auto f = cast<FloatType>(element);
  return f.getWidth() < 32 ? Float32Type::get(f.getContext()) : f;
}

/// Converts the float `v` to `to` (extf / truncf; identity when equal).
inline Value convertFloat(OpBuilder &b, Location loc, Value v, Type to) {
  auto from = cast<FloatType>(v.getType());
  auto target = cast<FloatType>(to);
  if (from == target)
    return v;
  if (from.getWidth() < target.getWidth())
    return arith::ExtFOp::create(b, loc, target, v);
  return arith::TruncFOp::create(b, loc, target, v);
}

/// Scalar arithmetic of one float type at one location, for the bodies of
/// generics and for the scalars of rank-0 tensors.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;
  FloatType type;

  Value c(double v) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value min(Value x, Value y) {
    return arith::MinimumFOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value lt(Value x, Value y) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, y);
  }
};

/// One linalg.generic over `rank` loops: `inputs` read through `inputMaps`,
/// `inits` written through `outputMaps`, `reduced` the loops that reduce.
inline linalg::GenericOp
buildGeneric(OpBuilder &b, Location loc, ValueRange inputs,
             ArrayRef<AffineMap> inputMaps, ValueRange inits,
             ArrayRef<AffineMap> outputMaps, int64_t rank,
             ArrayRef<int64_t> reduced,
             function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.append(outputMaps.begin(), outputMaps.end());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  for (int64_t d : reduced)
    iterators[d] = utils::IteratorType::reduction;
  SmallVector<Type> types;
  for (Value v : inits)
    types.push_back(v.getType());
  return linalg::GenericOp::create(b, loc, types, inputs, inits, maps,
                                   iterators, body);
}

/// A reduction of the same-shaped `inputs` over every dimension into a
/// rank-0 tensor of `acc` starting from `init`: `combine` takes the
/// inputs' elements and the running value and returns the next one.
inline Value reduceAll(
    OpBuilder &b, Location loc, ValueRange inputs, FloatType acc, double init,
    function_ref<Value(OpBuilder &, Location, ValueRange, Value)> combine) {
  int64_t rank = cast<RankedTensorType>(inputs[0].getType()).getRank();
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(rank));
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < rank; ++d)
    all.push_back(d);
  Value start = emptyTensor(b, loc, {}, acc);
  start = linalg::FillOp::create(
              b, loc,
              arith::ConstantOp::create(b, loc, acc, b.getFloatAttr(acc, init))
                  .getResult(),
              start)
              .getResult(0);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::reduction);
  maps.push_back(AffineMap::get(rank, 0, {}, b.getContext()));
  return linalg::GenericOp::create(
             b, loc, TypeRange{start.getType()}, inputs, ValueRange{start},
             maps, iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   nb, l, combine(nb, l, args.drop_back(), args.back()));
             })
      .getResult(0);
}

/// The map from `rank` loops to the loops except those in `dropped`.
inline AffineMap dropDims(MLIRContext *ctx, int64_t rank,
                          ArrayRef<int64_t> dropped) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dropped, d))
      exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

/// `v` (a tensor of the accumulator type) rounded elementwise to
/// `element`; `v` itself when it already has that type.
inline Value roundTensor(OpBuilder &b, Location loc, Value v, Type element) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == element)
    return v;
  Value out = emptyTensor(b, loc, type.getShape(), element);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return buildGeneric(b, loc, {v}, {id}, {out}, {id}, type.getRank(), {},
                      [&](OpBuilder &nb, Location l, ValueRange args) {
                        linalg::YieldOp::create(
                            nb, l, convertFloat(nb, l, args[0], element));
                      })
      .getResult(0);
}

} // namespace mlir::gptc::linalg_lowering

#endif // GPTC_LIB_CONVERSION_GPTCTOLINALG_COMMON_H
