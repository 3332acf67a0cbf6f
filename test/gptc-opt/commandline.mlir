// RUN: gptc-opt --help | FileCheck %s --check-prefix=HELP
// HELP: gptc optimizer driver
// HELP: Passes:
// HELP: --canonicalize
// HELP: --cse
// HELP: --gptc-autodiff
// HELP-NEXT: --function
// HELP-NEXT: --output
// HELP: --gptc-gpu-map-kernel
// HELP-NEXT: --block-size
// HELP: --gptc-gpu-merge-modules
// HELP: --gptc-model-stats
// HELP-NEXT: --annotate
// HELP-NEXT: --remarks
// HELP: --gptc-verify-model
// HELP: --inline
// HELP: --shard-partition
// HELP: --sharding-propagation
// HELP: --symbol-dce
// HELP: Pass Pipelines:
// HELP: --gptc-frontend-pipeline
// HELP-NEXT: --verify-model
// HELP: --gptc-gpu-kernel-lowering-pipeline
// HELP-NEXT: --block-size
// HELP-NEXT: --chip
// HELP-NEXT: --elements-per-thread
// HELP-NEXT: --features
// HELP-NEXT: --format
// HELP-NEXT: --opt-level
// HELP-NEXT: --row-registers
// HELP-NEXT: --toolkit
// HELP-NEXT: --warps-per-block
// HELP: --gptc-train-pipeline
// HELP-NEXT: --bucket-bytes
// HELP-NEXT: --gemm-epilogues
// HELP-NEXT: --kernel-target
// HELP-NEXT: =cpu
// HELP-NEXT: =cuda
// HELP-NEXT: --kernels

// Only the curated upstream passes are registered.
// RUN: gptc-opt --help | FileCheck %s --check-prefix=CURATED
// CURATED-NOT: --convert-linalg-to-loops
// CURATED-NOT: --affine-loop-fusion
// CURATED-NOT: --polly
// CURATED-NOT: --x86-

// RUN: gptc-opt --show-dialects | FileCheck %s --check-prefix=DIALECTS
// DIALECTS: Available Dialects: affine,arith,bufferization,builtin,cf,func,gptc,gpu,linalg,llvm,math,memref,nvvm,scf,shard,tensor

// RUN: gptc-opt --list-passes | FileCheck %s --check-prefix=LIST
// LIST: gptc-autodiff
// LIST: gptc-model-stats
// LIST: gptc-verify-model

// A diagnostic names its op by location only: gptc-opt and gptc turn
// MLIR's --mlir-print-op-on-diagnostic off (tiny's model-stats remark
// printed its whole function, 7 KB); the flag brings it back.
// RUN: gptc %models/tiny.pbtxt --emit=mlir -o %t.model.mlir
// RUN: gptc-opt %t.model.mlir -p 'builtin.module(func.func(gptc-model-stats))' -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// REMARK: tiny.pbtxt:{{[0-9]+}}:{{[0-9]+}}: remark: gptc.model: 124672 parameters
// REMARK-NOT: see current operation
// RUN: gptc-opt %t.model.mlir -p 'builtin.module(func.func(gptc-model-stats))' --mlir-print-op-on-diagnostic -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTED
// OPTED: see current operation
