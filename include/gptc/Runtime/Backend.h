//===- Backend.h - What runs a program's functions -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The trainer runs @train_step and @forward through a Backend: the CPU's
// (the default: Executor over host buffers and the program's kernel
// library) or a device's (the CUDA runtime, lib/Runtime/CUDA). A device
// backend keeps the tensors the trainer marks resident (parameters,
// moments, scalar state) in device memory between runs and copies them
// to the host only when the trainer asks (checkpoints, dumps).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_BACKEND_H
#define GPTC_RUNTIME_BACKEND_H

#include "gptc/Runtime/Tensor.h"
#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator;
class TraceRecorder;

/// One kernel's time in the runs since profiling was enabled: on the CPU
/// the wall time of the call, on a GPU the device's time between events
/// around its launches.
struct KernelTime {
  /// The function whose kernel it is (a body's, for an ACCUMULATE's).
  const program::Function *function = nullptr;
  int kernel = 0;
  double seconds = 0;
  int64_t calls = 0;
};

/// Runs one Function (see Executor for the contract of each method).
class FunctionRunner {
public:
  virtual ~FunctionRunner();
  /// Runs the function on `inputs`; outputs passed with the output's type
  /// and storage are written in place.
  virtual bool run(const std::vector<const Tensor *> &inputs,
                   std::vector<Tensor> &outputs, std::string &error) = 0;
  virtual const program::Function &getFunction() const = 0;
  /// Whether output `output` may be computed in input `input`'s buffer.
  virtual bool canOverwriteInput(int output, int input) const = 0;
  virtual void setCommunicator(Communicator *c) = 0;
  /// Fault injection: +inf in element 0 of the first input of the next
  /// run's first kernel of kind `op`; false when there is none.
  virtual bool injectInfinityBefore(program::OpKind op) = 0;
  /// Times every kernel of later runs, from zero (again, when called a
  /// second time: the trainer restarts the clock after the first step).
  virtual void enableProfiling() = 0;
  /// Record every kernel of later runs in `trace` (null: stop).
  virtual void setTrace(TraceRecorder *trace) { (void)trace; }
  /// Every kernel that ran since profiling was enabled, with its own time:
  /// an ACCUMULATE's excludes its body's kernels, which are listed with
  /// the body's function.
  virtual std::vector<KernelTime> profile() const = 0;
};

/// Whether `function`'s output `output` may be computed in the buffer of
/// its input `input`: every kernel that reads the input runs before the
/// kernel that writes the output, or is that kernel and updates
/// elementwise (AdamW).
bool canOverwriteInput(const program::Function &function, int output,
                       int input);

/// A range of a resident f32 tensor's elements (the pipeline's state).
struct StateSpan {
  const Tensor *tensor = nullptr;
  int64_t begin = 0, count = 0;
};

/// One tensor of a multi-tensor AdamW on resident state: elements
/// [begin, begin + count) of the parameter and its gradient, and the
/// moments' first `count` elements (ZeRO's slice, or the whole tensor).
/// A parameter held as its slice alone (ZeRO-3) starts at `paramBegin`
/// instead (0; -1: at `begin`, as the gradient).
struct StateAdamW {
  const Tensor *param = nullptr, *grad = nullptr, *m = nullptr, *v = nullptr;
  int64_t begin = 0, count = 0;
  double weightDecay = 0;
  int64_t paramBegin = -1;
  int64_t paramOffset() const { return paramBegin < 0 ? begin : paramBegin; }
};

class Backend {
public:
  virtual ~Backend();
  /// "cpu", or the device's name and index.
  virtual std::string describe() const = 0;
  virtual std::unique_ptr<FunctionRunner>
  createRunner(const program::Function &function, std::string &error) = 0;
  /// Whether resident tensors have a second copy in memory of the
  /// backend's own (a device's), which only its runs and state operations
  /// may read and write; false: they compute in the host tensors, and an
  /// output a run returns in its own buffers is host memory too.
  virtual bool hasDeviceMemory() const { return false; }
  /// `t`'s storage holds state the runs read and write: a device keeps it
  /// in its own memory between runs, keyed by `t.raw()`, which must stay
  /// valid while the backend lives.
  virtual void keepResident(const Tensor &t) { (void)t; }
  /// `t` is no longer resident (its storage is about to go).
  virtual void release(const Tensor &t) { (void)t; }
  /// The host copies of resident tensors are brought up to date.
  virtual bool syncToHost(std::string &error) {
    (void)error;
    return true;
  }
  /// The caller wrote resident tensors on the host: the next run reads
  /// them from there.
  virtual void hostChanged() {}
  /// The caller wrote the resident tensor `t` on the host (and no run
  /// wrote it since the last syncToHost): the next run that reads it
  /// copies it from there, into the device memory it already has.
  virtual void hostWrote(const Tensor &t) { (void)t; }

  /// Bytes read plus bytes written per second by a large copy within the
  /// backend's memory (the ceiling memory-bound kernels are judged
  /// against in `--profile`), measured now: the best of a few copies (the
  /// CPU: 256 MiB, split over the runtime's threads; a GPU: 1 GiB,
  /// device to device). 0 when it cannot be measured.
  virtual double copyBandwidth();

  /// Arithmetic and collectives on resident f32 state where it lives (the
  /// pipeline trainer's gradient sums and update: on the device for a
  /// GPU, so that neither gradients nor parameters cross to the host each
  /// step). Tensors are named by their host Tensor (keepResident); the
  /// results stay where the state lives until syncToHost. The defaults run
  /// on the host, through stateMemory, with the Communicator's
  /// collectives; a device overrides all of them. Each fails with `error`
  /// on a tensor that is not resident (where residency matters) or on a
  /// failed call.
  ///
  /// Operands need not be resident where hasDeviceMemory() is false.
  ///
  /// t = 0.
  virtual bool stateZero(const Tensor &t, std::string &error);
  /// dst += src (same shape).
  virtual bool stateAdd(const Tensor &dst, const Tensor &src,
                        std::string &error);
  /// The span *= factor.
  virtual bool stateScale(const StateSpan &span, float factor,
                          std::string &error);
  /// dst's span = src's (the same count; distinct tensors).
  virtual bool stateCopy(const StateSpan &dst, const StateSpan &src,
                         std::string &error);
  /// The sum of the squares of the spans' elements, in f64, on the host.
  virtual bool stateSumOfSquares(const std::vector<StateSpan> &spans,
                                 double &sum, std::string &error);
  /// AdamW (cpu::adamw's arithmetic) on each tensor, in place.
  virtual bool stateAdamW(const std::vector<StateAdamW> &tensors, double lr,
                          int64_t step, double scale, double beta1,
                          double beta2, double eps, std::string &error);
  /// t = the sum of t over the group over `axes` (Communicator's terms).
  virtual bool stateAllReduceSum(const Tensor &t, Communicator &comm,
                                 const std::vector<int64_t> &grid,
                                 const std::vector<int64_t> &axes,
                                 std::string &error);
  /// `mine` (a span of t, as long as t over the group's size) = this
  /// rank's block of the sum of t over the group; the rest of t is left
  /// as it was.
  virtual bool stateReduceScatterSum(const Tensor &t, const StateSpan &mine,
                                     Communicator &comm,
                                     const std::vector<int64_t> &grid,
                                     const std::vector<int64_t> &axes,
                                     std::string &error);
  /// The whole of `mine.tensor` = every rank's span `mine`, in group order.
  virtual bool stateAllGather(const StateSpan &mine, Communicator &comm,
                              const std::vector<int64_t> &grid,
                              const std::vector<int64_t> &axes,
                              std::string &error);

protected:
  /// Where the current value of `t` is, in host memory, for the default
  /// state operations; `write`: they are about to write it. The CPU's is
  /// t's own storage; null: t must be resident and is not.
  virtual std::byte *stateMemory(const Tensor &t, bool write) {
    (void)write;
    return const_cast<std::byte *>(t.raw());
  }

private:
  /// stateMemory of an f32 tensor as floats; null with `error` set for
  /// another element type or a tensor that is not resident.
  float *stateFloats(const Tensor &t, bool write, std::string &error);
};

/// The CPU: Executors over the program's kernel library. Null with `error`
/// set when the library does not load.
std::unique_ptr<Backend> createCpuBackend(const program::Program &program,
                                          std::string &error);

/// `inner` with a device's memory contract enforced on the host
/// (`gptc train --check-residency`, for the tests): resident tensors get a
/// second copy that the runs read and write, stale copies are NaN bytes,
/// and no output is computed in an input's buffer. A trainer that would
/// train correctly on the CPU but not on a GPU (a missing syncToHost or
/// hostWrote) trains wrongly here too. lib/Runtime/ResidencyCheck.cpp.
std::unique_ptr<Backend>
createResidencyCheckingBackend(std::unique_ptr<Backend> inner);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_BACKEND_H
