//===- Importer.h - Model description to gptc IR --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_IMPORTER_H
#define GPTC_FRONTEND_IMPORTER_H

#include "gptc/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::gptc {

/// Builds the forward graph of `description` as a gptc model module:
/// a `shard.grid @mesh` when the description has a mesh, and
///
///   func.func @forward(<params>..., %tokens, %labels) -> tensor<f32>
///
/// for one micro-batch, with every op located at the description field that
/// determines it and named after the module path it belongs to
/// (`loc("h.3.mlp.c_fc"("tiny.pbtxt":8:3))`). Parameters follow PyTorch's
/// GPT-2 names and `nn.Linear` layout (out x in).
OwningOpRef<ModuleOp> importModel(const ModelDescription &description,
                                  MLIRContext *context);

/// Builds `func.func @logits(<params>..., %tokens: [batch x seq_len])` that
/// returns the logits (`batch x seq_len x vocab`), for sampling.
OwningOpRef<ModuleOp> importLogits(const ModelDescription &description,
                                   MLIRContext *context, int64_t batch);

/// Puts the description's training settings on `module`, as importModel
/// does: the precision, NaN policy, recomputation, the mesh as a
/// `shard.grid` with the axes' roles, and the optimizer's settings. The
/// ONNX path uses it for an imported graph.
void setTrainingAttributes(ModuleOp module,
                           const ModelDescription &description);

/// Registers the dialects the imported module uses.
void registerImporterDialects(DialectRegistry &registry);

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_IMPORTER_H
