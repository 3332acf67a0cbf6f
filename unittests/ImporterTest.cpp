//===- ImporterTest.cpp - Imported IR against closed forms ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/Importer.h"
#include "gptc/Analysis/ModelSize.h"
#include "gptc/Analysis/ModelStats.h"
#include "gptc/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mlir::gptc;

namespace {

struct Shape {
  int64_t vocab, layers, heads, dim, ratio;
  bool tied, bias;
};

std::string describe(const Shape &s) {
  return "model { vocab_size: " + std::to_string(s.vocab) +
         " context_length: 64 num_layers: " + std::to_string(s.layers) +
         " num_heads: " + std::to_string(s.heads) +
         " model_dim: " + std::to_string(s.dim) +
         " mlp_ratio: " + std::to_string(s.ratio) +
         " tied_embeddings: " + (s.tied ? "true" : "false") +
         " bias: " + (s.bias ? "true" : "false") +
         " }\ntraining { batch_size: 3 seq_len: 32 }\n";
}

/// The IR's parameters and matmul FLOPs agree with the closed forms for
/// tied/untied heads, with and without biases.
TEST(Importer, IrAgreesWithClosedForm) {
  for (Shape s :
       {Shape{97, 2, 4, 32, 4, true, true}, Shape{97, 3, 2, 16, 2, false, true},
        Shape{50, 1, 1, 8, 3, true, false},
        Shape{64, 2, 8, 64, 4, false, false}}) {
    DialectRegistry registry;
    registerAllDialects(registry);
    MLIRContext ctx(registry);
    FailureOr<ModelDescription> desc =
        ModelDescription::parse(describe(s), "t.pbtxt", &ctx);
    ASSERT_TRUE(succeeded(desc));
    OwningOpRef<ModuleOp> module = importModel(*desc, &ctx);
    ASSERT_TRUE(succeeded(verify(*module)));
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    ModelStats stats = computeModelStats(forward);
    std::optional<ModelSize> size = computeModelSize(desc->getConfig());
    EXPECT_EQ(stats.numParams, size->totalParams);
    EXPECT_EQ(stats.tokens, 3 * 32);
    EXPECT_EQ(stats.uncountedOps, 0);

    // Forward FLOPs per token, exactly: linear layers 2 x (weights) + biases,
    // the head 2 V C, attention 4 T C + 5 H T per layer, plus the
    // elementwise ops (layer norms 8C, GELU 8F, adds C, loss 5V).
    int64_t C = s.dim, F = s.dim * s.ratio, T = 32, V = s.vocab, L = s.layers;
    int64_t perLayer = 2 * (4 * C * C + 2 * C * F) +
                       (s.bias ? 4 * C + F + C : 0) + 4 * T * C +
                       5 * s.heads * T + 2 * 8 * C + 8 * F + 2 * C;
    int64_t perToken =
        C /*embed add*/ + L * perLayer + 8 * C /*ln_f*/ + 2 * V * C + 5 * V;
    EXPECT_EQ(stats.forwardFlops, 3 * 32 * perToken);
  }
}

} // namespace
