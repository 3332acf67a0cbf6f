//===- GptcInterfaces.td - gptc op interfaces --------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Interfaces that gptc's analyses (model statistics, the sharding cost model)
// query on every op.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_TD
#define GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_TD

include "mlir/IR/OpBase.td"

def Gptc_CostModelOpInterface : OpInterface<"CostModelOpInterface"> {
  let cppNamespace = "::mlir::gptc";
  let description = [{
    Reports the arithmetic an op performs, so that gptc can count training
    FLOPs from the IR and, later, weigh sharding choices. Counts follow the
    usual convention: a multiply-add is two FLOPs; elementwise ops count the
    floating-point operations of their formula; pure data movement is zero.
    Causal attention is counted over the full T x T square, as the
    `6N + 12 L T C` convention (PaLM, llm.c) does.
  }];
  let methods = [
    InterfaceMethod<
      "Returns the floating-point operations of one execution of this op.",
      "int64_t", "getFlopCount">,
  ];
}

def Gptc_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::mlir::gptc";
  let description = [{
    The vector-Jacobian product of an op, used by `gptc-autodiff`. Given the
    gradients of the op's results (null where no gradient flows), the rule
    builds, at the builder's insertion point, the ops that compute the
    gradients of its operands and returns them in `operandGrads`, one per
    operand, null for an operand with no gradient (integer ids, labels).
    A rule may refer to the op's operands and results: those are the
    activations the backward pass keeps.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::llvm::LogicalResult", "buildVectorJacobianProduct",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_TD
