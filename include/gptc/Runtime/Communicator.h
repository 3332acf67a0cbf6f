//===- Communicator.h - Collectives of gptc's runtime ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's view of the processes a program runs on: one per point of
// the device grid, rank = row-major index of the point. CPU collectives go
// through MPI; the NCCL communicator of the CUDA target will implement the
// same interface.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COMMUNICATOR_H
#define GPTC_RUNTIME_COMMUNICATOR_H

#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Ends every process of the job (after an error on one rank, so that
  /// the others do not wait in a collective forever).
  [[noreturn]] virtual void abort(int code) = 0;

  /// Sums `count` elements of `dtype` at `data`, in place, over the ranks
  /// that share this rank's coordinates on every axis of `grid` except
  /// `axes`. Fails (with `error`) when the grid does not match the number
  /// of processes.
  virtual bool allReduceSum(void *data, int64_t count, program::DType dtype,
                            const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &axes,
                            std::string &error) = 0;
  /// The same with the maximum instead of the sum.
  virtual bool allReduceMax(void *data, int64_t count, program::DType dtype,
                            const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &axes,
                            std::string &error) = 0;

  /// Concatenates the `count` elements at `in` of every rank of the group
  /// over `axes` (in group order, see groupIndex) into `out`.
  virtual bool allGather(const void *in, void *out, int64_t count,
                         program::DType dtype, const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes,
                         std::string &error) = 0;

  /// Copies `bytes` bytes at `data` from the group's first rank (group
  /// index 0) to every rank of its group over `axes` (the NCCL
  /// communicator bootstraps its groups with it).
  virtual bool broadcast(void *data, int64_t bytes,
                         const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes,
                         std::string &error) = 0;

  /// Sums `in` (group size x `count` elements) over the group over `axes`
  /// and writes this rank's block of `count` elements to `out`.
  virtual bool reduceScatterSum(const void *in, void *out, int64_t count,
                                program::DType dtype,
                                const std::vector<int64_t> &grid,
                                const std::vector<int64_t> &axes,
                                std::string &error) = 0;

  /// Non-blocking collectives, which the CPU executor overlaps with its
  /// later kernels where the compiler's collective schedule lets it
  /// (CollectiveSchedule.h): each start returns at once with `request` set;
  /// the buffers must stay untouched until `wait(request)`. Every rank
  /// starts them in the same order (with the blocking ones), as MPI
  /// requires per group. `progress` lets started ones advance without
  /// waiting (MPI moves data only inside its calls). The defaults run
  /// the blocking collective and return a request that is already done
  /// (-1): a communicator without non-blocking calls stays correct.
  virtual bool startAllReduce(void *data, int64_t count, program::DType dtype,
                              const std::vector<int64_t> &grid,
                              const std::vector<int64_t> &axes, bool max,
                              int64_t &request, std::string &error);
  virtual bool startAllGather(const void *in, void *out, int64_t count,
                              program::DType dtype,
                              const std::vector<int64_t> &grid,
                              const std::vector<int64_t> &axes,
                              int64_t &request, std::string &error);
  virtual bool startReduceScatterSum(const void *in, void *out, int64_t count,
                                     program::DType dtype,
                                     const std::vector<int64_t> &grid,
                                     const std::vector<int64_t> &axes,
                                     int64_t &request, std::string &error);
  /// Ring attention's shift: starts sending `bytes` at `send` to rank
  /// `dest` and receiving as many into `recv` from rank `source`, both
  /// with `tag`, and returns at once; `wait` on each request completes
  /// them (the executor overlaps them like the collectives above). The
  /// default sends, receives and waits for the send before it returns
  /// (requests of -1).
  virtual bool startExchange(const void *send, int dest, void *recv, int source,
                             int64_t bytes, int64_t tag, int64_t &sendRequest,
                             int64_t &recvRequest, std::string &error);
  /// Completes a started collective (a request of -1 is done already).
  virtual bool wait(int64_t request, std::string &error);
  /// Whether starts are non-blocking (the executor then keeps them in
  /// flight); false for the defaults above, and after
  /// setOverlapCollectives(false).
  virtual bool overlapsCollectives() const { return false; }
  virtual void setOverlapCollectives(bool on) { (void)on; }
  /// Advances the started collectives; does not wait.
  virtual void progress() {}

  /// Point to point (pipeline stages). `send` starts sending `bytes` at
  /// `data` to rank `dest` with `tag` and returns at once: the data must
  /// stay unchanged until `waitSends`, which completes every send started.
  /// `recv` waits for the message of `tag` from `source`. The default
  /// implementations fail: only MPI has them.
  virtual bool send(const void *data, int64_t bytes, int dest, int64_t tag,
                    std::string &error);
  virtual bool recv(void *data, int64_t bytes, int source, int64_t tag,
                    std::string &error);
  virtual bool waitSends(std::string &error);
  /// The sends started since the last `waitSends` that have completed
  /// since the last call, by their index in that order (their data may be
  /// released); does not wait.
  virtual bool testSends(std::vector<size_t> &done, std::string &error);

  /// The watchdog (docs/Checkpoints.md, faults): a collective or message
  /// that waits longer than `seconds` ends every process with a message
  /// naming the operation and the ranks that did not reach it (dead or
  /// hung); 0 turns it off (the default). The trainer sets it per phase.
  virtual void setWatchdog(double seconds);
  virtual double getWatchdog() const { return 0; }
  /// This rank waits, until endExternalWait, for work outside this
  /// communicator that other ranks take part in (a GPU's NCCL
  /// collectives): the watchdog watches that wait as it watches its own
  /// operations, described as `what`, over every rank.
  virtual void beginExternalWait(const char *what) { (void)what; }
  virtual void endExternalWait() {}
  /// Runs before the watchdog ends the job (the GPU backend aborts its
  /// NCCL communicators there). Called from the watchdog's thread.
  virtual void setBeforeAbort(std::function<void()> hook) { (void)hook; }
};

/// Marks an external wait for its lifetime (Communicator::beginExternalWait).
class ExternalWait {
public:
  ExternalWait(Communicator *comm, const char *what) : comm(comm) {
    if (comm)
      comm->beginExternalWait(what);
  }
  ~ExternalWait() {
    if (comm)
      comm->endExternalWait();
  }
  ExternalWait(const ExternalWait &) = delete;
  ExternalWait &operator=(const ExternalWait &) = delete;

private:
  Communicator *comm;
};

/// Raises the watchdog's limit to at least `seconds` (checkpoints,
/// evaluations: phases whose waits are long but legitimate) for its
/// lifetime, if the watchdog is on.
class LongPhase {
public:
  LongPhase(Communicator *comm, double seconds = 600)
      : comm(comm), before(comm ? comm->getWatchdog() : 0) {
    if (before > 0 && before < seconds)
      comm->setWatchdog(seconds);
  }
  ~LongPhase() {
    if (before > 0)
      comm->setWatchdog(before);
  }

private:
  Communicator *comm;
  double before;
};

/// "rank 0 PID 123 on host (cuda:0, 1 thread), rank 1 ...": which process
/// each rank is, on which host and device (`device`, this rank's: "cuda:0";
/// "" says nothing), so that a launcher's report of a dead PID names the
/// rank (collective).
bool describeProcesses(Communicator &comm, const std::string &device,
                       std::string &text, std::string &error);

/// Starts MPI (MPI_Init) and returns a communicator over MPI_COMM_WORLD;
/// MPI is finalized when it is destroyed. Works under mpirun and as a
/// single process.
std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv);
/// Whether this process was started by an MPI launcher (mpirun/mpiexec).
bool launchedByMpi();

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_COMMUNICATOR_H
