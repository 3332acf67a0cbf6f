//===- VirtualCuda.cpp - A strict CPU stand-in of a CUDA device -----------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// libGptcVirtualCuda.so: the CUDA runtime, cuBLASLt and NCCL entry points
// the GPU runtime calls (CudaApi.h), on host memory, stricter than a GPU
// (docs/Runtime.md, "The virtual CUDA device"):
//
// - Memory. Each allocation is its own mapping, its end against a page no
//   access may touch (a kernel reading or writing past it stops with the
//   allocation named); the bytes between its end and the next 256 hold a
//   pattern checked after every launch; new memory holds 0xff bytes (NaN
//   in every float type), not zeros. Every pointer a call passes is checked
//   against its allocation, with the bytes the call touches.
// - Order. Streams, events and the host's waits are a happens-before
//   relation kept with vector clocks (one component per stream and one for
//   the host). Every operation's reads and writes of device memory are
//   recorded; two that touch the same bytes, one of them a write, from
//   different streams with nothing ordering them, are a race, reported
//   with both operations. Operations run when they are enqueued, which is
//   one order the GPU could have run them in: with no race, every order
//   gives the same results.
// - Launches. A generated kernel's image is host code (gptc --device
//   virtual-cuda: gptc-gpu-emulate-on-host{export-kernels}); a launch is
//   checked against the kernel's description (its parameters' sizes and
//   whether it writes through them, its maxntid) and CUDA's limits, then its
//   threads run under the NVVM emulation. The hand-written kernels run
//   under the emulation of CUDA's device language (EmulatedKernels.cpp).
// - cuBLASLt computes from the descriptors, as NVIDIA documents them
//   (column-major, op(A) op(B), leading dimensions, strided batches,
//   epilogues), in f32, written without reference to how gptc builds them.
//
//===----------------------------------------------------------------------===//

#include "VirtualDevice.h"

#include "gptc/Runtime/CUDA/CudaApi.h"

#include <cerrno>
#include <dlfcn.h>
#include <elf.h>
#include <mpi.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

using namespace gptc;
using namespace gptc::vcuda;

namespace {

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

cudaError_t lastError = cudaSuccess;

cudaError_t fail(cudaError_t code, const std::string &message) {
  std::fprintf(stderr, "virtual-cuda: error: %s\n", message.c_str());
  std::fflush(stderr);
  lastError = code;
  return code;
}

std::string hex(const void *p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

/// An access recorded on an allocation: bytes [begin, end) from its start,
/// by the operation `what` at `epoch` of clock component `component`.
struct Record {
  int64_t begin, end;
  int component;
  uint64_t epoch;
  bool write;
  std::shared_ptr<const std::string> what;
};

struct Allocation {
  int64_t id = 0;
  char *base = nullptr;
  size_t bytes = 0, padded = 0;
  char *map = nullptr;
  size_t mapBytes = 0;
  std::vector<Record> records;
};

constexpr unsigned char kCanary = 0xa5, kFresh = 0xff;

using Clock = std::vector<uint64_t>;

uint64_t at(const Clock &c, int i) {
  return static_cast<size_t>(i) < c.size() ? c[i] : 0;
}
void join(Clock &a, const Clock &b) {
  if (a.size() < b.size())
    a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); ++i)
    a[i] = std::max(a[i], b[i]);
}

struct Capture;

struct Stream {
  int component = 0;
  bool blocking = true;
  Clock clock;
  std::string name;
  /// The capture this stream's operations go to (null: they run).
  Capture *capture = nullptr;
};

struct Event {
  Clock clock;
  bool recorded = false, timing = true;
  std::chrono::steady_clock::time_point time;
  /// Last recorded in a capture: `capture` while it lasts, its event `slot`
  /// in the graph and, in the capture's clocks, what the record follows.
  /// `captured`: last recorded in a capture that has ended.
  Capture *capture = nullptr;
  int slot = -1;
  Clock captureClock;
  bool captured = false;
};

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//
//
// A capture records each operation on a capturing stream as a node of a
// graph: the call itself, to be made again on each launch, on a stream of
// the launched graph that stands for the captured stream. So a launch
// checks everything a call checks (bounds, races against the work around
// the launch and inside it), and runs the nodes in capture order, one
// order the GPU could run them in. The capture's own clocks (one component
// per captured stream, counting its nodes) tell which captured streams
// have rejoined the one the capture began on.

/// One node: an operation (`issue` makes its call on the stream given), or
/// an event recorded or waited for between the graph's streams.
struct GraphNode {
  enum Kind { Work, Record, Wait } kind = Work;
  int branch = 0, slot = -1;
  std::string what;
  std::function<cudaError_t(Stream &)> issue;
};

struct Graph {
  int64_t id = 0;
  std::vector<GraphNode> nodes;
  /// The captured streams' names (the first: where the capture began),
  /// and how many events the nodes record.
  std::vector<std::string> branches;
  int slots = 0;
};

/// An instantiated graph: a stream per captured stream and its events.
struct GraphExec {
  std::shared_ptr<const Graph> graph;
  std::vector<Stream *> streams;
  std::vector<Event> events;
};

struct Capture {
  Stream *origin = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::shared_ptr<Graph> graph;
  std::map<Stream *, int> branches;
  std::vector<Clock> clocks;
  /// Per branch, its last node (an unjoined branch is named by it).
  std::vector<std::string> last;
  std::vector<std::shared_ptr<Event>> events;
  /// The first error that invalidated it.
  cudaError_t invalid = cudaSuccess;
};

/// A kernel of a loaded image: its thunk and description
/// (gptc_kernel_info_<name>).
struct Kernel {
  void (*thunk)(void **) = nullptr;
  const int64_t *info = nullptr;
  std::string name;
};

struct Library {
  void *handle = nullptr;
  std::vector<std::unique_ptr<Kernel>> kernels;
};

/// An operation enqueued on a stream: it runs once everything its stream's
/// clock held when it was enqueued has completed (`deps`), and completes
/// when it has run, or, for a collective (`completesLater`), when MPI
/// says so.
struct Op {
  int component = 0;
  uint64_t epoch = 0;
  Clock deps;
  std::string what;
  std::function<cudaError_t()> run;
  bool completesLater = false;
};

struct Device {
  std::recursive_mutex mutex;
  /// Operations not yet run, in the order they were enqueued, and per
  /// clock component the last epoch that completed.
  std::deque<std::unique_ptr<Op>> queue;
  Clock done;
  /// The first error an operation met when it ran after its call returned
  /// (CUDA's sticky error): every later synchronization returns it.
  cudaError_t sticky = cudaSuccess;
  std::map<uintptr_t, Allocation> allocations;
  int64_t nextAllocation = 1;
  Clock host{0, 0};
  Stream legacy;
  std::map<const void *, std::unique_ptr<Stream>> streams;
  std::map<const void *, std::shared_ptr<Event>> events;
  std::set<const void *> kernels;
  std::set<const void *> libraries;
  int nextComponent = 2;
  /// The operation running now (for the fault handler).
  const std::string *running = nullptr;
  /// The capture under way (one at a time), and the graphs.
  std::unique_ptr<Capture> capture;
  std::map<const void *, std::shared_ptr<Graph>> graphs;
  std::map<const void *, std::unique_ptr<GraphExec>> execs;
  int64_t nextGraph = 1;
  Device() {
    legacy.component = 1;
    legacy.clock = {0, 0};
    legacy.name = "the legacy default stream";
  }
};

Device &device() {
  static Device *d = new Device();
  return *d;
}

size_t pageSize() {
  static size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

//===----------------------------------------------------------------------===//
// Faults: an access past an allocation's end
//===----------------------------------------------------------------------===//

void onFault(int, siginfo_t *info, void *) {
  Device &d = device();
  char message[512];
  uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  const Allocation *near = nullptr;
  for (const auto &[start, a] : d.allocations)
    if (address >= reinterpret_cast<uintptr_t>(a.map) &&
        address < reinterpret_cast<uintptr_t>(a.map) + a.mapBytes)
      near = &a;
  if (near) {
    long past = static_cast<long>(address) -
                static_cast<long>(reinterpret_cast<uintptr_t>(near->base));
    std::snprintf(message, sizeof(message),
                  "virtual-cuda: error: out-of-bounds access at %p, byte %ld "
                  "of allocation #%ld of %zu bytes, in %s\n",
                  info->si_addr, past, static_cast<long>(near->id), near->bytes,
                  d.running ? d.running->c_str() : "host code");
  } else {
    std::snprintf(message, sizeof(message),
                  "virtual-cuda: error: invalid access at %p (no allocation "
                  "there) in %s\n",
                  info->si_addr, d.running ? d.running->c_str() : "host code");
  }
  ssize_t ignored = write(STDERR_FILENO, message, std::strlen(message));
  (void)ignored;
  signal(SIGSEGV, SIG_DFL);
  std::abort();
}

void installFaultHandler() {
  static bool done = false;
  if (done)
    return;
  done = true;
  static char stack[1 << 16];
  stack_t alt{};
  alt.ss_sp = stack;
  alt.ss_size = sizeof(stack);
  sigaltstack(&alt, nullptr);
  struct sigaction action{};
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

//===----------------------------------------------------------------------===//
// Allocations and the order of accesses
//===----------------------------------------------------------------------===//

Allocation *findAllocation(const void *p) {
  Device &d = device();
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  auto it = d.allocations.upper_bound(address);
  if (it == d.allocations.begin())
    return nullptr;
  --it;
  Allocation &a = it->second;
  if (address >= it->first + std::max<size_t>(a.padded, 1))
    return nullptr;
  return &a;
}

std::string describe(const Allocation &a) {
  return "allocation #" + std::to_string(a.id) + " (" +
         std::to_string(a.bytes) + " bytes at " + hex(a.base) + ")";
}

/// Where `p`, in no allocation, is: past the end of the allocation below
/// it (within its mapping), or nowhere.
std::string whereIs(const void *p) {
  Device &d = device();
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  auto it = d.allocations.upper_bound(address);
  if (it != d.allocations.begin()) {
    const Allocation &a = std::prev(it)->second;
    uintptr_t end = reinterpret_cast<uintptr_t>(a.base) + a.bytes;
    if (address >= end &&
        address < reinterpret_cast<uintptr_t>(a.map) + a.mapBytes)
      return std::to_string(address - end) + " bytes past the end of " +
             describe(a);
  }
  return "which is in no allocation of this device";
}

Stream *resolve(cudaStream_t s, cudaError_t &error) {
  Device &d = device();
  if (!s || s == cudaStreamLegacy)
    return &d.legacy;
  auto it = d.streams.find(s);
  if (it == d.streams.end()) {
    error = fail(cudaErrorInvalidResourceHandle,
                 "stream " + hex(s) + " is not a stream of this device");
    return nullptr;
  }
  return it->second.get();
}

/// The start of an operation on `s`: ordered after what the host did so
/// far (and, on the legacy stream, after the blocking streams' work; on a
/// blocking stream, after the legacy stream's). Returns the epoch it will
/// have; `submit` gives it that epoch.
uint64_t enqueue(Stream &s) {
  Device &d = device();
  join(s.clock, d.host);
  if (&s == &d.legacy) {
    for (auto &[handle, other] : d.streams)
      if (other->blocking)
        join(s.clock, other->clock);
  } else if (s.blocking) {
    join(s.clock, d.legacy.clock);
  }
  if (s.clock.size() <= static_cast<size_t>(s.component))
    s.clock.resize(s.component + 1, 0);
  return s.clock[s.component] + 1;
}

//===----------------------------------------------------------------------===//
// Running operations
//===----------------------------------------------------------------------===//
//
// An operation runs when it is enqueued if everything it follows has
// completed; otherwise it waits in the queue (behind a collective that
// has not completed, a stream waiting for an event of another such
// stream), and runs when the host next makes progress: at any call, and
// while it waits for the device. So the host never blocks in an
// asynchronous call, as on a GPU, and a collective whose peer never comes
// leaves the host free to notice (cudaStreamQuery, ncclCommGetAsyncError).

/// Moves collectives in flight along; true when one completed.
bool progressCollectives();

bool ready(const Op &op) {
  const Clock &done = device().done;
  for (size_t i = 0; i < op.deps.size(); ++i)
    if (op.deps[i] > at(done, static_cast<int>(i)))
      return false;
  return true;
}

void markDone(int component, uint64_t epoch) {
  Clock &done = device().done;
  if (done.size() <= static_cast<size_t>(component))
    done.resize(component + 1, 0);
  done[component] = std::max(done[component], epoch);
}

cudaError_t runOp(Op &op) {
  Device &d = device();
  const std::string *before = d.running;
  d.running = &op.what;
  cudaError_t e = op.run();
  d.running = before;
  if (e != cudaSuccess && d.sticky == cudaSuccess)
    d.sticky = e;
  if (!op.completesLater)
    markDone(op.component, op.epoch);
  return e;
}

/// Runs every operation that can run, in the order they were enqueued.
void progress() {
  Device &d = device();
  for (bool changed = true; changed;) {
    changed = progressCollectives();
    for (auto it = d.queue.begin(); it != d.queue.end(); ++it)
      if (ready(**it)) {
        std::unique_ptr<Op> op = std::move(*it);
        d.queue.erase(it);
        runOp(*op);
        changed = true;
        break;
      }
  }
}

/// Gives `s` the epoch `enqueue` returned and runs `run` as that operation
/// (now if it can; its error is then returned, else it is sticky).
cudaError_t submit(Stream &s, uint64_t epoch, const std::string &what,
                   std::function<cudaError_t()> run,
                   bool completesLater = false) {
  Device &d = device();
  s.clock[s.component] = epoch;
  auto op = std::make_unique<Op>();
  op->component = s.component;
  op->epoch = epoch;
  op->deps = s.clock;
  op->deps[s.component] = epoch - 1;
  op->what = what + " on " + s.name;
  op->run = std::move(run);
  op->completesLater = completesLater;
  progress();
  if (ready(*op))
    return runOp(*op);
  d.queue.push_back(std::move(op));
  return cudaSuccess;
}

/// Whether everything `c` follows has completed.
bool completed(const Clock &c) {
  const Clock &done = device().done;
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] > at(done, static_cast<int>(i)))
      return false;
  return true;
}

/// Checks `accesses` of the operation `what` on `s` (already enqueued)
/// against their allocations and the accesses before them; records them.
cudaError_t touch(Stream &s, uint64_t epoch, const std::vector<Access> &list,
                  const std::string &what) {
  auto label = std::make_shared<const std::string>(what + " on " + s.name);
  std::vector<std::pair<Allocation *, Record>> records;
  for (const Access &x : list) {
    if (x.bytes < 0)
      return fail(cudaErrorInvalidValue,
                  *label + " passes a negative size for " + hex(x.ptr));
    if (x.bytes == 0)
      continue;
    Allocation *a = findAllocation(x.ptr);
    if (!a)
      return fail(cudaErrorIllegalAddress,
                  *label + " touches " + hex(x.ptr) + ", " + whereIs(x.ptr));
    int64_t begin = static_cast<const char *>(x.ptr) - a->base;
    int64_t end = begin + x.bytes;
    if (end > static_cast<int64_t>(a->bytes))
      return fail(cudaErrorIllegalAddress,
                  *label + " touches bytes [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") of " + describe(*a) +
                      ": past its end by " +
                      std::to_string(end - static_cast<int64_t>(a->bytes)) +
                      " bytes");
    Record r{begin, end, s.component, epoch, x.write, label};
    for (const Record &old : a->records) {
      if (old.end <= begin || old.begin >= end || (!old.write && !x.write))
        continue;
      if (old.epoch <= at(s.clock, old.component))
        continue;
      return fail(cudaErrorLaunchFailure,
                  "race on " + describe(*a) + ": " + *label +
                      (x.write ? " writes" : " reads") + " bytes [" +
                      std::to_string(begin) + ", " + std::to_string(end) +
                      ") and " + *old.what + (old.write ? " wrote" : " read") +
                      " bytes [" + std::to_string(old.begin) + ", " +
                      std::to_string(old.end) +
                      ") with no event wait or synchronization ordering them");
    }
    records.push_back({a, r});
  }
  for (auto &[a, r] : records) {
    // What the new access covers and follows adds nothing: a later access
    // unordered with the old one is unordered with the new one too. A read
    // only stands in for earlier reads.
    auto &list = a->records;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Record &old) {
                                return old.begin >= r.begin &&
                                       old.end <= r.end &&
                                       old.epoch <=
                                           at(s.clock, old.component) &&
                                       (r.write || !old.write);
                              }),
               list.end());
    list.push_back(r);
  }
  return cudaSuccess;
}

/// The bytes past each of `list`'s allocations' ends still hold the
/// canary.
cudaError_t checkCanaries(const std::vector<Access> &list,
                          const std::string &what) {
  for (const Access &x : list) {
    Allocation *a = x.bytes > 0 ? findAllocation(x.ptr) : nullptr;
    if (!a)
      continue;
    for (size_t i = a->bytes; i < a->padded; ++i)
      if (static_cast<unsigned char>(a->base[i]) != kCanary)
        return fail(cudaErrorIllegalAddress,
                    what + " wrote byte " + std::to_string(i) + " of " +
                        describe(*a) + ", past its end");
  }
  return cudaSuccess;
}

/// The host waits for `c`: everything ordered before it is before the
/// host's next operation. Records every stream and the host now follow
/// are dropped.
void hostWaits(const Clock &c) {
  Device &d = device();
  // Until it has all run: a collective whose peer never comes waits here
  // for ever, as a GPU's stream would.
  for (progress(); !completed(c); progress())
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  join(d.host, c);
  Clock least = d.host;
  auto meet = [&](const Clock &other) {
    for (size_t i = 0; i < least.size(); ++i)
      least[i] = std::min(least[i], at(other, static_cast<int>(i)));
  };
  meet(d.legacy.clock);
  for (auto &[handle, s] : d.streams)
    meet(s->clock);
  for (auto &[start, a] : d.allocations)
    a.records.erase(std::remove_if(a.records.begin(), a.records.end(),
                                   [&](const Record &r) {
                                     return r.epoch <= at(least, r.component);
                                   }),
                    a.records.end());
}

//===----------------------------------------------------------------------===//
// Capture rules
//===----------------------------------------------------------------------===//

/// Fails the call with `code`; a capture under way is invalidated (every
/// later call in it fails, and cudaStreamEndCapture says so).
cudaError_t invalidate(cudaError_t code, const std::string &message) {
  Capture *c = device().capture.get();
  if (c && c->invalid == cudaSuccess)
    c->invalid = code;
  return fail(code, message);
}

std::string capturing(const Capture &c) {
  return c.origin->name + " is being captured";
}

/// A call CUDA calls potentially unsafe while a capture is under way (it
/// is not captured, and a graph relying on it would be wrong when
/// replayed): an error unless the capture is cudaStreamCaptureModeRelaxed.
cudaError_t unsafeInCapture(const std::string &call) {
  Capture *c = device().capture.get();
  if (!c || c->mode == cudaStreamCaptureModeRelaxed)
    return cudaSuccess;
  return invalidate(cudaErrorStreamCaptureUnsupported,
                    call + " while " + capturing(*c) +
                        ": not allowed during a capture (it is not captured; "
                        "do it before cudaStreamBeginCapture)");
}

/// An operation on `s`, not being captured, while a capture is under way:
/// on the legacy stream it would wait for the blocking streams, a
/// dependency on the capture that CUDA refuses.
cudaError_t implicitInCapture(const Stream &s, const std::string &what) {
  Device &d = device();
  if (&s != &d.legacy || !d.capture)
    return cudaSuccess;
  for (auto &[stream, branch] : d.capture->branches)
    if (stream->blocking)
      return invalidate(cudaErrorStreamCaptureImplicit,
                        what + " on the legacy default stream while blocking " +
                            stream->name +
                            " is being captured: the legacy stream would "
                            "wait for the capture");
  return cudaSuccess;
}

/// A call on `s` in a capture an earlier error invalidated.
cudaError_t afterInvalidation(const std::string &call, const Stream &s) {
  return fail(cudaErrorStreamCaptureInvalidated,
              call + " on " + s.name +
                  ": the capture was invalidated by an earlier error");
}

/// `s` joins capture `c` as its next captured stream (the first: where the
/// capture began); returns its index.
int joinCapture(Capture &c, Stream &s) {
  int b = static_cast<int>(c.clocks.size());
  s.capture = &c;
  c.branches[&s] = b;
  c.clocks.emplace_back();
  c.last.emplace_back();
  c.graph->branches.push_back(s.name);
  return b;
}

/// An event of the graph recorded on, or waited for by, captured stream
/// `branch` (an edge between its streams, not an operation).
void addEventNode(Capture &c, GraphNode::Kind kind, int branch, int slot,
                  const char *what) {
  GraphNode node;
  node.kind = kind;
  node.branch = branch;
  node.slot = slot;
  node.what = what;
  c.graph->nodes.push_back(std::move(node));
}

/// `issue` on `s`: now, or, while `s` is being captured, as a node of the
/// capture's graph, made again on each launch on the stream standing for
/// `s` there.
cudaError_t issueOn(Stream &s, const std::string &what,
                    std::function<cudaError_t(Stream &)> issue) {
  Capture *c = s.capture;
  if (!c) {
    if (cudaError_t e = implicitInCapture(s, what))
      return e;
    return issue(s);
  }
  if (c->invalid)
    return afterInvalidation(what, s);
  int b = c->branches.at(&s);
  Clock &clock = c->clocks[b];
  if (clock.size() <= static_cast<size_t>(b))
    clock.resize(b + 1, 0);
  ++clock[b];
  c->last[b] = what;
  GraphNode node;
  node.branch = b;
  node.what = what;
  node.issue = std::move(issue);
  c->graph->nodes.push_back(std::move(node));
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// The CUDA runtime
//===----------------------------------------------------------------------===//

const char *errorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidDeviceFunction:
    return "invalid device function";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorIllegalAddress:
    return "an illegal memory access was encountered (virtual-cuda: see "
           "the error above)";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure (virtual-cuda: see the error above)";
  case cudaErrorInvalidKernelImage:
    return "device kernel image is invalid";
  case cudaErrorSymbolNotFound:
    return "named symbol not found";
  case cudaErrorInvalidMemcpyDirection:
    return "invalid copy direction for memcpy";
  case cudaErrorNotSupported:
    return "operation not supported";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorIllegalState:
    return "the operation cannot be performed in the present state";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnmatched:
    return "capture was not initiated in this stream";
  case cudaErrorStreamCaptureUnjoined:
    return "capturing stream has unjoined work";
  case cudaErrorStreamCaptureIsolation:
    return "dependency created on uncaptured work in another stream";
  case cudaErrorStreamCaptureImplicit:
    return "operation would make the legacy stream depend on a capturing "
           "blocking stream";
  case cudaErrorCapturedEvent:
    return "operation not permitted on an event last recorded in a "
           "capturing stream";
  default:
    return "unrecognized error code";
  }
}

int currentDevice = 0;

cudaError_t getDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t setDevice(int d) {
  if (d != 0)
    return fail(cudaErrorInvalidDevice,
                "device " + std::to_string(d) +
                    ": a process has one virtual device (0)");
  currentDevice = d;
  return cudaSuccess;
}

cudaError_t getDeviceProperties(cudaDeviceProp *p, int d) {
  if (d != 0)
    return fail(cudaErrorInvalidDevice,
                "no virtual device " + std::to_string(d));
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "gptc virtual CUDA device");
  p->major = 9;
  p->minor = 0;
  long pages = sysconf(_SC_PHYS_PAGES);
  p->totalGlobalMem = static_cast<size_t>(pages) * pageSize();
  p->multiProcessorCount = 132;
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->warpSize = 32;
  p->l2CacheSize = 50 << 20;
  p->memoryBusWidth = 5120;
  p->regsPerBlock = 65536;
  return cudaSuccess;
}

const char *getErrorString(cudaError_t e) { return errorString(e); }

cudaError_t getLastError() {
  cudaError_t e = lastError;
  lastError = cudaSuccess;
  return e;
}

cudaError_t deviceSynchronize() {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (d.capture)
    return invalidate(cudaErrorStreamCaptureUnsupported,
                      "cudaDeviceSynchronize while " + capturing(*d.capture) +
                          ": a capture's work is not scheduled, there is "
                          "nothing to wait for");
  Clock all = d.legacy.clock;
  for (auto &[handle, s] : d.streams)
    join(all, s->clock);
  hostWaits(all);
  return d.sticky;
}

cudaError_t driverGetVersion(int *v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t runtimeGetVersion(int *v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t deviceMalloc(void **ptr, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (cudaError_t e = unsafeInCapture("cudaMalloc"))
    return e;
  installFaultHandler();
  size_t page = pageSize();
  size_t padded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  size_t body = (padded + page - 1) / page * page;
  size_t mapBytes = body + 2 * page;
  void *map = mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    lastError = cudaErrorMemoryAllocation;
    return cudaErrorMemoryAllocation;
  }
  char *m = static_cast<char *>(map);
  mprotect(m, page, PROT_NONE);
  mprotect(m + page + body, page, PROT_NONE);
  Allocation a;
  a.id = d.nextAllocation++;
  a.base = m + page + body - padded;
  a.bytes = bytes;
  a.padded = padded;
  a.map = m;
  a.mapBytes = mapBytes;
  std::memset(a.base, kFresh, bytes);
  std::memset(a.base + bytes, kCanary, padded - bytes);
  *ptr = a.base;
  d.allocations[reinterpret_cast<uintptr_t>(a.base)] = std::move(a);
  return cudaSuccess;
}

cudaError_t deviceFree(void *ptr) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (!ptr)
    return cudaSuccess;
  if (cudaError_t e = unsafeInCapture("cudaFree"))
    return e;
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == d.allocations.end())
    return fail(cudaErrorInvalidValue,
                "cudaFree(" + hex(ptr) + "): not the start of an allocation");
  // cudaFree waits for the device.
  deviceSynchronize();
  Allocation &a = it->second;
  std::vector<Access> whole{{a.base, static_cast<int64_t>(a.bytes), false}};
  cudaError_t status = checkCanaries(whole, "an operation before cudaFree");
  munmap(a.map, a.mapBytes);
  d.allocations.erase(it);
  return status;
}

/// Whether [p, p + bytes) is device memory; a pointer into an allocation
/// that runs past its end is an error.
bool isDevice(const void *p) { return findAllocation(p) != nullptr; }

cudaError_t copyOn(Stream &s, void *dst, const void *src, size_t count,
                   cudaMemcpyKind kind, const std::string &what) {
  bool dDevice = isDevice(dst), sDevice = isDevice(src);
  if (kind == cudaMemcpyDefault)
    kind = dDevice
               ? (sDevice ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
               : (sDevice ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  bool wantD =
      kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool wantS =
      kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind > cudaMemcpyDeviceToDevice || dDevice != wantD || sDevice != wantS)
    return fail(cudaErrorInvalidMemcpyDirection,
                what + " copies " + std::to_string(count) + " bytes from " +
                    (sDevice ? "device" : "host") + " memory " + hex(src) +
                    " to " + (dDevice ? "device" : "host") + " memory " +
                    hex(dst) + " but says kind " +
                    std::to_string(static_cast<int>(kind)));
  if (s.capture && !(sDevice && dDevice))
    return invalidate(
        cudaErrorStreamCaptureUnsupported,
        what + " between host and device memory while " + s.name +
            " is being captured: a graph copies no pageable host memory "
            "(and the virtual device has no pinned memory); copy before "
            "the capture or after the launch");
  std::vector<Access> list;
  if (sDevice)
    list.push_back({src, static_cast<int64_t>(count), false});
  if (dDevice)
    list.push_back({dst, static_cast<int64_t>(count), true});
  return issueOn(s, what, [=](Stream &t) {
    uint64_t epoch = enqueue(t);
    if (cudaError_t e = touch(t, epoch, list, what))
      return e;
    // Host memory is read when the call is made (the caller may reuse it
    // at once); device memory when the copy runs.
    std::shared_ptr<std::vector<char>> staged;
    if (!sDevice)
      staged = std::make_shared<std::vector<char>>(
          static_cast<const char *>(src),
          static_cast<const char *>(src) + count);
    return submit(t, epoch, what, [=] {
      std::memmove(dst, staged ? staged->data() : src, count);
      return cudaSuccess;
    });
  });
}

cudaError_t memcpySync(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (cudaError_t e = unsafeInCapture("cudaMemcpy"))
    return e;
  cudaError_t e = copyOn(d.legacy, dst, src, count, kind, "cudaMemcpy");
  hostWaits(d.legacy.clock);
  return e;
}

cudaError_t memcpyAsync(void *dst, const void *src, size_t count,
                        cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  e = copyOn(*s, dst, src, count, kind, "cudaMemcpyAsync");
  // From device to pageable host memory the call returns when the copy is
  // done (CUDA's API synchronization behaviour).
  if (!e && !isDevice(dst))
    hostWaits(s->clock);
  return e;
}

cudaError_t memcpy2DAsync(void *dst, size_t dpitch, const void *src,
                          size_t spitch, size_t width, size_t height,
                          cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  if (width > dpitch || width > spitch)
    return fail(cudaErrorInvalidValue,
                "cudaMemcpy2DAsync: width " + std::to_string(width) +
                    " exceeds a pitch (" + std::to_string(dpitch) + ", " +
                    std::to_string(spitch) + ")");
  if (height == 0 || width == 0)
    return cudaSuccess;
  if (kind != cudaMemcpyDeviceToDevice || !isDevice(dst) || !isDevice(src))
    return fail(cudaErrorNotSupported,
                "cudaMemcpy2DAsync: the virtual device copies device to "
                "device only");
  int64_t dspan = static_cast<int64_t>((height - 1) * dpitch + width),
          sspan = static_cast<int64_t>((height - 1) * spitch + width);
  return issueOn(*s, "cudaMemcpy2DAsync", [=](Stream &t) {
    uint64_t epoch = enqueue(t);
    if (cudaError_t e2 =
            touch(t, epoch, {{src, sspan, false}, {dst, dspan, true}},
                  "cudaMemcpy2DAsync"))
      return e2;
    return submit(t, epoch, "cudaMemcpy2DAsync", [=] {
      for (size_t r = 0; r < height; ++r)
        std::memmove(static_cast<char *>(dst) + r * dpitch,
                     static_cast<const char *>(src) + r * spitch, width);
      return cudaSuccess;
    });
  });
}

cudaError_t memsetOn(Stream &s, void *ptr, int value, size_t count,
                     const std::string &what) {
  return issueOn(s, what, [=](Stream &t) {
    uint64_t epoch = enqueue(t);
    if (cudaError_t e =
            touch(t, epoch, {{ptr, static_cast<int64_t>(count), true}}, what))
      return e;
    return submit(t, epoch, what, [=] {
      std::memset(ptr, value, count);
      return cudaSuccess;
    });
  });
}

cudaError_t memsetSync(void *ptr, int value, size_t count) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (cudaError_t e = unsafeInCapture("cudaMemset"))
    return e;
  cudaError_t e = memsetOn(d.legacy, ptr, value, count, "cudaMemset");
  hostWaits(d.legacy.clock);
  return e;
}

cudaError_t memsetAsyncApi(void *ptr, int value, size_t count,
                           cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  return s ? memsetOn(*s, ptr, value, count, "cudaMemsetAsync") : e;
}

cudaError_t streamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  auto s = std::make_unique<Stream>();
  s->component = d.nextComponent++;
  s->blocking = !(flags & cudaStreamNonBlocking);
  s->clock = d.host;
  s->name = "stream " + std::to_string(s->component - 1) +
            (s->blocking ? "" : " (non-blocking)");
  *stream = reinterpret_cast<cudaStream_t>(s.get());
  d.streams[s.get()] = std::move(s);
  return cudaSuccess;
}

cudaError_t streamCreate(cudaStream_t *stream) {
  return streamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t streamDestroy(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  auto it = d.streams.find(stream);
  if (it == d.streams.end())
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamDestroy(" + hex(stream) + "): not a stream");
  // Its work still orders what waits for it: the clock stays in the
  // events recorded on it. Its component is not reused.
  d.streams.erase(it);
  return cudaSuccess;
}

cudaError_t streamSynchronize(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  if (s->capture)
    return invalidate(cudaErrorStreamCaptureUnsupported,
                      "cudaStreamSynchronize(" + s->name +
                          "): the stream is being captured, its work is not "
                          "scheduled");
  hostWaits(s->clock);
  return device().sticky;
}

cudaError_t streamQuery(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  if (s->capture)
    return invalidate(cudaErrorStreamCaptureUnsupported,
                      "cudaStreamQuery(" + s->name +
                          "): the stream is being captured, its work is not "
                          "scheduled");
  progress();
  if (!completed(s->clock))
    return cudaErrorNotReady;
  return device().sticky;
}

Event *resolveEvent(cudaEvent_t event, const char *call, cudaError_t &e) {
  auto it = device().events.find(event);
  if (it == device().events.end()) {
    e = fail(cudaErrorInvalidResourceHandle,
             std::string(call) + "(" + hex(event) + "): not an event");
    return nullptr;
  }
  return it->second.get();
}

cudaError_t streamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                            unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  Event *ev = s ? resolveEvent(event, "cudaStreamWaitEvent", e) : nullptr;
  if (!ev)
    return e;
  (void)flags;
  if (Capture *c = ev->capture) {
    // Recorded in the capture: the stream joins it (if it had not) and
    // waits, in the graph, for the record.
    if (c->invalid)
      return afterInvalidation("cudaStreamWaitEvent", *s);
    if (!s->capture) {
      if (s == &device().legacy)
        return invalidate(cudaErrorStreamCaptureImplicit,
                          "the legacy default stream waits for an event "
                          "recorded in a capture");
      joinCapture(*c, *s);
    }
    int b = c->branches.at(s);
    join(c->clocks[b], ev->captureClock);
    addEventNode(*c, GraphNode::Wait, b, ev->slot, "cudaStreamWaitEvent");
    return cudaSuccess;
  }
  if (ev->captured)
    return fail(cudaErrorCapturedEvent,
                "cudaStreamWaitEvent(" + s->name + ", " + hex(event) +
                    "): the event was last recorded in a capture (it "
                    "stands for no work); record it again first");
  if (s->capture && ev->recorded)
    return invalidate(cudaErrorStreamCaptureIsolation,
                      "cudaStreamWaitEvent: " + s->name +
                          " is being captured and the event was recorded "
                          "outside the capture: a graph depends on no work "
                          "outside it (order it before the capture begins)");
  if (cudaError_t e2 = implicitInCapture(*s, "cudaStreamWaitEvent"))
    return e2;
  if (ev->recorded)
    join(s->clock, ev->clock);
  return cudaSuccess;
}

/// An event last recorded in a capture, given to a call that needs work
/// behind it.
cudaError_t capturedEvent(const Event &ev, const std::string &call) {
  if (ev.capture)
    return invalidate(cudaErrorCapturedEvent,
                      call + ": the event was recorded in the capture under "
                             "way; it stands for no work");
  if (ev.captured)
    return fail(cudaErrorCapturedEvent,
                call + ": the event was last recorded in a capture; it "
                       "stands for no work");
  return cudaSuccess;
}

cudaError_t eventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  auto ev = std::make_shared<Event>();
  ev->timing = !(flags & cudaEventDisableTiming);
  *event = reinterpret_cast<cudaEvent_t>(ev.get());
  device().events[ev.get()] = ev;
  return cudaSuccess;
}

cudaError_t eventCreate(cudaEvent_t *event) {
  return eventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t eventDestroy(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Event *ev = resolveEvent(event, "cudaEventDestroy", e);
  if (!ev)
    return e;
  // A record still to run keeps the event alive.
  device().events.erase(ev);
  return cudaSuccess;
}

cudaError_t eventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  Event *ev = s ? resolveEvent(event, "cudaEventRecord", e) : nullptr;
  if (!ev)
    return e;
  std::shared_ptr<Event> keep = device().events[ev];
  if (Capture *c = s->capture) {
    if (c->invalid)
      return afterInvalidation("cudaEventRecord", *s);
    int b = c->branches.at(s);
    ev->capture = c;
    ev->captured = false;
    ev->slot = c->graph->slots++;
    ev->captureClock = c->clocks[b];
    c->events.push_back(keep);
    addEventNode(*c, GraphNode::Record, b, ev->slot, "cudaEventRecord");
    return cudaSuccess;
  }
  if (cudaError_t e2 = implicitInCapture(*s, "cudaEventRecord"))
    return e2;
  ev->capture = nullptr;
  ev->captured = false;
  uint64_t epoch = enqueue(*s);
  cudaError_t status = submit(*s, epoch, "cudaEventRecord", [keep] {
    Event *ev = keep.get();
    // The event's time: when the work before it has run.
    ev->time = std::chrono::steady_clock::now();
    return cudaSuccess;
  });
  ev->clock = s->clock;
  ev->recorded = true;
  return status;
}

cudaError_t eventSynchronize(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Event *ev = resolveEvent(event, "cudaEventSynchronize", e);
  if (!ev)
    return e;
  if (cudaError_t e2 = capturedEvent(*ev, "cudaEventSynchronize"))
    return e2;
  if (ev->recorded)
    hostWaits(ev->clock);
  return device().sticky;
}

cudaError_t eventQuery(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Event *ev = resolveEvent(event, "cudaEventQuery", e);
  if (!ev)
    return e;
  if (cudaError_t e2 = capturedEvent(*ev, "cudaEventQuery"))
    return e2;
  progress();
  if (ev->recorded && !completed(ev->clock))
    return cudaErrorNotReady;
  return device().sticky;
}

cudaError_t eventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Event *a = resolveEvent(start, "cudaEventElapsedTime", e);
  Event *b = a ? resolveEvent(end, "cudaEventElapsedTime", e) : nullptr;
  if (!b)
    return e;
  if (cudaError_t e2 = capturedEvent(*a, "cudaEventElapsedTime"))
    return e2;
  if (cudaError_t e2 = capturedEvent(*b, "cudaEventElapsedTime"))
    return e2;
  if (!a->timing || !b->timing)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime on an event created with "
                "cudaEventDisableTiming");
  if (!a->recorded || !b->recorded)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime on an event never recorded");
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Stream capture and graphs
//===----------------------------------------------------------------------===//

cudaError_t streamBeginCapture(cudaStream_t stream,
                               cudaStreamCaptureMode mode) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  if (s == &d.legacy)
    return fail(cudaErrorStreamCaptureImplicit,
                "cudaStreamBeginCapture: the legacy default stream cannot "
                "be captured");
  if (s->capture)
    return fail(cudaErrorIllegalState, "cudaStreamBeginCapture(" + s->name +
                                           "): it is being captured already");
  if (d.capture)
    return fail(cudaErrorNotSupported,
                "cudaStreamBeginCapture(" + s->name + ") while " +
                    capturing(*d.capture) +
                    ": the virtual device captures one sequence at a time");
  auto c = std::make_unique<Capture>();
  c->origin = s;
  c->mode = mode;
  c->graph = std::make_shared<Graph>();
  joinCapture(*c, *s);
  d.capture = std::move(c);
  return cudaSuccess;
}

cudaError_t streamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  *graph = nullptr;
  Capture *c = s->capture;
  if (!c)
    return fail(cudaErrorIllegalState, "cudaStreamEndCapture(" + s->name +
                                           "): it is not being captured");
  if (c->origin != s)
    return invalidate(cudaErrorStreamCaptureUnmatched,
                      "cudaStreamEndCapture(" + s->name +
                          "): the capture began on " + c->origin->name);
  std::unique_ptr<Capture> owned = std::move(d.capture);
  for (auto &[joined, branch] : c->branches)
    joined->capture = nullptr;
  for (const std::shared_ptr<Event> &ev : c->events)
    if (ev->capture == c) {
      ev->capture = nullptr;
      ev->captured = true;
    }
  if (c->invalid)
    return fail(cudaErrorStreamCaptureInvalidated,
                "cudaStreamEndCapture(" + s->name +
                    "): the capture was invalidated by an earlier error (" +
                    errorString(c->invalid) + ")");
  // Every stream that joined must have rejoined: the origin follows its
  // last operation.
  for (size_t b = 1; b < c->clocks.size(); ++b)
    if (at(c->clocks[0], static_cast<int>(b)) <
        at(c->clocks[b], static_cast<int>(b)))
      return fail(
          cudaErrorStreamCaptureUnjoined,
          "cudaStreamEndCapture(" + s->name + "): " + c->graph->branches[b] +
              " joined the capture and its last operation (" + c->last[b] +
              ") does not join back to " + s->name +
              " (record an event after it and wait for it on " + s->name + ")");
  c->graph->id = d.nextGraph++;
  *graph = reinterpret_cast<cudaGraph_t>(c->graph.get());
  d.graphs[c->graph.get()] = c->graph;
  return cudaSuccess;
}

cudaError_t streamIsCapturing(cudaStream_t stream,
                              cudaStreamCaptureStatus *status) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  *status = !s->capture           ? cudaStreamCaptureStatusNone
            : s->capture->invalid ? cudaStreamCaptureStatusInvalidated
                                  : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

std::shared_ptr<Graph> resolveGraph(cudaGraph_t graph, const char *call,
                                    cudaError_t &e) {
  auto it = device().graphs.find(graph);
  if (it == device().graphs.end()) {
    e = fail(cudaErrorInvalidValue,
             std::string(call) + "(" + hex(graph) + "): not a graph");
    return nullptr;
  }
  return it->second;
}

cudaError_t graphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes,
                          size_t *count) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  std::shared_ptr<Graph> g = resolveGraph(graph, "cudaGraphGetNodes", e);
  if (!g)
    return e;
  if (nodes)
    return fail(cudaErrorNotSupported,
                "cudaGraphGetNodes: the virtual device counts nodes (pass "
                "null nodes) and hands out no node handles");
  // Events recorded and waited for between the captured streams are the
  // graph's edges, not nodes.
  *count = static_cast<size_t>(
      std::count_if(g->nodes.begin(), g->nodes.end(), [](const GraphNode &n) {
        return n.kind == GraphNode::Work;
      }));
  return cudaSuccess;
}

cudaError_t graphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                             unsigned long long flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  cudaError_t e = cudaSuccess;
  std::shared_ptr<Graph> g = resolveGraph(graph, "cudaGraphInstantiate", e);
  if (!g)
    return e;
  if (flags)
    return fail(cudaErrorNotSupported, "cudaGraphInstantiate: flags " +
                                           std::to_string(flags) +
                                           " are not modelled");
  if (cudaError_t e2 = unsafeInCapture("cudaGraphInstantiate"))
    return e2;
  auto x = std::make_unique<GraphExec>();
  x->graph = g;
  x->events.resize(static_cast<size_t>(g->slots));
  for (const std::string &name : g->branches) {
    // The graph's streams: their own clock components, so that a race
    // inside the graph, or with the work around a launch, is found.
    auto stream = std::make_unique<Stream>();
    stream->component = d.nextComponent++;
    stream->blocking = false;
    stream->clock = d.host;
    stream->name = name + " in CUDA graph " + std::to_string(g->id);
    x->streams.push_back(stream.get());
    d.streams[stream.get()] = std::move(stream);
  }
  *exec = reinterpret_cast<cudaGraphExec_t>(x.get());
  d.execs[x.get()] = std::move(x);
  return cudaSuccess;
}

/// A launch makes each node's call again, in capture order, on the
/// graph's stream for its captured stream: after what `stream` had
/// before it; what `stream` does next follows all of it.
cudaError_t graphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return e;
  auto it = d.execs.find(exec);
  if (it == d.execs.end())
    return fail(cudaErrorInvalidValue, "cudaGraphLaunch(" + hex(exec) +
                                           "): not an instantiated graph");
  GraphExec &x = *it->second;
  if (s->capture)
    return invalidate(cudaErrorStreamCaptureUnsupported,
                      "cudaGraphLaunch into " + capturing(*s->capture) +
                          ": the virtual device does not capture graphs");
  if (cudaError_t e2 = implicitInCapture(*s, "cudaGraphLaunch"))
    return e2;
  enqueue(*s);
  for (Stream *t : x.streams)
    join(t->clock, s->clock);
  for (const GraphNode &node : x.graph->nodes) {
    Stream &t = *x.streams[static_cast<size_t>(node.branch)];
    Event &ev = x.events[static_cast<size_t>(std::max(node.slot, 0))];
    switch (node.kind) {
    case GraphNode::Work:
      if (cudaError_t e2 = node.issue(t))
        return e2;
      break;
    case GraphNode::Record:
      ev.clock = t.clock;
      ev.recorded = true;
      break;
    case GraphNode::Wait:
      if (ev.recorded)
        join(t.clock, ev.clock);
      break;
    }
  }
  join(s->clock, x.streams.front()->clock);
  return cudaSuccess;
}

cudaError_t graphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  auto it = d.execs.find(exec);
  if (it == d.execs.end())
    return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy(" + hex(exec) +
                                           "): not an instantiated graph");
  // Its launches still order what waits for them (their clocks stay in
  // the streams that launched them); the components are not reused.
  for (Stream *t : it->second->streams)
    d.streams.erase(t);
  d.execs.erase(it);
  return cudaSuccess;
}

cudaError_t graphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  if (!device().graphs.erase(graph))
    return fail(cudaErrorInvalidValue,
                "cudaGraphDestroy(" + hex(graph) + "): not a graph");
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Images and launches
//===----------------------------------------------------------------------===//

cudaError_t libraryLoadData(cudaLibrary_t *library, const void *code,
                            cudaJitOption *, void **, unsigned,
                            cudaLibraryOption *, void **, unsigned) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  const auto *header = static_cast<const Elf64_Ehdr *>(code);
  if (!code || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0)
    return fail(cudaErrorInvalidKernelImage,
                "the image is not a shared object for this CPU (PTX text "
                "runs on a GPU only): compile with --device virtual-cuda");
  if (header->e_machine != EM_X86_64 && header->e_machine != EM_AARCH64)
    return fail(cudaErrorInvalidKernelImage,
                "the image is a cubin (ELF machine " +
                    std::to_string(header->e_machine) +
                    "), which runs on a GPU only: compile with --device "
                    "virtual-cuda");
  // The section headers end a linked shared object.
  size_t size = header->e_shoff +
                static_cast<size_t>(header->e_shnum) * header->e_shentsize;
  // The image in an anonymous in-memory file (nothing is left on disk,
  // whatever TMPDIR is), loaded through its /proc path.
  int fd = memfd_create("gptc-virtual-cuda-image", MFD_CLOEXEC);
  if (fd < 0)
    return fail(cudaErrorInvalidKernelImage,
                std::string("cannot make an in-memory file for the image: ") +
                    std::strerror(errno));
  const char *bytes = static_cast<const char *>(code);
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, bytes + written, size - written);
    if (n <= 0)
      break;
    written += static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle =
      written == size ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  const char *dlError = handle ? nullptr : dlerror();
  std::string why = handle ? "" : (dlError ? dlError : "short write");
  close(fd);
  if (!handle)
    return fail(cudaErrorInvalidKernelImage, "the image does not load: " + why);
  auto *lib = new Library();
  lib->handle = handle;
  device().libraries.insert(lib);
  *library = reinterpret_cast<cudaLibrary_t>(lib);
  return cudaSuccess;
}

cudaError_t libraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library,
                             const char *name) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (!d.libraries.count(library))
    return fail(cudaErrorInvalidResourceHandle,
                "cudaLibraryGetKernel: not a library of this device");
  auto *lib = reinterpret_cast<Library *>(library);
  auto k = std::make_unique<Kernel>();
  k->name = name;
  k->thunk = reinterpret_cast<void (*)(void **)>(
      dlsym(lib->handle, ("gptc_kernel_" + k->name).c_str()));
  k->info = static_cast<const int64_t *>(
      dlsym(lib->handle, ("gptc_kernel_info_" + k->name).c_str()));
  if (!k->thunk || !k->info) {
    lastError = cudaErrorSymbolNotFound;
    return cudaErrorSymbolNotFound;
  }
  *kernel = reinterpret_cast<cudaKernel_t>(k.get());
  d.kernels.insert(k.get());
  lib->kernels.push_back(std::move(k));
  return cudaSuccess;
}

cudaError_t libraryUnload(cudaLibrary_t library) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (!d.libraries.count(library))
    return fail(cudaErrorInvalidResourceHandle,
                "cudaLibraryUnload: not a library of this device");
  auto *lib = reinterpret_cast<Library *>(library);
  for (auto &k : lib->kernels)
    d.kernels.erase(k.get());
  dlclose(lib->handle);
  d.libraries.erase(lib);
  delete lib;
  return cudaSuccess;
}

cudaError_t launchKernel(const void *func, dim3 grid, dim3 block, void **args,
                         size_t sharedMem, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  Device &d = device();
  if (!d.kernels.count(func))
    return fail(cudaErrorInvalidDeviceFunction,
                "cudaLaunchKernel(" + hex(func) +
                    "): not a kernel of a loaded image");
  const Kernel &k = *static_cast<const Kernel *>(func);
  bool synchronizes = k.info[0] != 0;
  int64_t maxThreads = k.info[1], shared = k.info[2], params = k.info[3];
  if (shared + static_cast<int64_t>(sharedMem) > (48 << 10))
    return fail(cudaErrorInvalidValue,
                "kernel " + k.name + ": " + std::to_string(shared) +
                    " bytes of static and " + std::to_string(sharedMem) +
                    " of dynamic shared memory, over the 48 KiB a block "
                    "gets without the opt-in attribute");
  std::vector<Access> list;
  for (int64_t i = 0; i < params; ++i) {
    int64_t bytes = k.info[4 + 2 * i];
    bool write = k.info[5 + 2 * i] != 0;
    if (bytes < 0)
      continue;
    const void *p = *static_cast<void *const *>(args[i]);
    if (bytes == 0) {
      // Not static: to its allocation's end.
      Allocation *a = findAllocation(p);
      if (!a)
        return fail(cudaErrorIllegalAddress, "kernel " + k.name + " argument " +
                                                 std::to_string(i) + " is " +
                                                 hex(p) + ", in no allocation");
      bytes = static_cast<int64_t>(a->bytes) -
              (static_cast<const char *>(p) - a->base);
    }
    list.push_back({p, bytes, write});
  }
  // The arguments' values now (CUDA copies them at the launch): a pointer
  // takes 8 bytes, a scalar the bytes its description gives.
  struct Arguments {
    std::vector<uint64_t> values;
    std::vector<void *> pointers;
  };
  auto arguments = std::make_shared<Arguments>();
  arguments->values.assign(params, 0);
  for (int64_t i = 0; i < params; ++i) {
    int64_t bytes = k.info[4 + 2 * i];
    std::memcpy(&arguments->values[i], args[i], bytes < 0 ? -bytes : 8);
  }
  for (uint64_t &v : arguments->values)
    arguments->pointers.push_back(&v);
  std::array<unsigned, 3> g{grid.x, grid.y, grid.z},
      b{block.x, block.y, block.z};
  void (*thunk)(void **) = k.thunk;
  return static_cast<cudaError_t>(vcuda::launch(
      stream, "kernel " + k.name, g.data(), b.data(), maxThreads, list, [=] {
        runThreads(
            g.data(), b.data(), [&] { thunk(arguments->pointers.data()); },
            !synchronizes);
      }));
}

} // namespace

int vcuda::launch(void *streamHandle, const std::string &name,
                  const unsigned grid[3], const unsigned block[3],
                  int64_t maxThreads, const std::vector<Access> &accesses,
                  const std::function<void()> &run) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(static_cast<cudaStream_t>(streamHandle), e);
  if (!s)
    return e;
  uint64_t threads = uint64_t(block[0]) * block[1] * block[2];
  std::string geometry =
      "<<<(" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
      std::to_string(grid[2]) + "), (" + std::to_string(block[0]) + ", " +
      std::to_string(block[1]) + ", " + std::to_string(block[2]) + ")>>>";
  if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2] ||
      block[0] > 1024 || block[1] > 1024 || block[2] > 64 || threads > 1024 ||
      grid[0] > 0x7fffffffu || grid[1] > 65535 || grid[2] > 65535)
    return fail(cudaErrorInvalidConfiguration,
                name + geometry + ": outside CUDA's grid and block limits");
  if (maxThreads > 0 && threads > static_cast<uint64_t>(maxThreads))
    return fail(cudaErrorInvalidConfiguration,
                name + geometry + ": " + std::to_string(threads) +
                    " threads a block, over its .maxntid of " +
                    std::to_string(maxThreads));
  std::string label = name + geometry;
  return issueOn(*s, label, [=](Stream &t) {
    uint64_t epoch = enqueue(t);
    if (cudaError_t e2 = touch(t, epoch, accesses, name))
      return e2;
    return submit(t, epoch, label, [=] {
      try {
        run();
      } catch (const std::exception &ex) {
        return fail(cudaErrorLaunchFailure, label + ": " + ex.what());
      }
      return checkCanaries(accesses, label);
    });
  });
}

int vcuda::memsetAsync(void *ptr, int value, size_t bytes, void *stream) {
  return memsetAsyncApi(ptr, value, bytes, static_cast<cudaStream_t>(stream));
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

namespace {

// Each object cuBLASLt hands out, by kind: a handle of one kind passed
// where another is expected is an error, not a reinterpretation.
struct LtHandle {
  static constexpr int kKind = 1;
};

struct MatmulDesc {
  static constexpr int kKind = 2;
  cublasComputeType_t compute;
  cudaDataType_t scaleType;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;
  int32_t biasType = -1, auxType = -1;
  int64_t biasBatchStride = 0, auxBatchStride = 0;
  cublasLtPointerMode_t pointerMode = CUBLASLT_POINTER_MODE_HOST;
};

struct Layout {
  static constexpr int kKind = 3;
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  static constexpr int kKind = 4;
  uint64_t workspace = 0;
  uint32_t alignA = 256, alignB = 256, alignC = 256, alignD = 256;
};

std::map<const void *, int> &ltObjects() {
  static std::map<const void *, int> objects;
  return objects;
}

template <typename T>
T *ltObject(const void *p) {
  auto it = ltObjects().find(p);
  return it != ltObjects().end() && it->second == T::kKind
             ? static_cast<T *>(const_cast<void *>(p))
             : nullptr;
}

/// Hands out `object` as a handle of cuBLASLt's type H.
template <typename H, typename T>
cublasStatus_t ltMake(H *handle, T *object) {
  ltObjects()[object] = T::kKind;
  *handle = reinterpret_cast<H>(object);
  return CUBLAS_STATUS_SUCCESS;
}

/// Destroys the object behind `handle`; `invalid` when it is none of T's.
template <typename T>
cublasStatus_t ltRelease(const void *handle, cublasStatus_t invalid) {
  T *object = ltObject<T>(handle);
  if (!object)
    return invalid;
  ltObjects().erase(object);
  delete object;
  return CUBLAS_STATUS_SUCCESS;
}

int64_t typeBytes(int t) {
  switch (t) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_16BF:
  case CUDA_R_16F:
    return 2;
  case CUDA_R_64F:
    return 8;
  default:
    return 0;
  }
}

float bf16ToFloat(uint16_t h) {
  uint32_t w = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
uint16_t floatToBf16(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  if ((w & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((w >> 16) | 0x40);
  w += 0x7fffu + ((w >> 16) & 1u);
  return static_cast<uint16_t>(w >> 16);
}
float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? NAN : INFINITY;
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400u),
                   static_cast<int>(exp) - 25);
  }
  uint32_t w;
  std::memcpy(&w, &f, 4);
  w |= sign;
  std::memcpy(&f, &w, 4);
  return f;
}
uint16_t floatToHalf(float f) {
  // Through the hardware's conversion: round to nearest even.
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

float load(const void *base, int type, int64_t index) {
  switch (type) {
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  case CUDA_R_16BF:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
  case CUDA_R_16F:
    return halfToFloat(static_cast<const uint16_t *>(base)[index]);
  default:
    return NAN;
  }
}
void store(void *base, int type, int64_t index, float v) {
  switch (type) {
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = v;
    break;
  case CUDA_R_16BF:
    static_cast<uint16_t *>(base)[index] = floatToBf16(v);
    break;
  case CUDA_R_16F:
    static_cast<uint16_t *>(base)[index] = floatToHalf(v);
    break;
  default:
    break;
  }
}

/// cuBLASLt's GELU: the tanh approximation, and its derivative.
float gelu(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}
float geluGrad(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  float t = std::tanh(u);
  float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

cublasStatus_t ltFail(cublasStatus_t s, const std::string &message) {
  fail(cudaErrorLaunchFailure, "cuBLASLt: " + message);
  return s;
}

cublasStatus_t ltCreate(cublasLtHandle_t *handle) {
  auto *h = new LtHandle();
  return ltMake(handle, h);
}
cublasStatus_t ltDestroy(cublasLtHandle_t handle) {
  return ltRelease<LtHandle>(handle, CUBLAS_STATUS_NOT_INITIALIZED);
}
const char *ltStatusString(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED (virtual-cuda: see the error "
           "above)";
  default:
    return "CUBLAS_STATUS (other)";
  }
}

cublasStatus_t descCreate(cublasLtMatmulDesc_t *desc,
                          cublasComputeType_t compute,
                          cudaDataType_t scaleType) {
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "the virtual device computes in f32 only (compute type " +
                      std::to_string(compute) + ")");
  if (scaleType != CUDA_R_32F)
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED, "scale type must be f32");
  auto *d = new MatmulDesc();
  d->compute = compute;
  d->scaleType = scaleType;
  return ltMake(desc, d);
}
cublasStatus_t descDestroy(cublasLtMatmulDesc_t desc) {
  return ltRelease<MatmulDesc>(desc, CUBLAS_STATUS_INVALID_VALUE);
}

/// An attribute's value into `out`: the size must be the attribute's;
/// `what` names the kind of object for the error.
template <typename T>
cublasStatus_t setAttribute(T &out, const void *buf, size_t size,
                            const char *what, int attr) {
  if (size != sizeof(T))
    return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                  std::string(what) + " attribute " + std::to_string(attr) +
                      " set with " + std::to_string(size) + " bytes, not " +
                      std::to_string(sizeof(T)));
  std::memcpy(&out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

/// An attribute the virtual device does not model.
cublasStatus_t unmodelled(const char *what, int attr) {
  return ltFail(CUBLAS_STATUS_NOT_SUPPORTED,
                std::string(what) + " attribute " + std::to_string(attr) +
                    " is not modelled by the virtual device");
}

cublasStatus_t descSet(cublasLtMatmulDesc_t desc,
                       cublasLtMatmulDescAttributes_t attr, const void *buf,
                       size_t size) {
  auto *d = ltObject<MatmulDesc>(desc);
  if (!d)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setAttribute(d->transa, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setAttribute(d->transb, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setAttribute(d->epilogue, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setAttribute(d->bias, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setAttribute(d->aux, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setAttribute(d->auxLd, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setAttribute(d->biasType, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    return setAttribute(d->auxType, buf, size, "matmul descriptor", attr);
  case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    return setAttribute(d->biasBatchStride, buf, size, "matmul descriptor",
                        attr);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
    return setAttribute(d->auxBatchStride, buf, size, "matmul descriptor",
                        attr);
  case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    return setAttribute(d->pointerMode, buf, size, "matmul descriptor", attr);
  default:
    return unmodelled("matmul descriptor", attr);
  }
}

cublasStatus_t layoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                            uint64_t rows, uint64_t cols, int64_t ld) {
  if (!typeBytes(type))
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "matrix type " + std::to_string(type));
  auto *l = new Layout{type, rows, cols, ld};
  return ltMake(layout, l);
}
cublasStatus_t layoutDestroy(cublasLtMatrixLayout_t layout) {
  return ltRelease<Layout>(layout, CUBLAS_STATUS_INVALID_VALUE);
}
cublasStatus_t layoutSet(cublasLtMatrixLayout_t layout,
                         cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                         size_t size) {
  auto *l = ltObject<Layout>(layout);
  if (!l)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setAttribute(l->batch, buf, size, "matrix layout", attr);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setAttribute(l->stride, buf, size, "matrix layout", attr);
  case CUBLASLT_MATRIX_LAYOUT_ORDER:
    return setAttribute(l->order, buf, size, "matrix layout", attr);
  default:
    return unmodelled("matrix layout", attr);
  }
}

cublasStatus_t prefCreate(cublasLtMatmulPreference_t *pref) {
  auto *p = new Preference();
  return ltMake(pref, p);
}
cublasStatus_t prefDestroy(cublasLtMatmulPreference_t pref) {
  return ltRelease<Preference>(pref, CUBLAS_STATUS_INVALID_VALUE);
}
cublasStatus_t prefSet(cublasLtMatmulPreference_t pref,
                       cublasLtMatmulPreferenceAttributes_t attr,
                       const void *buf, size_t size) {
  auto *p = ltObject<Preference>(pref);
  if (!p)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setAttribute(p->workspace, buf, size, "preference", attr);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    return setAttribute(p->alignA, buf, size, "preference", attr);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    return setAttribute(p->alignB, buf, size, "preference", attr);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    return setAttribute(p->alignC, buf, size, "preference", attr);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setAttribute(p->alignD, buf, size, "preference", attr);
  default:
    return unmodelled("preference", attr);
  }
}

/// op(X)'s rows and columns from X's layout.
std::pair<uint64_t, uint64_t> opShape(const Layout &l, cublasOperation_t op) {
  return op == CUBLAS_OP_N ? std::make_pair(l.rows, l.cols)
                           : std::make_pair(l.cols, l.rows);
}

/// Why (desc, a, b, c, d) is not a product the virtual device runs, or "".
std::string checkProduct(const MatmulDesc &d, const Layout &a, const Layout &b,
                         const Layout &c, const Layout &dd) {
  for (const Layout *l : {&a, &b, &c, &dd}) {
    if (l->order != CUBLASLT_ORDER_COL)
      return "only column-major layouts are modelled";
    if (l->ld < static_cast<int64_t>(std::max<uint64_t>(1, l->rows)))
      return "a leading dimension " + std::to_string(l->ld) +
             " is smaller than its rows " + std::to_string(l->rows);
  }
  if (d.transa == CUBLAS_OP_C || d.transb == CUBLAS_OP_C)
    return "conjugate transposes are for complex types";
  auto [m, k] = opShape(a, d.transa);
  auto [k2, n] = opShape(b, d.transb);
  if (k != k2)
    return "op(A) is " + std::to_string(m) + " x " + std::to_string(k) +
           " but op(B) is " + std::to_string(k2) + " x " + std::to_string(n);
  if (c.rows != m || c.cols != n || dd.rows != m || dd.cols != n)
    return "C/D are not " + std::to_string(m) + " x " + std::to_string(n);
  if (a.type != b.type || c.type != dd.type)
    return "A and B, or C and D, differ in type";
  if (a.batch != b.batch || a.batch != dd.batch || c.batch != dd.batch)
    return "the batch counts differ";
  bool usesAux = d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX ||
                 d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
                 d.epilogue == CUBLASLT_EPILOGUE_DGELU ||
                 d.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  if (usesAux && (d.auxLd < static_cast<int64_t>(m) || d.auxLd % 8 != 0))
    return "the epilogue's auxiliary leading dimension " +
           std::to_string(d.auxLd) +
           " must be at least the rows and a multiple of 8";
  switch (d.epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
  case CUBLASLT_EPILOGUE_DGELU:
  case CUBLASLT_EPILOGUE_DGELU_BGRAD:
  case CUBLASLT_EPILOGUE_BGRADA:
  case CUBLASLT_EPILOGUE_BGRADB:
    break;
  default:
    return "epilogue " + std::to_string(d.epilogue) + " is not modelled";
  }
  return "";
}

cublasStatus_t heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                         cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                         cublasLtMatmulPreference_t pref, int requested,
                         cublasLtMatmulHeuristicResult_t *results,
                         int *returned) {
  auto *md = ltObject<MatmulDesc>(desc);
  auto *la = ltObject<Layout>(a), *lb = ltObject<Layout>(b),
       *lc = ltObject<Layout>(c), *ld = ltObject<Layout>(d);
  auto *p = ltObject<Preference>(pref);
  if (!ltObject<LtHandle>(handle) || !md || !la || !lb || !lc || !ld || !p ||
      requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  if (!checkProduct(*md, *la, *lb, *lc, *ld).empty())
    return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(&results[0], 0, sizeof(results[0]));
  // The algorithm remembers the alignment it may assume (the smallest the
  // preference promises) and the workspace it was chosen for.
  uint32_t align = std::min({p->alignA, p->alignB, p->alignC, p->alignD});
  results[0].algo.data[0] = 0x7643u;
  results[0].algo.data[1] = align;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

/// The bytes X of `l` spans from its first element over all its batches.
int64_t span(const Layout &l) {
  if (!l.rows || !l.cols || l.batch < 1)
    return 0;
  int64_t last = (static_cast<int64_t>(l.cols) - 1) * l.ld +
                 static_cast<int64_t>(l.rows) + (l.batch - 1) * l.stride;
  return last * typeBytes(l.type);
}

cublasStatus_t matmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                      const void *alpha, const void *A,
                      cublasLtMatrixLayout_t a, const void *B,
                      cublasLtMatrixLayout_t b, const void *beta, const void *C,
                      cublasLtMatrixLayout_t c, void *D,
                      cublasLtMatrixLayout_t d,
                      const cublasLtMatmulAlgo_t *algo, void *workspace,
                      size_t workspaceSize, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  auto *md = ltObject<MatmulDesc>(desc);
  auto *la = ltObject<Layout>(a), *lb = ltObject<Layout>(b),
       *lc = ltObject<Layout>(c), *ld = ltObject<Layout>(d);
  if (!ltObject<LtHandle>(handle) || !md || !la || !lb || !lc || !ld)
    return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: a handle, descriptor or layout that "
                  "cuBLASLt did not create");
  std::string why = checkProduct(*md, *la, *lb, *lc, *ld);
  if (!why.empty())
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: " + why);
  if (!algo || algo->data[0] != 0x7643u)
    return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: an algorithm cublasLtMatmulAlgoGetHeuristic "
                  "did not give");
  if (md->pointerMode != CUBLASLT_POINTER_MODE_HOST)
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmul: only host alpha and beta are modelled");
  uint64_t align = algo->data[1];
  auto aligned = [&](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % align == 0;
  };
  uint64_t m = opShape(*la, md->transa).first,
           k = opShape(*la, md->transa).second,
           n = opShape(*lb, md->transb).second;
  float alphaV = *static_cast<const float *>(alpha),
        betaV = *static_cast<const float *>(beta);
  int64_t batches = la->batch;
  cublasLtEpilogue_t ep = md->epilogue;
  bool hasBias = ep == CUBLASLT_EPILOGUE_BIAS ||
                 ep == CUBLASLT_EPILOGUE_GELU_BIAS ||
                 ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool biasGrad = ep == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
                  ep == CUBLASLT_EPILOGUE_BGRADA ||
                  ep == CUBLASLT_EPILOGUE_BGRADB;
  bool writesAux =
      ep == CUBLASLT_EPILOGUE_GELU_AUX || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool readsAux =
      ep == CUBLASLT_EPILOGUE_DGELU || ep == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  bool geluOut = ep == CUBLASLT_EPILOGUE_GELU ||
                 ep == CUBLASLT_EPILOGUE_GELU_BIAS || writesAux;
  int biasType = md->biasType >= 0 ? md->biasType : ld->type;
  int auxType = md->auxType >= 0 ? md->auxType : ld->type;
  uint64_t biasLength = ep == CUBLASLT_EPILOGUE_BGRADB ? n : m;
  if ((hasBias || biasGrad) && !md->bias)
    return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: epilogue " + std::to_string(ep) +
                      " without CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  if ((writesAux || readsAux) && !md->aux)
    return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: epilogue " + std::to_string(ep) +
                      " without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
  if (batches > 1 && (hasBias || biasGrad || writesAux || readsAux))
    return ltFail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmul: batched epilogues are not modelled");
  const std::pair<const void *, const char *> operands[] = {
      {A, "A"}, {B, "B"}, {C, "C"}, {D, "D"}};
  for (auto [p, what] : operands)
    if (!aligned(p))
      return ltFail(CUBLAS_STATUS_INVALID_VALUE,
                    std::string("cublasLtMatmul: ") + what + " at " + hex(p) +
                        " is not aligned to the " + std::to_string(align) +
                        " bytes its algorithm was chosen for");
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  std::vector<Access> list{
      {A, span(*la), false}, {B, span(*lb), false}, {D, span(*ld), true}};
  if (betaV != 0)
    list.push_back({C, span(*lc), false});
  if (workspace && workspaceSize)
    list.push_back({workspace, static_cast<int64_t>(workspaceSize), true});
  Layout auxLayout{static_cast<cudaDataType>(auxType), m, n, md->auxLd};
  if (writesAux || readsAux)
    list.push_back({md->aux, span(auxLayout), writesAux});
  if (hasBias || biasGrad)
    list.push_back({md->bias,
                    static_cast<int64_t>(biasLength) * typeBytes(biasType),
                    biasGrad});
  // The descriptors as they are now (the caller may change or destroy
  // them before the product runs, or a graph replays it).
  auto state =
      std::make_shared<std::tuple<MatmulDesc, Layout, Layout, Layout, Layout>>(
          *md, *la, *lb, *lc, *ld);
  cudaError_t status = issueOn(*s, "cublasLtMatmul", [=](Stream &t) {
    uint64_t epoch = enqueue(t);
    if (cudaError_t e2 = touch(t, epoch, list, "cublasLtMatmul"))
      return e2;
    return submit(t, epoch, "cublasLtMatmul", [=]() {
      const MatmulDesc *md = &std::get<0>(*state);
      const Layout *la = &std::get<1>(*state), *lb = &std::get<2>(*state),
                   *lc = &std::get<3>(*state), *ld = &std::get<4>(*state);
      // D = alpha op(A) op(B) + beta C, then the epilogue, element (i, j) of
      // batch t at t * stride + j * ld + i (column-major).
      auto element = [](const Layout &l, cublasOperation_t op, int64_t t,
                        uint64_t i, uint64_t j) {
        uint64_t r = op == CUBLAS_OP_N ? i : j, col = op == CUBLAS_OP_N ? j : i;
        return t * l.stride + static_cast<int64_t>(col) * l.ld +
               static_cast<int64_t>(r);
      };
      std::vector<float> acc(m * n), opA(m * k), opB(k * n);
      std::vector<double> biasSum(biasGrad ? biasLength : 0, 0.0);
      for (int64_t t = 0; t < batches; ++t) {
        // op(A) and op(B) unpacked to f32, column-major; each element of the
        // product sums over k in order, in f32.
        for (uint64_t p = 0; p < k; ++p)
          for (uint64_t i = 0; i < m; ++i)
            opA[p * m + i] =
                load(A, la->type, element(*la, md->transa, t, i, p));
        for (uint64_t j = 0; j < n; ++j)
          for (uint64_t p = 0; p < k; ++p)
            opB[j * k + p] =
                load(B, lb->type, element(*lb, md->transb, t, p, j));
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (uint64_t j = 0; j < n; ++j) {
          float *column = acc.data() + j * m;
          for (uint64_t p = 0; p < k; ++p) {
            float b = opB[j * k + p];
            const float *a = opA.data() + p * m;
            for (uint64_t i = 0; i < m; ++i)
              column[i] += a[i] * b;
          }
        }
        for (uint64_t j = 0; j < n; ++j)
          for (uint64_t i = 0; i < m; ++i) {
            float v = alphaV * acc[j * m + i];
            if (betaV != 0)
              v +=
                  betaV * load(C, lc->type, element(*lc, CUBLAS_OP_N, t, i, j));
            if (hasBias)
              v += load(md->bias, biasType, static_cast<int64_t>(i));
            int64_t auxAt =
                static_cast<int64_t>(j) * md->auxLd + static_cast<int64_t>(i);
            if (writesAux)
              store(md->aux, auxType, auxAt, v);
            if (geluOut)
              v = gelu(v);
            if (readsAux)
              v *= geluGrad(load(md->aux, auxType, auxAt));
            store(D, ld->type, element(*ld, CUBLAS_OP_N, t, i, j), v);
            if (ep == CUBLASLT_EPILOGUE_DGELU_BGRAD)
              biasSum[i] += v;
          }
        if (ep == CUBLASLT_EPILOGUE_BGRADA || ep == CUBLASLT_EPILOGUE_BGRADB) {
          // The sum over the GEMM's k of op(A) (per row of D) or op(B) (per
          // column of D).
          bool isA = ep == CUBLASLT_EPILOGUE_BGRADA;
          for (uint64_t x = 0; x < biasLength; ++x)
            for (uint64_t p = 0; p < k; ++p)
              biasSum[x] +=
                  isA ? load(A, la->type, element(*la, md->transa, t, x, p))
                      : load(B, lb->type, element(*lb, md->transb, t, p, x));
        }
      }
      for (uint64_t x = 0; x < biasSum.size(); ++x)
        store(const_cast<void *>(md->bias), biasType, static_cast<int64_t>(x),
              static_cast<float>(biasSum[x]));
      return cudaSuccess;
    });
  });
  return status == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                               : CUBLAS_STATUS_EXECUTION_FAILED;
}

//===----------------------------------------------------------------------===//
// NCCL over MPI
//===----------------------------------------------------------------------===//
//
// A communicator is an MPI communicator of its ranks (in NCCL's rank
// order), made by MPI_Comm_create_group, which only its members call: the
// ranks find each other through the unique id, which names the world rank
// that made it. A collective is checked and recorded on its stream when it
// is enqueued and runs at the end of its group (each call outside
// ncclGroupStart/End is a group of its own): every collective of the group
// starts as a non-blocking MPI collective, so a group may order calls on
// several communicators differently on different ranks, as NCCL allows.
// Each rank gathers the contributions and reduces them in rank order, in
// f32 for 16-bit types (NCCL's ring rounds at every hop; this rounds once),
// so every rank gets the same bits.

struct NcclComm {
  int ranks = 1, rank = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  ncclResult_t asyncError = ncclSuccess;
  bool aborted = false;
  /// Collectives enqueued on it (fault injection counts them).
  int64_t calls = 0;
};

std::map<const void *, std::shared_ptr<NcclComm>> &ncclComms() {
  static std::map<const void *, std::shared_ptr<NcclComm>> comms;
  return comms;
}

struct PendingCollective {
  enum Kind { AllReduce, ReduceScatter, AllGather } kind;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  std::shared_ptr<NcclComm> comm;
  std::vector<char> gathered;
  MPI_Request request = MPI_REQUEST_NULL;
  /// Its operation on its stream.
  int component = 0;
  uint64_t epoch = 0;
  /// Never posted (fault injection): it never completes; `failsAsync`:
  /// its communicator reports an error when it is posted.
  bool hung = false;
  bool failsAsync = false;
};

int groupDepth = 0;
/// Collectives posted to MPI and not yet complete.
std::vector<std::unique_ptr<PendingCollective>> inflight;
std::string ncclLastMessage;

ncclResult_t ncclFail(ncclResult_t r, const std::string &message) {
  ncclLastMessage = message;
  fail(cudaErrorLaunchFailure, "NCCL: " + message);
  return r;
}

const char *ncclErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (virtual-cuda: see the error above)";
  case ncclSystemError:
    return "unhandled system error (virtual-cuda: see the error above)";
  case ncclInternalError:
    return "internal error (virtual-cuda: see the error above)";
  case ncclInvalidArgument:
    return "invalid argument (virtual-cuda: see the error above)";
  case ncclInvalidUsage:
    return "invalid usage (virtual-cuda: see the error above)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  default:
    return "NCCL error";
  }
}
const char *ncclLast(ncclComm_t) { return ncclLastMessage.c_str(); }
ncclResult_t ncclVersion(int *v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}

int worldRank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int rank = 0;
  if (initialized)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

constexpr char kIdMagic[] = "gptc-virtual-nccl";

ncclResult_t uniqueId(ncclUniqueId *id) {
  static int counter = 0;
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "%s %d %d", kIdMagic,
                worldRank(), counter++);
  return ncclSuccess;
}

ncclResult_t commInitRank(ncclComm_t *out, int nranks, ncclUniqueId id,
                          int rank) {
  int root = -1, counter = -1;
  char magic[32] = {};
  if (std::sscanf(id.internal, "%31s %d %d", magic, &root, &counter) != 3 ||
      std::string(magic) != kIdMagic)
    return ncclFail(ncclInvalidArgument,
                    "ncclCommInitRank: the unique id was not made by "
                    "ncclGetUniqueId of the virtual device");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ncclFail(ncclInvalidArgument, "ncclCommInitRank: rank " +
                                             std::to_string(rank) + " of " +
                                             std::to_string(nranks));
  auto c = std::make_unique<NcclComm>();
  c->ranks = nranks;
  c->rank = rank;
  if (nranks > 1) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      return ncclFail(ncclInvalidUsage,
                      "a communicator of " + std::to_string(nranks) +
                          " ranks needs the processes started by mpirun");
    // The members tell the root their world ranks; the root answers with
    // all of them in NCCL's order.
    int tag = 32000 + counter % 700 * 2;
    std::vector<int> world(static_cast<size_t>(nranks), -1);
    int me[2] = {rank, worldRank()};
    if (me[1] == root) {
      if (rank != 0)
        return ncclFail(ncclInvalidUsage, "the unique id's maker is rank " +
                                              std::to_string(rank) +
                                              ", not rank 0");
      world[0] = root;
      for (int i = 1; i < nranks; ++i) {
        int who[2];
        MPI_Recv(who, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (who[0] <= 0 || who[0] >= nranks || world[who[0]] != -1)
          return ncclFail(ncclInvalidUsage,
                          "ncclCommInitRank: two processes claim rank " +
                              std::to_string(who[0]));
        world[who[0]] = who[1];
      }
      for (int i = 1; i < nranks; ++i)
        MPI_Send(world.data(), nranks, MPI_INT, world[i], tag + 1,
                 MPI_COMM_WORLD);
    } else {
      MPI_Send(me, 2, MPI_INT, root, tag, MPI_COMM_WORLD);
      MPI_Recv(world.data(), nranks, MPI_INT, root, tag + 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    }
    MPI_Group all, members;
    MPI_Comm_group(MPI_COMM_WORLD, &all);
    MPI_Group_incl(all, nranks, world.data(), &members);
    MPI_Comm_create_group(MPI_COMM_WORLD, members, tag, &c->comm);
    MPI_Group_free(&members);
    MPI_Group_free(&all);
    if (c->comm == MPI_COMM_NULL)
      return ncclFail(ncclSystemError, "MPI_Comm_create_group failed");
  }
  std::shared_ptr<NcclComm> shared(c.release());
  *out = reinterpret_cast<ncclComm_t>(shared.get());
  ncclComms()[shared.get()] = shared;
  return ncclSuccess;
}

std::shared_ptr<NcclComm> resolveComm(ncclComm_t comm) {
  auto it = ncclComms().find(comm);
  return it == ncclComms().end() ? nullptr : it->second;
}

ncclResult_t commDestroy(ncclComm_t comm) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  std::shared_ptr<NcclComm> c = resolveComm(comm);
  if (!c)
    return ncclFail(ncclInvalidArgument, "ncclCommDestroy: not a "
                                         "communicator");
  if (c->comm != MPI_COMM_NULL && !c->aborted) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Comm_free(&c->comm);
  }
  ncclComms().erase(comm);
  return ncclSuccess;
}

ncclResult_t commAbort(ncclComm_t comm) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  std::shared_ptr<NcclComm> c = resolveComm(comm);
  if (!c)
    return ncclFail(ncclInvalidArgument, "ncclCommAbort: not a communicator");
  // Its MPI communicator may be inside a collective that never ends: it is
  // left, not freed, and so are its collectives in flight (their streams
  // never complete: the process is ending).
  c->aborted = true;
  std::fprintf(stderr, "virtual-cuda: ncclCommAbort (rank %d of %d)\n", c->rank,
               c->ranks);
  std::fflush(stderr);
  ncclComms().erase(comm);
  return ncclSuccess;
}

ncclResult_t commGetAsyncError(ncclComm_t comm, ncclResult_t *e) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  progress();
  std::shared_ptr<NcclComm> c = resolveComm(comm);
  if (!c)
    return ncclFail(ncclInvalidArgument,
                    "ncclCommGetAsyncError: not a communicator");
  *e = c->asyncError;
  return ncclSuccess;
}

int64_t ncclBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

/// recv[i] = op over the ranks r (in order) of part r's element i.
void reduceParts(const PendingCollective &p, const char *parts,
                 int64_t partBytes) {
  int n = p.comm->ranks;
  auto combine = [&](auto a, auto b) {
    switch (p.op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return a > b ? a : b;
    case ncclMin:
      return a < b ? a : b;
    default:
      return a + b;
    }
  };
  for (size_t i = 0; i < p.count; ++i) {
    auto fold = [&](auto read) {
      auto v = read(parts, i);
      for (int r = 1; r < n; ++r)
        v = combine(v, read(parts + r * partBytes, i));
      if (p.op == ncclAvg)
        v = v / n;
      return v;
    };
    switch (p.type) {
    case ncclFloat32:
      static_cast<float *>(p.recv)[i] = fold([](const char *b, size_t j) {
        return reinterpret_cast<const float *>(b)[j];
      });
      break;
    case ncclFloat64:
      static_cast<double *>(p.recv)[i] = fold([](const char *b, size_t j) {
        return reinterpret_cast<const double *>(b)[j];
      });
      break;
    case ncclBfloat16:
      static_cast<uint16_t *>(p.recv)[i] =
          floatToBf16(fold([](const char *b, size_t j) {
            return bf16ToFloat(reinterpret_cast<const uint16_t *>(b)[j]);
          }));
      break;
    case ncclFloat16:
      static_cast<uint16_t *>(p.recv)[i] =
          floatToHalf(fold([](const char *b, size_t j) {
            return halfToFloat(reinterpret_cast<const uint16_t *>(b)[j]);
          }));
      break;
    case ncclInt32:
      static_cast<int32_t *>(p.recv)[i] = fold([](const char *b, size_t j) {
        return reinterpret_cast<const int32_t *>(b)[j];
      });
      break;
    case ncclInt64:
      static_cast<int64_t *>(p.recv)[i] = fold([](const char *b, size_t j) {
        return reinterpret_cast<const int64_t *>(b)[j];
      });
      break;
    default:
      break;
    }
  }
}

/// GPTC_VIRTUAL_CUDA_FAULT: a collective that fails on purpose, for the
/// tests of what the runtime does then (test/Runtime/virtual-cuda-faults.test).
/// `nccl-hang:R:N`: world rank R hangs in its N-th collective (the
/// process stops there); `nccl-error:R:N`: rank R's N-th collective never
/// completes and its communicator reports ncclRemoteError, as NCCL does
/// when a peer dies; `nccl-exit:R:N`: rank R dies there.
struct CollectiveFault {
  enum Kind { None, Hang, Error, Exit } kind = None;
  int rank = -1;
  int64_t ordinal = 0;
};

const CollectiveFault &collectiveFault() {
  static const CollectiveFault fault = [] {
    CollectiveFault f;
    const char *text = std::getenv("GPTC_VIRTUAL_CUDA_FAULT");
    if (!text || !*text)
      return f;
    char kind[16] = {};
    long long ordinal = 0;
    if (std::sscanf(text, "nccl-%15[a-z]:%d:%lld", kind, &f.rank, &ordinal) ==
            3 &&
        ordinal > 0) {
      f.ordinal = ordinal;
      std::string k = kind;
      f.kind = k == "hang"    ? CollectiveFault::Hang
               : k == "error" ? CollectiveFault::Error
               : k == "exit"  ? CollectiveFault::Exit
                              : CollectiveFault::None;
    }
    if (f.kind == CollectiveFault::None)
      std::fprintf(stderr,
                   "virtual-cuda: warning: GPTC_VIRTUAL_CUDA_FAULT=%s is not "
                   "nccl-{hang,error,exit}:RANK:N; ignored\n",
                   text);
    return f;
  }();
  return fault;
}

/// Starts `p` as a non-blocking MPI collective (or, for one rank, does it).
cudaError_t post(std::unique_ptr<PendingCollective> p) {
  int64_t bytes = static_cast<int64_t>(p->count) * ncclBytes(p->type);
  int n = p->comm->ranks;
  if (n == 1) {
    std::memmove(p->recv, p->send, static_cast<size_t>(bytes));
    markDone(p->component, p->epoch);
    return cudaSuccess;
  }
  if (p->failsAsync) {
    // A peer that died: the collective never completes and the
    // communicator says why.
    p->comm->asyncError = ncclRemoteError;
    p->hung = true;
    inflight.push_back(std::move(p));
    return cudaSuccess;
  }
  if (bytes > INT32_MAX)
    return fail(cudaErrorInvalidValue,
                "a collective of " + std::to_string(bytes) +
                    " bytes a rank: the virtual device moves under 2 GiB");
  p->gathered.resize(static_cast<size_t>(n * bytes));
  int b = static_cast<int>(bytes);
  if (p->kind == PendingCollective::ReduceScatter)
    MPI_Ialltoall(p->send, b, MPI_BYTE, p->gathered.data(), b, MPI_BYTE,
                  p->comm->comm, &p->request);
  else
    MPI_Iallgather(p->send, b, MPI_BYTE, p->gathered.data(), b, MPI_BYTE,
                   p->comm->comm, &p->request);
  inflight.push_back(std::move(p));
  return cudaSuccess;
}

bool progressCollectives() {
  bool changed = false;
  for (auto it = inflight.begin(); it != inflight.end();) {
    PendingCollective &p = **it;
    int flag = 0;
    if (!p.hung)
      MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
    if (!flag) {
      ++it;
      continue;
    }
    int64_t bytes = static_cast<int64_t>(p.count) * ncclBytes(p.type);
    if (p.kind == PendingCollective::AllGather)
      std::memcpy(p.recv, p.gathered.data(), p.gathered.size());
    else
      reduceParts(p, p.gathered.data(), bytes);
    markDone(p.component, p.epoch);
    it = inflight.erase(it);
    changed = true;
  }
  return changed;
}

cudaError_t issueCollective(Stream &s, PendingCollective op,
                            const std::string &label, int64_t sendBytes,
                            int64_t recvBytes);

ncclResult_t enqueueCollective(PendingCollective op, cudaStream_t stream,
                               const char *what) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  if (!op.comm)
    return ncclFail(ncclInvalidArgument,
                    std::string(what) + ": not a communicator");
  int64_t element = ncclBytes(op.type);
  if (!element)
    return ncclFail(ncclInvalidArgument, std::string(what) + ": data type " +
                                             std::to_string(op.type));
  cudaError_t e = cudaSuccess;
  Stream *s = resolve(stream, e);
  if (!s)
    return ncclInvalidArgument;
  int64_t bytes = static_cast<int64_t>(op.count) * element;
  int64_t n = op.comm->ranks;
  int64_t sendBytes =
      op.kind == PendingCollective::ReduceScatter ? n * bytes : bytes;
  int64_t recvBytes =
      op.kind == PendingCollective::AllGather ? n * bytes : bytes;
  std::string label = std::string(what) + " (rank " +
                      std::to_string(op.comm->rank) + " of " +
                      std::to_string(n) + ")";
  cudaError_t status = issueOn(*s, label, [=](Stream &t) {
    return issueCollective(t, op, label, sendBytes, recvBytes);
  });
  return status == cudaSuccess ? ncclSuccess : ncclInvalidUsage;
}

/// The collective `op` on `s`, its group's bytes checked and recorded.
cudaError_t issueCollective(Stream &s, PendingCollective op,
                            const std::string &label, int64_t sendBytes,
                            int64_t recvBytes) {
  uint64_t epoch = enqueue(s);
  if (cudaError_t e = touch(
          s, epoch, {{op.send, sendBytes, false}, {op.recv, recvBytes, true}},
          label))
    return e;
  ++op.comm->calls;
  // GPTC_VIRTUAL_CUDA_FAULT counts this process's collectives as they are
  // enqueued: a hang or a death happens in the call (outside any wait the
  // runtime watches), an error when the collective is posted.
  static int64_t enqueued = 0;
  const CollectiveFault &fault = collectiveFault();
  if (fault.kind != CollectiveFault::None && worldRank() == fault.rank &&
      ++enqueued == fault.ordinal) {
    std::fprintf(stderr,
                 "virtual-cuda: rank %d %s at collective %lld "
                 "(GPTC_VIRTUAL_CUDA_FAULT)\n",
                 fault.rank,
                 fault.kind == CollectiveFault::Hang   ? "hangs"
                 : fault.kind == CollectiveFault::Exit ? "dies"
                                                       : "loses a peer",
                 static_cast<long long>(fault.ordinal));
    std::fflush(stderr);
    if (fault.kind == CollectiveFault::Hang)
      for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
    if (fault.kind == CollectiveFault::Exit)
      std::_Exit(9);
    op.failsAsync = true;
  }
  op.component = s.component;
  op.epoch = epoch;
  // Posted when its stream reaches it; complete when MPI says so (post()
  // marks a one-rank copy done itself).
  auto pending = std::make_shared<PendingCollective>(std::move(op));
  return submit(
      s, epoch, label,
      [pending] {
        return post(std::make_unique<PendingCollective>(std::move(*pending)));
      },
      /*completesLater=*/true);
}

ncclResult_t groupStart() {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  ++groupDepth;
  return ncclSuccess;
}
/// Every collective is posted as a non-blocking MPI collective when its
/// stream reaches it, so a group needs nothing more: its calls on several
/// communicators may be ordered differently on different ranks.
ncclResult_t groupEnd() {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  if (groupDepth == 0)
    return ncclFail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  --groupDepth;
  return ncclSuccess;
}

ncclResult_t allReduce(const void *send, void *recv, size_t count,
                       ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                       cudaStream_t stream) {
  return enqueueCollective({PendingCollective::AllReduce, send, recv, count,
                            type, op, resolveComm(comm)},
                           stream, "ncclAllReduce");
}
ncclResult_t reduceScatter(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueueCollective({PendingCollective::ReduceScatter, send, recv, count,
                            type, op, resolveComm(comm)},
                           stream, "ncclReduceScatter");
}
ncclResult_t allGather(const void *send, void *recv, size_t count,
                       ncclDataType_t type, ncclComm_t comm,
                       cudaStream_t stream) {
  return enqueueCollective({PendingCollective::AllGather, send, recv, count,
                            type, ncclSum, resolveComm(comm)},
                           stream, "ncclAllGather");
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

cudaError_t kAttentionForward(cuda::AttentionType type, const void *q,
                              const void *k, const void *v, void *out,
                              int64_t batch, int64_t T, int64_t C,
                              int64_t heads, cudaStream_t stream) {
  return static_cast<cudaError_t>(emulated::attentionForward(
      static_cast<int>(type), q, k, v, out, batch, T, C, heads, stream));
}
cudaError_t kAttentionBackward(cuda::AttentionType type, const void *q,
                               const void *k, const void *v, const void *dout,
                               void *dq, void *dk, void *dv, float *stats,
                               int64_t batch, int64_t T, int64_t C,
                               int64_t heads, cudaStream_t stream) {
  return static_cast<cudaError_t>(
      emulated::attentionBackward(static_cast<int>(type), q, k, v, dout, dq, dk,
                                  dv, stats, batch, T, C, heads, stream));
}
cudaError_t kEmbeddingGrad(const int32_t *ids, int64_t n, const float *dy,
                           int64_t vocab, int64_t width, const int32_t *offset,
                           float *dtable, cudaStream_t stream) {
  return static_cast<cudaError_t>(emulated::embeddingGrad(
      ids, n, dy, vocab, width, offset, dtable, stream));
}
cudaError_t kAddInPlace(int dtype, void *y, const void *x, int64_t n,
                        cudaStream_t stream) {
  return static_cast<cudaError_t>(emulated::addInPlace(dtype, y, x, n, stream));
}
cudaError_t kGeluEpilogue(int dtype, const void *pre, void *act, int64_t n,
                          cudaStream_t stream) {
  return static_cast<cudaError_t>(
      emulated::geluEpilogue(dtype, pre, act, n, stream));
}
cudaError_t kDgeluEpilogue(int dtype, const void *pre, void *d, int64_t n,
                           cudaStream_t stream) {
  return static_cast<cudaError_t>(
      emulated::dgeluEpilogue(dtype, pre, d, n, stream));
}
cudaError_t kBiasGradEpilogue(int dtype, const void *x, int64_t rows,
                              int64_t cols, void *db, cudaStream_t stream) {
  return static_cast<cudaError_t>(
      emulated::biasGradEpilogue(dtype, x, rows, cols, db, stream));
}
cudaError_t kScaleInPlace(float *x, int64_t n, float f, cudaStream_t stream) {
  return static_cast<cudaError_t>(emulated::scaleInPlace(x, n, f, stream));
}
cudaError_t kSumOfSquares(const float *x, int64_t n, double *partials,
                          double *total, cudaStream_t stream) {
  return static_cast<cudaError_t>(
      emulated::sumOfSquares(x, n, partials, total, stream));
}
cudaError_t kAdamW(float *p, const float *g, float *m, float *v, int64_t n,
                   double lr, int64_t step, double scale, double beta1,
                   double beta2, double eps, double weightDecay,
                   cudaStream_t stream) {
  return static_cast<cudaError_t>(emulated::adamW(
      p, g, m, v, n, lr, step, scale, beta1, beta2, eps, weightDecay, stream));
}

const cuda::DeviceKernelSet emulatedKernels = {
    kAttentionForward, kAttentionBackward,
    kEmbeddingGrad,    kAddInPlace,
    kGeluEpilogue,     kDgeluEpilogue,
    kBiasGradEpilogue, kScaleInPlace,
    kSumOfSquares,     kAdamW};

cuda::CudaApi makeTable() {
  cuda::CudaApi t{};
  t.name = "virtual-cuda";
  t.cudaGetDeviceCount = getDeviceCount;
  t.cudaSetDevice = setDevice;
  t.cudaGetDeviceProperties = getDeviceProperties;
  t.cudaGetErrorString = getErrorString;
  t.cudaGetLastError = getLastError;
  t.cudaDeviceSynchronize = deviceSynchronize;
  t.cudaDriverGetVersion = driverGetVersion;
  t.cudaRuntimeGetVersion = runtimeGetVersion;
  t.cudaMalloc = deviceMalloc;
  t.cudaFree = deviceFree;
  t.cudaMemcpy = memcpySync;
  t.cudaMemcpyAsync = memcpyAsync;
  t.cudaMemcpy2DAsync = memcpy2DAsync;
  t.cudaMemset = memsetSync;
  t.cudaMemsetAsync = memsetAsyncApi;
  t.cudaStreamCreate = streamCreate;
  t.cudaStreamCreateWithFlags = streamCreateWithFlags;
  t.cudaStreamDestroy = streamDestroy;
  t.cudaStreamSynchronize = streamSynchronize;
  t.cudaStreamQuery = streamQuery;
  t.cudaStreamWaitEvent = streamWaitEvent;
  t.cudaEventCreate = eventCreate;
  t.cudaEventCreateWithFlags = eventCreateWithFlags;
  t.cudaEventDestroy = eventDestroy;
  t.cudaEventRecord = eventRecord;
  t.cudaEventSynchronize = eventSynchronize;
  t.cudaEventQuery = eventQuery;
  t.cudaEventElapsedTime = eventElapsedTime;
  t.cudaLibraryLoadData = libraryLoadData;
  t.cudaLibraryGetKernel = libraryGetKernel;
  t.cudaLibraryUnload = libraryUnload;
  t.cudaLaunchKernel = launchKernel;
  t.cudaStreamBeginCapture = streamBeginCapture;
  t.cudaStreamEndCapture = streamEndCapture;
  t.cudaStreamIsCapturing = streamIsCapturing;
  t.cudaGraphGetNodes = graphGetNodes;
  t.cudaGraphInstantiate = graphInstantiate;
  t.cudaGraphLaunch = graphLaunch;
  t.cudaGraphExecDestroy = graphExecDestroy;
  t.cudaGraphDestroy = graphDestroy;
  t.cublasLtCreate = ltCreate;
  t.cublasLtDestroy = ltDestroy;
  t.cublasLtGetStatusString = ltStatusString;
  t.cublasLtMatmulDescCreate = descCreate;
  t.cublasLtMatmulDescDestroy = descDestroy;
  t.cublasLtMatmulDescSetAttribute = descSet;
  t.cublasLtMatrixLayoutCreate = layoutCreate;
  t.cublasLtMatrixLayoutDestroy = layoutDestroy;
  t.cublasLtMatrixLayoutSetAttribute = layoutSet;
  t.cublasLtMatmulPreferenceCreate = prefCreate;
  t.cublasLtMatmulPreferenceDestroy = prefDestroy;
  t.cublasLtMatmulPreferenceSetAttribute = prefSet;
  t.cublasLtMatmulAlgoGetHeuristic = heuristic;
  t.cublasLtMatmul = matmul;
  t.ncclGetVersion = ncclVersion;
  t.ncclGetErrorString = ncclErrorString;
  t.ncclGetLastError = ncclLast;
  t.ncclGetUniqueId = uniqueId;
  t.ncclCommInitRank = commInitRank;
  t.ncclCommDestroy = commDestroy;
  t.ncclCommAbort = commAbort;
  t.ncclCommGetAsyncError = commGetAsyncError;
  t.ncclGroupStart = groupStart;
  t.ncclGroupEnd = groupEnd;
  t.ncclAllReduce = allReduce;
  t.ncclReduceScatter = reduceScatter;
  t.ncclAllGather = allGather;
  t.kernels = &emulatedKernels;
  return t;
}

} // namespace

extern "C" __attribute__((visibility("default"))) const cuda::CudaApi *
gptcVirtualCudaApi(int version) {
  if (version != cuda::kCudaApiVersion)
    return nullptr;
  static const cuda::CudaApi table = makeTable();
  return &table;
}
