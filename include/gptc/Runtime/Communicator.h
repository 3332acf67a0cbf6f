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

#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Sums `count` elements of `dtype` at `data`, in place, over the ranks
  /// that share this rank's coordinates on every axis of `grid` except
  /// `axes`. Fails (with `error`) when the grid does not match the number
  /// of processes.
  virtual bool allReduceSum(void *data, int64_t count, program::DType dtype,
                            const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &axes,
                            std::string &error) = 0;
};

/// Starts MPI (MPI_Init) and returns a communicator over MPI_COMM_WORLD;
/// MPI is finalized when it is destroyed. Works under mpirun and as a
/// single process.
std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv);

/// The ranks of the group `rank` belongs to when reducing over `axes` of
/// `grid` (row-major ranks), in increasing order.
std::vector<int> reductionGroup(const std::vector<int64_t> &grid,
                                const std::vector<int64_t> &axes, int rank);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_COMMUNICATOR_H
