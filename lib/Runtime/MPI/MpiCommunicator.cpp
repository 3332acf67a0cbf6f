//===- MpiCommunicator.cpp - CPU collectives through MPI -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One MPI sub-communicator per set of reduced grid axes, made with
// MPI_Comm_split (color: the coordinates on the other axes) the first time
// it is needed and kept. MPI_Allreduce does the work; which algorithm it
// uses (ring, recursive doubling) is MPICH's choice.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/Tensor.h"

// The C API only (MPICH's C++ bindings warn under -Wcast-qual).
#define MPICH_SKIP_MPICXX 1
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gptc;
using namespace gptc::runtime;

Communicator::~Communicator() = default;

bool Communicator::send(const void *, int64_t, int, int64_t,
                        std::string &error) {
  error = "this communicator has no point-to-point messages";
  return false;
}

bool Communicator::recv(void *, int64_t, int, int64_t, std::string &error) {
  error = "this communicator has no point-to-point messages";
  return false;
}

bool Communicator::waitSends(std::string &error) {
  error = "this communicator has no point-to-point messages";
  return false;
}

bool Communicator::testSends(std::vector<size_t> &, std::string &error) {
  error = "this communicator has no point-to-point messages";
  return false;
}

void Communicator::setWatchdog(double) {}

bool Communicator::startAllReduce(void *data, int64_t count,
                                  program::DType dtype,
                                  const std::vector<int64_t> &grid,
                                  const std::vector<int64_t> &axes, bool max,
                                  int64_t &request, std::string &error) {
  request = -1;
  return max ? allReduceMax(data, count, dtype, grid, axes, error)
             : allReduceSum(data, count, dtype, grid, axes, error);
}

bool Communicator::startAllGather(const void *in, void *out, int64_t count,
                                  program::DType dtype,
                                  const std::vector<int64_t> &grid,
                                  const std::vector<int64_t> &axes,
                                  int64_t &request, std::string &error) {
  request = -1;
  return allGather(in, out, count, dtype, grid, axes, error);
}

bool Communicator::startReduceScatterSum(const void *in, void *out,
                                         int64_t count, program::DType dtype,
                                         const std::vector<int64_t> &grid,
                                         const std::vector<int64_t> &axes,
                                         int64_t &request, std::string &error) {
  request = -1;
  return reduceScatterSum(in, out, count, dtype, grid, axes, error);
}

bool Communicator::startExchange(const void *send, int dest, void *recv,
                                 int source, int64_t bytes, int64_t tag,
                                 int64_t &sendRequest, int64_t &recvRequest,
                                 std::string &error) {
  sendRequest = recvRequest = -1;
  return this->send(send, bytes, dest, tag, error) &&
         this->recv(recv, bytes, source, tag, error) && waitSends(error);
}

bool Communicator::wait(int64_t request, std::string &error) {
  if (request == -1)
    return true;
  error = "no collective was started with request " + std::to_string(request);
  return false;
}

namespace {
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int *argc, char ***argv) {
    int initialized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // The watchdog's thread talks to the other ranks while this one
      // waits in a collective.
      MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
      // MPI is finalized when the process exits, not with this
      // communicator: MPI cannot be initialized twice, and a process may
      // make another trainer after this one (the C API, gptc.torch).
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized)
          MPI_Finalize();
      });
    } else {
      MPI_Query_thread(&provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &mySize);
    // A peer that died closes its sockets: writing to them must be an
    // error MPI reports (naming the operation), not a silent SIGPIPE.
    if (mySize > 1)
      std::signal(SIGPIPE, SIG_IGN);
    // A failed operation is an error message naming it, not an abort
    // inside MPI (sub-communicators inherit the handler).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    canDiagnose = provided == MPI_THREAD_MULTIPLE;
    if (canDiagnose && mySize > 1)
      MPI_Comm_dup(MPI_COMM_WORLD, &watchComm);
  }
  ~MpiCommunicator() override {
    if (watcher.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      wake.notify_all();
      watcher.join();
    }
    if (watchComm != MPI_COMM_NULL)
      MPI_Comm_free(&watchComm);
    for (auto &entry : groups)
      MPI_Comm_free(&entry.second);
  }

  double getWatchdog() const override { return limit; }

  void setWatchdog(double seconds) override {
    if (mySize < 2)
      return;
    limit = seconds;
    if (seconds > 0 && !watcher.joinable())
      watcher = std::thread([this] { watch(); });
  }

  void beginExternalWait(const char *what) override {
    if (mySize < 2 || limit <= 0)
      return;
    std::lock_guard<std::mutex> lock(mutex);
    current = Operation{};
    current.external = what;
    since = std::chrono::steady_clock::now();
    active = true;
    ++sequence;
  }
  void endExternalWait() override {
    if (mySize < 2)
      return;
    std::lock_guard<std::mutex> lock(mutex);
    active = false;
  }
  void setBeforeAbort(std::function<void()> hook) override {
    std::lock_guard<std::mutex> lock(mutex);
    beforeAbort = std::move(hook);
  }

  [[noreturn]] void abort(int code) override {
    // The launcher forwards what the ranks wrote to their standard error
    // through its proxies, and an abort can end it before they have: the
    // message that says why would be lost. Give it a moment.
    if (mySize > 1) {
      std::fflush(nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  bool send(const void *data, int64_t bytes, int dest, int64_t tag,
            std::string &error) override {
    if (!checkMessage(bytes, dest, tag, error))
      return false;
    MPI_Request request;
    if (MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dest,
                  static_cast<int>(tag), MPI_COMM_WORLD,
                  &request) != MPI_SUCCESS) {
      error = "MPI_Isend to rank " + std::to_string(dest) + " failed";
      return false;
    }
    pending.push_back(request);
    return true;
  }

  bool recv(void *data, int64_t bytes, int source, int64_t tag,
            std::string &error) override {
    if (!checkMessage(bytes, source, tag, error))
      return false;
    MPI_Status status;
    Waiting waiting(*this, "receive", bytes, "bytes", {}, {}, source, tag);
    if (MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, source,
                 static_cast<int>(tag), MPI_COMM_WORLD,
                 &status) != MPI_SUCCESS) {
      error = "MPI_Recv from rank " + std::to_string(source) + " failed";
      return false;
    }
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != bytes) {
      error = "rank " + std::to_string(source) + " sent " +
              std::to_string(got) + " bytes where " + std::to_string(bytes) +
              " were expected";
      return false;
    }
    return true;
  }

  bool waitSends(std::string &error) override {
    if (pending.empty())
      return true;
    Waiting waiting(*this, "sends", static_cast<int64_t>(pending.size()),
                    "messages", {}, {}, -1, 0);
    int rc = MPI_Waitall(static_cast<int>(pending.size()), pending.data(),
                         MPI_STATUSES_IGNORE);
    pending.clear();
    if (rc != MPI_SUCCESS) {
      error = "MPI_Waitall of the pipeline's sends failed";
      return false;
    }
    return true;
  }

  bool testSends(std::vector<size_t> &done, std::string &error) override {
    done.clear();
    if (pending.empty())
      return true;
    std::vector<int> indices(pending.size());
    int count = 0;
    // Completed requests become MPI_REQUEST_NULL, which later calls skip.
    if (MPI_Testsome(static_cast<int>(pending.size()), pending.data(), &count,
                     indices.data(), MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      error = "MPI_Testsome of the pipeline's sends failed";
      return false;
    }
    if (count == MPI_UNDEFINED)
      return true;
    for (int i = 0; i < count; ++i)
      done.push_back(static_cast<size_t>(indices[i]));
    return true;
  }

  bool allReduceSum(void *data, int64_t count, program::DType dtype,
                    const std::vector<int64_t> &grid,
                    const std::vector<int64_t> &axes,
                    std::string &error) override {
    return allReduce(data, count, dtype, grid, axes, MPI_SUM, error);
  }

  bool allReduceMax(void *data, int64_t count, program::DType dtype,
                    const std::vector<int64_t> &grid,
                    const std::vector<int64_t> &axes,
                    std::string &error) override {
    return allReduce(data, count, dtype, grid, axes, MPI_MAX, error);
  }

  bool broadcast(void *data, int64_t bytes, const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(bytes, program::I32, grid, axes, comm, type, error))
      return false;
    Waiting waiting(*this, "broadcast", bytes, "bytes", grid, axes);
    return check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm),
                 "MPI_Bcast", error);
  }

  bool allGather(const void *in, void *out, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count * groupSize(grid, axes), dtype, grid, axes, comm, type,
                 error, /*movesOnly=*/true))
      return false;
    Waiting waiting(*this, "all-gather", count, dtypeName(dtype), grid, axes);
    return check(MPI_Allgather(in, static_cast<int>(count), type, out,
                               static_cast<int>(count), type, comm),
                 "MPI_Allgather", error);
  }

  bool reduceScatterSum(const void *in, void *out, int64_t count,
                        program::DType dtype, const std::vector<int64_t> &grid,
                        const std::vector<int64_t> &axes,
                        std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count * groupSize(grid, axes), dtype, grid, axes, comm, type,
                 error))
      return false;
    Waiting waiting(*this, "reduce-scatter", count, dtypeName(dtype), grid,
                    axes);
    return check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count),
                                          type, MPI_SUM, comm),
                 "MPI_Reduce_scatter_block", error);
  }

  bool overlapsCollectives() const override { return mySize > 1 && overlap; }
  void setOverlapCollectives(bool on) override { overlap = on; }

  bool startAllReduce(void *data, int64_t count, program::DType dtype,
                      const std::vector<int64_t> &grid,
                      const std::vector<int64_t> &axes, bool max,
                      int64_t &request, std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count, dtype, grid, axes, comm, type, error))
      return false;
    MPI_Request r;
    if (!check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type,
                              max ? MPI_MAX : MPI_SUM, comm, &r),
               "MPI_Iallreduce", error))
      return false;
    request = started(r, {max ? "all-reduce (max)" : "all-reduce (sum)", count,
                          dtypeName(dtype), grid, axes});
    return true;
  }

  bool startAllGather(const void *in, void *out, int64_t count,
                      program::DType dtype, const std::vector<int64_t> &grid,
                      const std::vector<int64_t> &axes, int64_t &request,
                      std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count * groupSize(grid, axes), dtype, grid, axes, comm, type,
                 error, /*movesOnly=*/true))
      return false;
    MPI_Request r;
    if (!check(MPI_Iallgather(in, static_cast<int>(count), type, out,
                              static_cast<int>(count), type, comm, &r),
               "MPI_Iallgather", error))
      return false;
    request = started(r, {"all-gather", count, dtypeName(dtype), grid, axes});
    return true;
  }

  bool startReduceScatterSum(const void *in, void *out, int64_t count,
                             program::DType dtype,
                             const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes, int64_t &request,
                             std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count * groupSize(grid, axes), dtype, grid, axes, comm, type,
                 error))
      return false;
    MPI_Request r;
    if (!check(MPI_Ireduce_scatter_block(in, out, static_cast<int>(count), type,
                                         MPI_SUM, comm, &r),
               "MPI_Ireduce_scatter_block", error))
      return false;
    request =
        started(r, {"reduce-scatter", count, dtypeName(dtype), grid, axes});
    return true;
  }

  bool startExchange(const void *send, int dest, void *recv, int source,
                     int64_t bytes, int64_t tag, int64_t &sendRequest,
                     int64_t &recvRequest, std::string &error) override {
    if (!checkMessage(bytes, dest, tag, error) ||
        !checkMessage(bytes, source, tag, error))
      return false;
    MPI_Request r;
    if (!check(MPI_Irecv(recv, static_cast<int>(bytes), MPI_BYTE, source,
                         static_cast<int>(tag), MPI_COMM_WORLD, &r),
               "MPI_Irecv", error))
      return false;
    recvRequest = started(r, {"receive", bytes, "bytes", {}, {}, source, tag});
    if (!check(MPI_Isend(send, static_cast<int>(bytes), MPI_BYTE, dest,
                         static_cast<int>(tag), MPI_COMM_WORLD, &r),
               "MPI_Isend", error))
      return false;
    sendRequest = started(r, {"send", bytes, "bytes", {}, {}, dest, tag});
    return true;
  }

  bool wait(int64_t request, std::string &error) override {
    if (request == -1)
      return true;
    auto it = std::find(inFlightIds.begin(), inFlightIds.end(), request);
    if (it == inFlightIds.end())
      return Communicator::wait(request, error);
    size_t i = static_cast<size_t>(it - inFlightIds.begin());
    int rc = MPI_SUCCESS;
    if (inFlight[i] != MPI_REQUEST_NULL) {
      const Operation &op = inFlightOps[i];
      Waiting waiting(*this, op.kind, op.count, op.unit, op.grid, op.axes,
                      op.peer, op.tag);
      rc = MPI_Wait(&inFlight[i], MPI_STATUS_IGNORE);
    }
    const char *kind = inFlightOps[i].kind;
    inFlight.erase(inFlight.begin() + static_cast<std::ptrdiff_t>(i));
    inFlightIds.erase(it);
    inFlightOps.erase(inFlightOps.begin() + static_cast<std::ptrdiff_t>(i));
    std::string failed;
    failed.swap(progressError);
    if (rc != MPI_SUCCESS)
      return check(rc, (std::string("waiting for the ") + kind).c_str(), error);
    if (!failed.empty()) {
      error = failed;
      return false;
    }
    return true;
  }

  void progress() override {
    if (inFlight.empty())
      return;
    // Completed requests become MPI_REQUEST_NULL; `wait` then only
    // forgets them.
    int count = 0;
    std::vector<int> indices(inFlight.size());
    int rc = MPI_Testsome(static_cast<int>(inFlight.size()), inFlight.data(),
                          &count, indices.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS && progressError.empty())
      check(rc, "MPI_Testsome of the collectives in flight", progressError);
  }

private:
  bool allReduce(void *data, int64_t count, program::DType dtype,
                 const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes, MPI_Op op,
                 std::string &error) {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count, dtype, grid, axes, comm, type, error))
      return false;
    Waiting waiting(*this,
                    op == MPI_SUM ? "all-reduce (sum)" : "all-reduce (max)",
                    count, dtypeName(dtype), grid, axes);
    return check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                               type, op, comm),
                 "MPI_Allreduce", error);
  }

  /// Checks the grid against the processes and finds (or makes) the
  /// sub-communicator over `axes`, whose ranks are in groupIndex order.
  /// A collective that only moves elements (`movesOnly`: a gather) also
  /// takes the 16-bit floats, as 16-bit words; MPI cannot add them.
  bool prepare(int64_t count, program::DType dtype,
               const std::vector<int64_t> &grid,
               const std::vector<int64_t> &axes, MPI_Comm &comm,
               MPI_Datatype &type, std::string &error, bool movesOnly = false) {
    int64_t total = 1;
    for (int64_t d : grid)
      total *= d;
    if (total != mySize) {
      error = "the program's grid has " + std::to_string(total) +
              " devices but " + std::to_string(mySize) +
              " processes run it (mpirun -np " + std::to_string(total) + ")";
      return false;
    }
    type = dtype == program::F32   ? MPI_FLOAT
           : dtype == program::F64 ? MPI_DOUBLE
           : dtype == program::I32 ? MPI_INT32_T
           : dtype == program::I64 ? MPI_INT64_T
           : movesOnly && (dtype == program::BF16 || dtype == program::F16)
               ? MPI_UINT16_T
               : MPI_DATATYPE_NULL;
    if (type == MPI_DATATYPE_NULL || count > INT32_MAX) {
      error = "collectives of this element type or size are not supported";
      return false;
    }
    std::vector<int64_t> key = groupKey(grid, axes);
    auto it = groups.find(key);
    if (it == groups.end()) {
      std::vector<int64_t> c = gridCoordinates(grid, myRank);
      MPI_Comm sub;
      MPI_Comm_split(MPI_COMM_WORLD,
                     static_cast<int>(groupColor(grid, c, axes)),
                     static_cast<int>(groupIndex(grid, axes, myRank)), &sub);
      it = groups.emplace(key, sub).first;
    }
    comm = it->second;
    return true;
  }

  static bool check(int rc, const char *what, std::string &error) {
    if (rc == MPI_SUCCESS)
      return true;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    error = std::string(what) + " failed: " + std::string(text, len);
    return false;
  }

  //===--------------------------------------------------------------------===//
  // The watchdog
  //===--------------------------------------------------------------------===//

  /// The operation this rank waits in, described when the watchdog needs
  /// it (nothing is formatted on the fast path).
  struct Operation {
    const char *kind = "";
    int64_t count = 0;
    const char *unit = "";
    std::vector<int64_t> grid, axes;
    int peer = -1;
    int64_t tag = 0;
    /// A wait outside this communicator (beginExternalWait), over every
    /// rank.
    const char *external = nullptr;

    std::string text() const {
      std::ostringstream os;
      if (external)
        return std::string("waiting for ") + external;
      if (std::string(kind) == "receive") {
        os << "receiving a message (tag " << tag << ", " << count
           << " bytes) from rank " << peer;
        return os.str();
      }
      if (std::string(kind) == "sends") {
        os << "waiting for " << count << " sent messages to be received";
        return os.str();
      }
      os << "the " << kind << " of " << count << " " << unit
         << " over grid axes [";
      for (size_t i = 0; i < axes.size(); ++i)
        os << (i ? "," : "") << axes[i];
      os << "] of the grid [";
      for (size_t i = 0; i < grid.size(); ++i)
        os << (i ? "x" : "") << grid[i];
      os << "]";
      return os.str();
    }
    /// The ranks it waits for (empty: unknown, any).
    std::vector<int> ranks(int self) const {
      if (peer >= 0)
        return {peer};
      if (grid.empty())
        return {};
      return reductionGroup(grid, axes, self);
    }
  };

  /// Marks this rank as waiting in an operation for its lifetime.
  struct Waiting {
    MpiCommunicator &c;
    Waiting(MpiCommunicator &c, const char *kind, int64_t count,
            const char *unit, const std::vector<int64_t> &grid,
            const std::vector<int64_t> &axes, int peer = -1, int64_t tag = 0)
        : c(c) {
      if (c.mySize < 2 || c.limit <= 0)
        return;
      std::lock_guard<std::mutex> lock(c.mutex);
      c.current = Operation{kind, count, unit, grid, axes, peer, tag};
      c.since = std::chrono::steady_clock::now();
      c.active = true;
      ++c.sequence;
    }
    ~Waiting() {
      if (c.mySize < 2)
        return;
      std::lock_guard<std::mutex> lock(c.mutex);
      c.active = false;
    }
  };

  /// The watchdog's thread: wakes four times a second; when the operation
  /// in flight has waited past the limit, finds out which ranks of its
  /// group are waiting too and ends the job naming the others.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(250));
      if (stopping || !active || limit <= 0)
        continue;
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - since)
                          .count();
      if (waited < limit)
        continue;
      Operation op = current;
      uint64_t seq = sequence;
      lock.unlock();
      diagnoseAndAbort(op.text(), op.ranks(myRank), seq, waited);
    }
  }

  [[noreturn]] void diagnoseAndAbort(const std::string &what,
                                     std::vector<int> group, uint64_t seq,
                                     double waited) {
    std::ostringstream os;
    os << "gptc: error: rank " << myRank << ": " << what << " (operation #"
       << seq << " watched on this rank) has waited "
       << static_cast<int>(waited) << " s";
    std::map<int, int64_t> heard;
    if (canDiagnose) {
      // Tell every rank this one is stuck; for three seconds, listen for
      // the ranks that are stuck too. The ones not heard from are not
      // waiting in any operation: dead, hung, or computing far longer
      // than the limit.
      constexpr int kTag = 7;
      static int64_t mine[2];
      mine[0] = myRank;
      mine[1] = static_cast<int64_t>(seq);
      std::vector<MPI_Request> requests(mySize, MPI_REQUEST_NULL);
      for (int r = 0; r < mySize; ++r)
        if (r != myRank)
          MPI_Isend(mine, 2, MPI_INT64_T, r, kTag, watchComm, &requests[r]);
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (std::chrono::steady_clock::now() < until &&
             static_cast<int>(heard.size()) < mySize - 1) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, kTag, watchComm, &flag, &status);
        if (!flag) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        int64_t theirs[2];
        MPI_Recv(theirs, 2, MPI_INT64_T, status.MPI_SOURCE, kTag, watchComm,
                 MPI_STATUS_IGNORE);
        heard[status.MPI_SOURCE] = theirs[1];
      }
      if (group.empty())
        for (int r = 0; r < mySize; ++r)
          group.push_back(r);
      std::vector<int> missing, waiting;
      for (int r : group)
        if (r != myRank)
          (heard.count(r) ? waiting : missing).push_back(r);
      auto list = [](const std::vector<int> &ranks) {
        std::string s;
        for (size_t i = 0; i < ranks.size(); ++i)
          s += (i ? ", " : "") + std::to_string(ranks[i]);
        return s;
      };
      if (!missing.empty())
        os << " for rank" << (missing.size() > 1 ? "s " : " ") << list(missing)
           << ", which " << (missing.size() > 1 ? "are" : "is")
           << " not waiting in any operation: dead or hung";
      else
        os << "; every rank it waits for is waiting too (ranks "
           << list(waiting) << "): the ranks are in different operations";
      if (!missing.empty() && !waiting.empty())
        os << " (rank" << (waiting.size() > 1 ? "s " : " ") << list(waiting)
           << " of its group " << (waiting.size() > 1 ? "are" : "is")
           << " waiting too)";
    }
    os << ". Ending every rank (--collective-timeout).\n";
    std::fputs(os.str().c_str(), stderr);
    std::fflush(stderr);
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(mutex);
      hook = beforeAbort;
    }
    if (hook)
      hook();
    // The launcher forwards this rank's output through a pipe: give it a
    // moment to pass the message on before the abort tears the job down.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  std::mutex mutex;
  /// setBeforeAbort's hook.
  std::function<void()> beforeAbort;
  std::condition_variable wake;
  std::thread watcher;
  bool stopping = false, active = false, canDiagnose = false;
  std::atomic<double> limit{0};
  Operation current;
  std::chrono::steady_clock::time_point since;
  uint64_t sequence = 0;
  MPI_Comm watchComm = MPI_COMM_NULL;

  int myRank = 0, mySize = 1;
  /// Sends started and not yet completed.
  std::vector<MPI_Request> pending;
  /// Collectives started and not yet waited for (MPI_REQUEST_NULL once
  /// `progress` saw them complete), their ids and what they are.
  std::vector<MPI_Request> inFlight;
  std::vector<int64_t> inFlightIds;
  std::vector<Operation> inFlightOps;
  int64_t nextRequest = 0;
  bool overlap = true;
  /// An error `progress` met, which the next `wait` reports.
  std::string progressError;

  /// Keeps a started collective's request; returns its id.
  int64_t started(MPI_Request r, Operation op) {
    inFlight.push_back(r);
    inFlightIds.push_back(nextRequest);
    inFlightOps.push_back(std::move(op));
    return nextRequest++;
  }

  bool checkMessage(int64_t bytes, int peer, int64_t tag,
                    std::string &error) const {
    int *ub = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    if (bytes < 0 || bytes > INT_MAX || peer < 0 || peer >= mySize || tag < 0 ||
        (found && ub && tag > *ub)) {
      error = "a point-to-point message of " + std::to_string(bytes) +
              " bytes with rank " + std::to_string(peer) + " and tag " +
              std::to_string(tag) + " is beyond MPI's limits";
      return false;
    }
    return true;
  }
  std::map<std::vector<int64_t>, MPI_Comm> groups;
};
} // namespace

std::unique_ptr<Communicator> runtime::createMpiCommunicator(int *argc,
                                                             char ***argv) {
  return std::make_unique<MpiCommunicator>(argc, argv);
}

bool runtime::describeProcesses(Communicator &comm, const std::string &device,
                                std::string &text, std::string &error) {
  // PID, threads, host name and device per rank, as 22 int64 words (PID,
  // threads, 128 bytes of host, 32 of device).
  constexpr int kWords = 22;
  int64_t mine[kWords] = {static_cast<int64_t>(::getpid()),
                          static_cast<int64_t>(cpu::numThreads())};
  char *host = reinterpret_cast<char *>(mine + 2);
  if (::gethostname(host, 127) != 0)
    std::strcpy(host, "?");
  host[127] = 0;
  char *where = reinterpret_cast<char *>(mine + 18);
  std::strncpy(where, device.c_str(), 31);
  where[31] = 0;
  int n = comm.size();
  std::vector<int64_t> all(static_cast<size_t>(n) * kWords);
  if (!comm.allGather(mine, all.data(), kWords, program::I64, {n}, {0}, error))
    return false;
  std::ostringstream os;
  for (int r = 0; r < n; ++r) {
    const int64_t *w = all.data() + static_cast<size_t>(r) * kWords;
    std::string name(reinterpret_cast<const char *>(w + 2));
    std::string on(reinterpret_cast<const char *>(w + 18));
    os << (r ? ", " : "") << "rank " << r << " PID " << w[0] << " on " << name
       << " (" << (on.empty() ? "" : on + ", ") << w[1]
       << (w[1] == 1 ? " thread)" : " threads)");
  }
  text = os.str();
  return true;
}

bool runtime::launchedByMpi() {
  // Hydra (MPICH) and the PMI launchers set these; OpenMPI sets its own.
  for (const char *name :
       {"PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}
