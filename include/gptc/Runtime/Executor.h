//===- Executor.h - Run a compiled gptc function on the CPU ----*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime side of the artifact (program.proto): checks a Function once,
// then runs its kernels in order on host buffers. It does not depend on
// MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_H
#define GPTC_RUNTIME_EXECUTOR_H

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/KernelProfile.h"
#include "gptc/Runtime/Tensor.h"
#include "gptc/Runtime/program.pb.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator;
class KernelLibrary;

/// Runs one Function.
class Executor : public FunctionRunner {
public:
  /// Checks `function` (value ids, types, kernel arities) and allocates its
  /// values. Returns null with `error` set on a malformed function.
  /// COMPILED kernels are looked up in `kernels` (the program's
  /// kernel_library, loaded), which must outlive the executor.
  static std::unique_ptr<Executor>
  create(const program::Function &function, std::string &error,
         const KernelLibrary *kernels = nullptr);

  /// Runs the function on `inputs` (in the function's input order, with
  /// the declared types) and returns its outputs. On a runtime error (an
  /// id outside the vocabulary, a non-finite loss is not an error) returns
  /// false with `error` naming the kernel's location.
  ///
  /// An output tensor the caller passes in with the output's type and
  /// owned storage is written in place, with no copy: a training loop
  /// passes last step's state back as this step's output buffers.
  bool run(const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs, std::string &error) override;

  const program::Function &getFunction() const override { return function; }

  /// Whether output `output` may be computed in the buffer of input
  /// `input` (the caller passing one buffer as both): every kernel that
  /// reads the input runs before the kernel that writes the output, or is
  /// that kernel and updates elementwise (AdamW). A training loop updates
  /// its state in place this way instead of double-buffering it.
  bool canOverwriteInput(int output, int input) const override {
    return runtime::canOverwriteInput(function, output, input);
  }

  /// The processes collectives run over; without one, a collective over
  /// more than one device is an error.
  void setCommunicator(Communicator *c) override;

  /// Fault injection, for testing overflow handling: in the next run, the
  /// first kernel of kind `op` finds +inf in element 0 of its first input
  /// (a floating-point tensor the run computed). Returns false when the
  /// function has no such kernel.
  bool injectInfinityBefore(program::OpKind op) override;

  /// Time every kernel from now on (from zero); `profile()` lists them.
  void enableProfiling() override;
  void setTrace(TraceRecorder *t) override;
  std::vector<KernelTime> profile() const override;

private:
  explicit Executor(const program::Function &function);
  bool runKernel(const program::Kernel &kernel, std::string &error);
  /// all-reduce, all-gather, reduce-scatter and all-slice. With `async`,
  /// the calls that need nothing done after them are started
  /// non-blocking and their requests added to `async` (the run waits for
  /// them where the collective schedule says); the others complete here.
  /// shard.shift (ring attention's passing of blocks), point to point.
  bool runShift(const program::Kernel &kernel, const std::vector<int64_t> &grid,
                std::string &error, std::vector<int64_t> *async = nullptr);
  bool runCollective(const program::Kernel &kernel, std::string &error,
                     std::vector<int64_t> *async = nullptr);
  /// ALL_REDUCE of a bucket (n inputs, n outputs): one call, in place over
  /// the span when the plan made one, else packed in `bucketScratch`.
  bool runBucket(const program::Kernel &kernel,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, int64_t ranks,
                 std::string &error, std::vector<int64_t> *async);
  /// ALL_GATHER or REDUCE_SCATTER of a bucket (n inputs, n outputs, blocks
  /// along dimension 0): the small blocks (under 256 KiB) in one call,
  /// each rank's packed one after another in `bucketScratch`; each large
  /// one in a call of its own, without copies.
  bool runBlocksBucket(const program::Kernel &kernel,
                       const std::vector<int64_t> &grid,
                       const std::vector<int64_t> &axes, int64_t ranks,
                       std::string &error, std::vector<int64_t> *async);
  /// The communicator's collectives, started into `async` when it is
  /// given, else run to completion.
  bool allReduceCall(void *data, int64_t count, program::DType dtype,
                     const std::vector<int64_t> &grid,
                     const std::vector<int64_t> &axes, bool max,
                     std::vector<int64_t> *async, std::string &error);
  bool allGatherCall(const void *in, void *out, int64_t count,
                     program::DType dtype, const std::vector<int64_t> &grid,
                     const std::vector<int64_t> &axes,
                     std::vector<int64_t> *async, std::string &error);
  bool reduceScatterCall(const void *in, void *out, int64_t count,
                         program::DType dtype, const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes,
                         std::vector<int64_t> *async, std::string &error);
  /// Runs the kernels in order: a collective the schedule lets overlap
  /// later kernels is started and waited for before the first kernel that
  /// needs it (`overlapWait`), when the communicator overlaps.
  bool runKernels(std::string &error);
  /// Waits for the collectives in flight that kernel `at` (the kernel
  /// count: the end) needs; on `failed`, for all of them, quietly.
  bool waitInFlight(size_t at, std::string &error, bool failed = false);
  /// ACCUMULATE: the body once per microbatch, outputs summed.
  bool runAccumulate(const program::Kernel &kernel, std::string &error);
  /// COMPILED: a generated kernel, its rows split over the threads.
  bool runCompiled(const program::Kernel &kernel, std::string &error);

  program::Function function;
  /// Every value, by id: a view into `arena` when the program planned it,
  /// owned otherwise.
  std::vector<Tensor> values;
  /// The planned values' memory (64-byte aligned).
  std::unique_ptr<std::byte[], void (*)(void *)> arena{nullptr, std::free};
  /// Inputs bound for the current run (by value id), to avoid copies.
  std::vector<const Tensor *> bound;
  /// An ACCUMULATE body's: run returns views of its outputs' own storage
  /// (planned in its arena), valid until its next run, instead of owning
  /// copies: the loop adds them into the sums without a second
  /// model-sized buffer, which the buffer plan does not count.
  bool viewOutputs = false;
  bool profiling = false;
  TraceRecorder *trace = nullptr;
  /// The kernel that injectInfinityBefore poisons in the next run, or -1.
  int poisonKernel = -1;
  Communicator *communicator = nullptr;
  /// The entry points of COMPILED kernels.
  std::map<const program::Kernel *, void (*)(void **, int64_t, int64_t)>
      entries;
  /// The executors of ACCUMULATE kernels' bodies.
  std::map<const program::Kernel *, std::unique_ptr<Executor>> bodies;
  /// Per kernel: for a collective that may overlap later kernels, the
  /// kernel before which the run waits for it (the kernel count: at the
  /// end); 0 for the others (CollectiveSchedule, with several collectives
  /// in flight at once).
  std::vector<size_t> overlapWait;
  /// Collectives in flight: the kernel each waits before, the
  /// collective's kernel index, its requests.
  struct InFlight {
    size_t waitBefore, kernel;
    std::vector<int64_t> requests;
  };
  std::vector<InFlight> inFlight;
  /// Values in the caller's buffers this run (bound inputs, outputs
  /// written in place): a collective touching one completes inline, since
  /// the schedule does not see how the caller's buffers alias.
  std::vector<char> callerBuffer;
  /// Packs the tensors of a bucket that is not contiguous in the arena.
  std::vector<std::byte> bucketScratch;
  /// The profile: each kernel's own time, the bodies' after.
  KernelTimes times;
};

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_EXECUTOR_H
