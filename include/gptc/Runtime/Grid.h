//===- Grid.h - The device grid's block arithmetic --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Ranks, groups and blocks on the device grid (one process per grid point,
// rank = row-major index of the point). Every backend and the trainer use
// these, so that they agree on which rank holds which block of a tensor.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_GRID_H
#define GPTC_RUNTIME_GRID_H

#include "gptc/Runtime/program.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::runtime {

class Communicator;
class Tensor;

/// Coordinates of row-major `rank` in `grid`.
std::vector<int64_t> gridCoordinates(const std::vector<int64_t> &grid,
                                     int64_t rank);
/// The row-major index of the coordinates `c` restricted to the axes not
/// in `axes`: which group over `axes` they belong to (the rank within the
/// group is groupIndex).
int64_t groupColor(const std::vector<int64_t> &grid,
                   const std::vector<int64_t> &c,
                   const std::vector<int64_t> &axes);
/// The index of `rank` in its group over `axes` of `grid`: its coordinates
/// on `axes`, row-major in the order `axes` lists them (the first is the
/// major one). Blocks of a tensor split over `axes` are in this order.
int64_t groupIndex(const std::vector<int64_t> &grid,
                   const std::vector<int64_t> &axes, int64_t rank);
/// A key naming the groups over `axes` of `grid` (communicators cache one
/// sub-communicator per key).
std::vector<int64_t> groupKey(const std::vector<int64_t> &grid,
                              const std::vector<int64_t> &axes);
/// The number of ranks in a group over `axes` of `grid`.
int64_t groupSize(const std::vector<int64_t> &grid,
                  const std::vector<int64_t> &axes);

/// The GPU a process of `rank` uses among `devices` visible ones: its rank
/// on its node (launcherLocalRank, else `rank`) modulo `devices`.
int localDeviceIndex(int rank, int devices);

/// This process's rank on its node as its launcher says, before MPI
/// starts: MPICH's MPI_LOCALRANKID, Open MPI's OMPI_COMM_WORLD_LOCAL_RANK,
/// PMIx's PMIX_LOCAL_RANK, srun's SLURM_LOCALID (the first set, digits
/// only); -1 where none is.
int launcherLocalRank();

/// This process's rank in the job as its launcher says, before MPI starts:
/// PMI_RANK (MPICH's Hydra), OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID
/// (srun); -1 where none is.
int launcherRank();

/// The processes in the job as its launcher says, before MPI starts:
/// PMI_SIZE (MPICH's Hydra), OMPI_COMM_WORLD_SIZE, SLURM_NTASKS (srun);
/// -1 where none is.
int launcherSize();

/// A tensor split into blocks over grid axes (program::Sharding): `axes[d]`
/// split dimension d of `shape`, the whole tensor.
struct BlockLayout {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> axes;
  bool isSplit() const;
  /// The shape of one block on `grid`.
  std::vector<int64_t> blockShape(const std::vector<int64_t> &grid) const;
};

/// How a function's value is split (its `sharding`), or whole.
BlockLayout layoutOf(const program::Value &value);

/// This rank's block of `whole`.
Tensor sliceBlock(const Tensor &whole, const BlockLayout &layout,
                  const std::vector<int64_t> &grid, int64_t rank);
/// The whole tensor from every rank's `block` (all-gather along each split
/// dimension); every rank gets it. Needs `comm` when a split axis holds
/// more than one rank.
bool gatherBlocks(const Tensor &block, const BlockLayout &layout,
                  const std::vector<int64_t> &grid, Communicator *comm,
                  Tensor &whole, std::string &error);

/// The ranks of the group `rank` belongs to when reducing over `axes` of
/// `grid` (row-major ranks), in increasing order.
std::vector<int> reductionGroup(const std::vector<int64_t> &grid,
                                const std::vector<int64_t> &axes, int rank);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_GRID_H
