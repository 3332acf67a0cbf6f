//===- KernelProfile.h - Where a step's time goes, and how well -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `--profile`: every kernel's time (FunctionRunner::profile) with what it
// costs (bytes of its operands, FLOPs of a GEMM or attention), summed by
// kind and by class, the GEMMs' FLOP/s and the memory-bound kernels'
// bandwidth against the backend's measured copy (Backend::copyBandwidth),
// and the slowest kernels of each. `--profile-json FILE` writes the same
// per kernel, with its operands' types, for bench/kernel_efficiency.py,
// which times the same GEMMs alone in PyTorch.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_KERNELPROFILE_H
#define GPTC_RUNTIME_KERNELPROFILE_H

#include "gptc/Runtime/Backend.h"

#include <ostream>
#include <string>
#include <vector>

namespace gptc::runtime {

/// Each kernel's own time in a function's runs since profiling was enabled
/// (`--profile`), with the times of its ACCUMULATE kernels' bodies (run by
/// runners of their own) listed after it: what every backend's runner (the
/// CPU's Executor, the CUDA runner) keeps, however it measures.
class KernelTimes {
public:
  /// Starts counting `function`'s kernels from zero; the bodies are added
  /// again (addBody) in their kernels' order.
  void reset(const program::Function &function);
  bool enabled() const { return function != nullptr; }
  /// Kernel `index` ran once, for `seconds` of its own (its body's kernels
  /// left out). Nothing is counted before reset.
  /// `again`: more of the same call (the wait for a collective a runner
  /// started earlier), not another one.
  void add(int index, double seconds, bool again = false);
  void addBody(const KernelTimes &body) { bodies.push_back(&body); }
  /// Every second counted, the bodies' included.
  double totalSeconds() const;
  /// The kernels that ran, this function's in order, then the bodies'.
  std::vector<KernelTime> kernels() const;

private:
  const program::Function *function = nullptr;
  std::vector<double> seconds;
  std::vector<int64_t> calls;
  std::vector<const KernelTimes *> bodies;
};

/// What one call of a kernel costs, from its operands' types.
struct KernelCost {
  enum Class {
    /// LINEAR, MATMUL: judged by FLOP/s.
    Gemm,
    /// CAUSAL_ATTENTION(_GRAD): FLOP/s.
    Attention,
    /// Collectives: their time is communication.
    Collective,
    /// Everything else that reads and writes tensors (the generated fused
    /// kernels, layer norm, AdamW, embeddings, ...): bytes per second.
    Memory,
    /// Views, constants and scalar bookkeeping (RESHAPE, CONSTANT, IOTA,
    /// LEARNING_RATE, ...) and ACCUMULATE's own adds.
    Other,
  };
  Class cls = Other;
  /// Each input and each output once (an embedding's table: the rows it
  /// reads): the least traffic the kernel can have, what an effective
  /// bandwidth counts.
  double bytes = 0;
  /// Multiply-adds count two: a GEMM's 2 M N K per batch; causal
  /// attention's half of the full count (forward 4 B T^2 C, backward 2.5
  /// times that).
  double flops = 0;
};

KernelCost kernelCost(const program::Function &function,
                      const program::Kernel &kernel);
const char *className(KernelCost::Class cls);

/// What profiles, traces and stream listings call kernel `k`: a generated
/// kernel's own name (not the symbol it may share with kernels of the same
/// body), else its op.
std::string kernelName(const program::Kernel &k);

/// Memory-bound kernels moving less than this a call are reported as small
/// (launch- and latency-bound), not against the copy's bandwidth.
constexpr double kSmallKernelBytes = 1 << 20;

/// Prints the profile of `steps` steps of `stepSeconds` each (wall time;
/// `afterFirst`: the steps after a run's first) to `log`: time by kernel
/// kind, then by class with each class's rate, then the slowest GEMMs and
/// memory-bound kernels. `copyBandwidth` in bytes per second (0: unknown).
/// Leaves `log`'s format flags as they were.
void printKernelProfile(std::ostream &log, const std::string &function,
                        const std::vector<KernelTime> &kernels, int64_t steps,
                        bool afterFirst, double stepSeconds,
                        double copyBandwidth);

/// The same as JSON (docs/Runtime.md, "Profiles"); false with `error` when
/// `path` cannot be written.
bool writeKernelProfile(const std::string &path, const std::string &function,
                        const std::vector<KernelTime> &kernels, int64_t steps,
                        double stepSeconds, double copyBandwidth,
                        const std::string &device, std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_KERNELPROFILE_H
