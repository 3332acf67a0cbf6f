//===- ResidencyCheck.cpp - Device memory contract on the CPU ---*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The GPU backend keeps the tensors a trainer marks resident in memory of
// its own and copies them only when the contract of Backend says so
// (Backend.h): a run reads a resident input from the device copy (copied
// from the host only when the host holds the newer value), writes a
// resident output there, and the host copy is brought up to date only by
// syncToHost. A trainer that forgets one of those steps trains wrongly on
// a GPU but not on the CPU, whose backend has no second copy.
//
// This backend has the second copy: it runs the CPU's runners on "device"
// tensors of its own, with the GPU backend's rules (no output in an
// input's buffer, so state is double-buffered as on the GPU), and it
// poisons what would be stale: a resident tensor's device copy starts as
// NaN bytes, and its host copy becomes NaN bytes when a run writes the
// device copy. A trainer that reads a host copy without syncToHost, or
// runs on parameters it updated on the host without hostWrote, then
// trains on NaN or on old values, which the equivalence tests see.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Backend.h"

#include <cstring>
#include <unordered_map>

using namespace gptc;
using namespace gptc::runtime;

namespace {

struct Copy {
  Tensor device;
  bool deviceValid = false, hostValid = true;
};

class CheckingBackend;

class CheckingRunner : public FunctionRunner {
public:
  CheckingRunner(CheckingBackend &backend,
                 std::unique_ptr<FunctionRunner> inner)
      : backend(backend), inner(std::move(inner)) {}

  bool run(const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs, std::string &error) override;
  const program::Function &getFunction() const override {
    return inner->getFunction();
  }
  bool canOverwriteInput(int output, int input) const override {
    // As the GPU backend: state is double-buffered.
    (void)output;
    (void)input;
    return false;
  }
  void setCommunicator(Communicator *c) override { inner->setCommunicator(c); }
  bool injectInfinityBefore(program::OpKind op) override {
    return inner->injectInfinityBefore(op);
  }
  void enableProfiling() override { inner->enableProfiling(); }
  void setTrace(TraceRecorder *trace) override { inner->setTrace(trace); }
  std::vector<KernelTime> profile() const override { return inner->profile(); }

private:
  CheckingBackend &backend;
  std::unique_ptr<FunctionRunner> inner;
};

class CheckingBackend : public Backend {
public:
  explicit CheckingBackend(std::unique_ptr<Backend> inner)
      : inner(std::move(inner)) {}

  std::string describe() const override {
    return inner->describe() + " (checking residency)";
  }
  bool hasDeviceMemory() const override { return true; }
  std::unique_ptr<FunctionRunner>
  createRunner(const program::Function &function, std::string &error) override {
    std::unique_ptr<FunctionRunner> r = inner->createRunner(function, error);
    if (!r)
      return nullptr;
    return std::make_unique<CheckingRunner>(*this, std::move(r));
  }
  void keepResident(const Tensor &t) override {
    if (!t.raw() || copies.count(t.raw()))
      return;
    Copy c;
    c.device = Tensor(t.dtype, t.shape);
    poison(c.device);
    copies.emplace(t.raw(), std::move(c));
  }
  void release(const Tensor &t) override { copies.erase(t.raw()); }
  bool syncToHost(std::string &error) override {
    (void)error;
    for (auto &[host, c] : copies)
      if (!c.hostValid) {
        std::memcpy(const_cast<void *>(host), c.device.raw(),
                    c.device.byteSize());
        c.hostValid = true;
      }
    return true;
  }
  void hostChanged() override { copies.clear(); }
  void hostWrote(const Tensor &t) override {
    if (Copy *c = find(t.raw())) {
      c->deviceValid = false;
      c->hostValid = true;
    }
  }

  Copy *find(const void *host) {
    auto it = copies.find(host);
    return it == copies.end() ? nullptr : &it->second;
  }
  static void poison(Tensor &t) { std::memset(t.raw(), 0xff, t.byteSize()); }

protected:
  /// The state operations run on the device copy, as the GPU's do: one on
  /// a tensor that is not resident fails, and a write poisons the host
  /// copy until syncToHost.
  std::byte *stateMemory(const Tensor &t, bool write) override {
    Copy *c = find(t.raw());
    if (!c || c->device.dtype != t.dtype || c->device.shape != t.shape)
      return nullptr;
    if (!c->deviceValid) {
      std::memcpy(c->device.raw(), t.raw(), c->device.byteSize());
      c->deviceValid = true;
    }
    if (write && c->hostValid) {
      c->hostValid = false;
      std::memset(const_cast<std::byte *>(t.raw()), 0xff, t.byteSize());
    }
    return c->device.raw();
  }

private:
  std::unique_ptr<Backend> inner;
  std::unordered_map<const void *, Copy> copies;
};

bool CheckingRunner::run(const std::vector<const Tensor *> &inputs,
                         std::vector<Tensor> &outputs, std::string &error) {
  std::vector<const Tensor *> in(inputs);
  for (const Tensor *&t : in)
    if (Copy *c = backend.find(t->raw())) {
      if (!c->deviceValid) {
        std::memcpy(c->device.raw(), t->raw(), c->device.byteSize());
        c->deviceValid = true;
      }
      t = &c->device;
    }
  // Resident outputs are written on the device; the others come back to
  // the host, into the caller's storage where it passed some.
  std::vector<Tensor> out(outputs.size());
  std::vector<Copy *> written(outputs.size(), nullptr);
  for (size_t j = 0; j < outputs.size(); ++j) {
    Tensor &t = outputs[j];
    if (!t.raw())
      continue;
    Copy *c = backend.find(t.raw());
    if (c && c->device.dtype == t.dtype && c->device.shape == t.shape) {
      out[j] = Tensor::view(t.dtype, t.shape, c->device.raw());
      written[j] = c;
    } else {
      out[j] = Tensor::view(t.dtype, t.shape, t.raw());
    }
  }
  if (!inner->run(in, out, error))
    return false;
  outputs.resize(out.size());
  written.resize(out.size(), nullptr);
  for (size_t j = 0; j < out.size(); ++j) {
    if (Copy *c = written[j]) {
      c->deviceValid = true;
      c->hostValid = false;
      CheckingBackend::poison(outputs[j]);
    } else if (!outputs[j].raw() || outputs[j].raw() != out[j].raw()) {
      outputs[j] = std::move(out[j]);
    }
  }
  return true;
}

} // namespace

std::unique_ptr<Backend>
gptc::runtime::createResidencyCheckingBackend(std::unique_ptr<Backend> inner) {
  return std::make_unique<CheckingBackend>(std::move(inner));
}
