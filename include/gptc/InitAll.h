//===- InitAll.h - Register gptc's dialects and passes --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_INITALL_H
#define GPTC_INITALL_H

namespace llvm::cl {
class OptionCategory;
} // namespace llvm::cl

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::gptc {

/// Registers gptc's dialect and the upstream dialects gptc's IR uses
/// (func, arith, tensor, shard).
void registerAllDialects(DialectRegistry &registry);

/// Registers gptc's passes, its named pipelines and the curated upstream
/// passes it uses (canonicalize, cse, inline, symbol-dce,
/// sharding-propagation, shard-partition).
void registerAllPasses();

/// The gptc dialect alone, with its external models of upstream ops (what
/// the mlir-opt plugin adds to a tool that has the upstream dialects).
void registerGptcDialects(DialectRegistry &registry);

/// gptc's own passes and named pipelines, without the upstream passes
/// registerAllPasses adds (the mlir-opt plugin's).
void registerGptcPassesAndPipelines();

/// libLLVM.so registers every backend's command-line options; hide all
/// options registered so far except MLIR's (`--mlir-*`), the generic ones
/// (--help, --version, --color), those of `keep` and of every category whose
/// name starts with "gptc", so that a tool's
/// --help lists what matters to gptc's users.
void hideUnrelatedCommandLineOptions(llvm::cl::OptionCategory *keep = nullptr);

} // namespace mlir::gptc

#endif // GPTC_INITALL_H
