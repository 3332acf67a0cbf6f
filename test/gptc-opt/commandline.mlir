// RUN: gptc-opt --help | FileCheck %s --check-prefix=HELP
// HELP: gptc optimizer driver
// HELP: Passes:
// HELP: --canonicalize
// HELP: --cse
// HELP: --gptc-autodiff
// HELP-NEXT: --function
// HELP-NEXT: --output
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

// Only the curated upstream passes are registered.
// RUN: gptc-opt --help | FileCheck %s --check-prefix=CURATED
// CURATED-NOT: --convert-linalg-to-loops
// CURATED-NOT: --affine-loop-fusion
// CURATED-NOT: --polly
// CURATED-NOT: --x86-

// RUN: gptc-opt --show-dialects | FileCheck %s --check-prefix=DIALECTS
// DIALECTS: Available Dialects: arith,bufferization,builtin,cf,func,gptc,linalg,llvm,math,memref,scf,shard,tensor

// RUN: gptc-opt --list-passes | FileCheck %s --check-prefix=LIST
// LIST: gptc-autodiff
// LIST: gptc-model-stats
// LIST: gptc-verify-model
