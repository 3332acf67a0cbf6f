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

#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Grid.h"

// The C API only (MPICH's C++ bindings warn under -Wcast-qual).
#define MPICH_SKIP_MPICXX 1
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
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

namespace {
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int *argc, char ***argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      MPI_Init(argc, argv);
      owns = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &mySize);
  }
  ~MpiCommunicator() override {
    for (auto &entry : groups)
      MPI_Comm_free(&entry.second);
    if (owns)
      MPI_Finalize();
  }

  [[noreturn]] void abort(int code) override {
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
    return check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm),
                 "MPI_Bcast", error);
  }

  bool allGather(const void *in, void *out, int64_t count,
                 program::DType dtype, const std::vector<int64_t> &grid,
                 const std::vector<int64_t> &axes,
                 std::string &error) override {
    MPI_Comm comm;
    MPI_Datatype type;
    if (!prepare(count * groupSize(grid, axes), dtype, grid, axes, comm, type,
                 error))
      return false;
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
    return check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count),
                                          type, MPI_SUM, comm),
                 "MPI_Reduce_scatter_block", error);
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
    return check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                               type, op, comm),
                 "MPI_Allreduce", error);
  }

  /// Checks the grid against the processes and finds (or makes) the
  /// sub-communicator over `axes`, whose ranks are in groupIndex order.
  bool prepare(int64_t count, program::DType dtype,
               const std::vector<int64_t> &grid,
               const std::vector<int64_t> &axes, MPI_Comm &comm,
               MPI_Datatype &type, std::string &error) {
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

  int myRank = 0, mySize = 1;
  bool owns = false;
  /// Sends started and not yet completed.
  std::vector<MPI_Request> pending;

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

bool runtime::launchedByMpi() {
  // Hydra (MPICH) and the PMI launchers set these; OpenMPI sets its own.
  for (const char *name : {"PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
                           "OMPI_COMM_WORLD_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}
