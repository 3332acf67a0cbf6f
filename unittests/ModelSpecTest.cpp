//===- ModelSpecTest.cpp - Model description parsing ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/ModelSpec.h"

#include "gptc/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::gptc;

namespace {

/// Parses `text` and records every diagnostic as "line:col: message".
struct Parsed {
  FailureOr<ModelDescription> desc = failure();
  std::vector<std::string> diags;
};

Parsed parse(MLIRContext &ctx, const std::string &text) {
  Parsed out;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    auto loc = dyn_cast<FileLineColLoc>(d.getLocation());
    out.diags.push_back((loc ? std::to_string(loc.getLine()) + ":" +
                                   std::to_string(loc.getColumn())
                             : std::string("?")) +
                        ": " + d.str());
    return success();
  });
  out.desc = ModelDescription::parse(text, "test.pbtxt", &ctx);
  return out;
}

const char *kMinimal = R"(model {
  vocab_size: 100
  context_length: 32
  num_layers: 2
  num_heads: 4
  model_dim: 32
}
training { batch_size: 6 seq_len: 16 }
)";

TEST(ModelSpec, DefaultsAreApplied) {
  MLIRContext ctx;
  Parsed p = parse(ctx, kMinimal);
  ASSERT_TRUE(succeeded(p.desc)) << (p.diags.empty() ? "" : p.diags[0]);
  const ModelConfig &m = p.desc->getConfig();
  EXPECT_EQ(m.mlpDim, 128);
  EXPECT_TRUE(m.tiedEmbeddings);
  EXPECT_TRUE(m.bias);
  EXPECT_DOUBLE_EQ(m.layerNormEpsilon, 1e-5);
  EXPECT_DOUBLE_EQ(m.initStd, 0.02);
  EXPECT_EQ(m.gradAccumSteps, 1);
  EXPECT_EQ(m.microBatchSize, 6);
  EXPECT_EQ(m.precision, Precision::FP32);
  EXPECT_EQ(p.desc->getName(), "test");
  EXPECT_TRUE(p.desc->getMeshAxes().empty());
}

/// A rate given for a reference batch is scaled to the batch (Goyal et
/// al.'s linear rule, or the square root); the flags replace the
/// description's rate and schedule before that.
TEST(ModelSpec, ReferenceBatchScalesTheRate) {
  MLIRContext ctx;
  std::string text = kMinimal;
  text.replace(text.find("training {"), 10,
               "training { optimizer { lr: 1e-3 reference_batch_size: 24 "
               "lr_scaling: SQRT }");
  Parsed p = parse(ctx, text);
  ASSERT_TRUE(succeeded(p.desc)) << (p.diags.empty() ? "" : p.diags[0]);
  const OptimizerConfig &o = p.desc->getConfig().optimizer;
  EXPECT_DOUBLE_EQ(o.lr, 5e-4); // 1e-3 x sqrt(6 / 24)
  EXPECT_DOUBLE_EQ(o.referenceLr, 1e-3);
  EXPECT_EQ(o.referenceBatch, 24);
  EXPECT_EQ(o.lrScaling, OptimizerConfig::LrScaling::Sqrt);

  text.replace(text.find("SQRT"), 4, "LINEAR");
  DescriptionOverrides flags;
  flags.lr = 2e-3;
  flags.warmupSteps = 7;
  flags.lrDecay = LrDecay::Linear;
  flags.minLrRatio = 0.25;
  FailureOr<ModelDescription> desc =
      ModelDescription::parse(text, "test.pbtxt", &ctx, flags);
  ASSERT_TRUE(succeeded(desc));
  const OptimizerConfig &f = desc->getConfig().optimizer;
  EXPECT_DOUBLE_EQ(f.lr, 5e-4); // --lr 2e-3 for 24 sequences, x 6 / 24
  EXPECT_EQ(f.warmupSteps, 7);
  EXPECT_EQ(f.decay, LrDecay::Linear);
  EXPECT_DOUBLE_EQ(f.minLrRatio, 0.25);
  EXPECT_EQ(describeLearningRate(desc->getConfig()),
            "5.00e-04 (2.00e-03 for a batch of 24, scaled linearly to 6), "
            "warm-up 7 steps, then linear to 1.25e-04 at step 1000");
}

TEST(ModelSpec, LocatesFields) {
  MLIRContext ctx;
  Parsed p = parse(ctx, kMinimal);
  ASSERT_TRUE(succeeded(p.desc));
  auto loc = cast<FileLineColLoc>(p.desc->locate({{"model"}, {"num_heads"}}));
  EXPECT_EQ(loc.getLine(), 5u);
  EXPECT_EQ(loc.getColumn(), 3u);
  // An absent field falls back to its enclosing block.
  loc = cast<FileLineColLoc>(p.desc->locate({{"model"}, {"mlp_ratio"}}));
  EXPECT_EQ(loc.getLine(), 1u);
  EXPECT_EQ(loc.getColumn(), 1u);
  loc = cast<FileLineColLoc>(p.desc->locate({{"training"}, {"seq_len"}}));
  EXPECT_EQ(loc.getLine(), 8u);
  EXPECT_EQ(loc.getColumn(), 26u);
}

/// Protobuf's tokenizer counts a tab as up to 8 columns; locations are in
/// bytes, so a caret lands under the field either way.
TEST(ModelSpec, TabsDoNotShiftColumns) {
  MLIRContext ctx;
  std::string text = kMinimal;
  text.replace(text.find("  num_heads"), 2, "\t");
  Parsed p = parse(ctx, text);
  ASSERT_TRUE(succeeded(p.desc));
  auto loc = cast<FileLineColLoc>(p.desc->locate({{"model"}, {"num_heads"}}));
  EXPECT_EQ(loc.getColumn(), 2u);
}

TEST(ModelSpec, UnevenBatchRoundsTheMicroBatchUp) {
  MLIRContext ctx;
  std::string text = kMinimal;
  text += "mesh { axis { name: \"dp\" size: 4 kind: DATA } }\n";
  Parsed p = parse(ctx, text);
  ASSERT_TRUE(succeeded(p.desc));
  EXPECT_EQ(p.desc->getConfig().dataParallel, 4);
  EXPECT_EQ(p.desc->getConfig().microBatchSize, 2); // ceil(6 / 4)
}

TEST(ModelSpec, ReportsEveryErrorAtItsField) {
  MLIRContext ctx;
  Parsed p = parse(ctx, R"(model {
  vocab_size: 0
  context_length: 32
  num_layers: 2
  num_heads: 5
  model_dim: 32
}
training { batch_size: 6 seq_len: 64 }
)");
  EXPECT_TRUE(failed(p.desc));
  ASSERT_EQ(p.diags.size(), 3u);
  EXPECT_EQ(p.diags[0], "2:3: 'vocab_size' must be positive, got 0");
  EXPECT_EQ(p.diags[1], "5:3: num_heads (5) must divide model_dim (32)");
  EXPECT_EQ(p.diags[2],
            "8:26: seq_len (64) exceeds the model's context_length (32)");
}

TEST(ModelSpec, SyntaxErrorHasALocation) {
  MLIRContext ctx;
  Parsed p = parse(ctx, "model {\n  vocab_size: 12\n  num_layers 3 3\n}\n");
  EXPECT_TRUE(failed(p.desc));
  ASSERT_FALSE(p.diags.empty());
  EXPECT_EQ(p.diags[0].substr(0, 2), "3:");
}

/// Every shipped model parses.
TEST(ModelSpec, ShippedModelsParse) {
  for (const char *name : {"tiny", "gpt2-124m", "gpt2-350m", "gpt2-774m",
                           "gpt2-1.5b", "gpt3-175b"}) {
    std::string path = std::string(GPTC_MODELS_DIR) + "/" + name + ".pbtxt";
    auto buffer = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(buffer)) << path;
    MLIRContext ctx;
    Parsed p = parse(ctx, (*buffer)->getBuffer().str());
    EXPECT_TRUE(succeeded(p.desc))
        << name << ": " << (p.diags.empty() ? "" : p.diags[0]);
  }
}

} // namespace
