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

#endif // GPTC_DIALECT_GPTC_IR_GPTCINTERFACES_TD
