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
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <map>

using namespace gptc;
using namespace gptc::runtime;

Communicator::~Communicator() = default;

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
