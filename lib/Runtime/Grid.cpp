//===- Grid.cpp - The device grid's block arithmetic ------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Ranks, groups and blocks on the device grid: the arithmetic every
// backend (the CPU executor, MPI, NCCL) and the trainer share, so that
// they agree on which rank holds which block.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Grid.h"

#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

using namespace gptc;
using namespace gptc::runtime;

std::vector<int64_t> runtime::gridCoordinates(const std::vector<int64_t> &grid,
                                              int64_t rank) {
  std::vector<int64_t> c(grid.size());
  for (int64_t d = static_cast<int64_t>(grid.size()) - 1; d >= 0; --d) {
    c[d] = rank % grid[d];
    rank /= grid[d];
  }
  return c;
}

int64_t runtime::groupColor(const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &c,
                            const std::vector<int64_t> &axes) {
  int64_t index = 0;
  for (size_t d = 0; d < grid.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) ==
        axes.end())
      index = index * grid[d] + c[d];
  return index;
}

int64_t runtime::groupIndex(const std::vector<int64_t> &grid,
                            const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> c = gridCoordinates(grid, rank);
  int64_t index = 0;
  for (int64_t a : axes)
    index = index * grid[a] + c[a];
  return index;
}

std::vector<int64_t> runtime::groupKey(const std::vector<int64_t> &grid,
                                       const std::vector<int64_t> &axes) {
  std::vector<int64_t> key(axes);
  key.insert(key.end(), grid.begin(), grid.end());
  key.push_back(static_cast<int64_t>(axes.size()));
  return key;
}

int64_t runtime::groupSize(const std::vector<int64_t> &grid,
                           const std::vector<int64_t> &axes) {
  int64_t n = 1;
  for (int64_t a : axes)
    n *= grid[a];
  return n;
}

std::vector<int> runtime::reductionGroup(const std::vector<int64_t> &grid,
                                         const std::vector<int64_t> &axes,
                                         int rank) {
  int64_t total = 1;
  for (int64_t d : grid)
    total *= d;
  int64_t mine = groupColor(grid, gridCoordinates(grid, rank), axes);
  std::vector<int> group;
  for (int64_t r = 0; r < total; ++r)
    if (groupColor(grid, gridCoordinates(grid, r), axes) == mine)
      group.push_back(static_cast<int>(r));
  return group;
}

bool runtime::BlockLayout::isSplit() const {
  for (const auto &a : axes)
    if (!a.empty())
      return true;
  return false;
}

std::vector<int64_t>
runtime::BlockLayout::blockShape(const std::vector<int64_t> &grid) const {
  std::vector<int64_t> block(shape);
  for (size_t d = 0; d < block.size() && d < axes.size(); ++d)
    block[d] /= groupSize(grid, axes[d]);
  return block;
}

/// Copies block `index` along `axis` (blocks of `block.shape[axis]`) from
/// `whole` into `block`, or back when `toWhole`.
static void copyBlock(Tensor &whole, Tensor &block, int64_t axis, int64_t index,
                      bool toWhole) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(block.shape.size()); ++d) {
    if (d < axis)
      outer *= block.shape[d];
    else if (d > axis)
      inner *= block.shape[d];
  }
  int64_t esize = elementSize(block.dtype);
  int64_t chunk = block.shape[axis] * inner * esize;
  int64_t wholeRow = whole.shape[axis] * inner * esize;
  for (int64_t o = 0; o < outer; ++o) {
    std::byte *w = whole.raw() + o * wholeRow + index * chunk;
    std::byte *b = block.raw() + o * chunk;
    if (toWhole)
      std::memcpy(w, b, chunk);
    else
      std::memcpy(b, w, chunk);
  }
}

BlockLayout runtime::layoutOf(const program::Value &v) {
  BlockLayout l;
  if (v.has_sharding()) {
    l.shape.assign(v.sharding().shape().begin(), v.sharding().shape().end());
    for (const auto &a : v.sharding().axes())
      l.axes.emplace_back(a.axes().begin(), a.axes().end());
  } else {
    l.shape.assign(v.type().shape().begin(), v.type().shape().end());
    l.axes.resize(l.shape.size());
  }
  return l;
}

Tensor runtime::sliceBlock(const Tensor &whole, const BlockLayout &layout,
                           const std::vector<int64_t> &grid, int64_t rank) {
  Tensor current = whole;
  for (size_t d = 0; d < layout.axes.size(); ++d) {
    const std::vector<int64_t> &axes = layout.axes[d];
    int64_t n = groupSize(grid, axes);
    if (n == 1)
      continue;
    std::vector<int64_t> shape = current.shape;
    shape[d] /= n;
    Tensor next(current.dtype, shape);
    copyBlock(current, next, static_cast<int64_t>(d),
              groupIndex(grid, axes, rank), false);
    current = std::move(next);
  }
  return current;
}

bool runtime::gatherBlocks(const Tensor &block, const BlockLayout &layout,
                           const std::vector<int64_t> &grid, Communicator *comm,
                           Tensor &whole, std::string &error) {
  Tensor current = block;
  for (size_t d = 0; d < layout.axes.size(); ++d) {
    const std::vector<int64_t> &axes = layout.axes[d];
    int64_t n = groupSize(grid, axes);
    if (n == 1)
      continue;
    if (!comm) {
      error = "gathering a sharded tensor needs a communicator";
      return false;
    }
    Tensor packed(current.dtype, {n * current.numElements()});
    if (!comm->allGather(current.raw(), packed.raw(), current.numElements(),
                         current.dtype, grid, axes, error))
      return false;
    std::vector<int64_t> shape = current.shape;
    shape[d] *= n;
    Tensor next(current.dtype, shape);
    for (int64_t r = 0; r < n; ++r) {
      Tensor piece = Tensor::view(current.dtype, current.shape,
                                  packed.raw() + r * current.byteSize());
      copyBlock(next, piece, static_cast<int64_t>(d), r, true);
    }
    current = std::move(next);
  }
  whole = std::move(current);
  return true;
}

/// The first of `names` set to a non-negative decimal number, or -1.
static int firstRankVariable(std::initializer_list<const char *> names) {
  for (const char *name : names) {
    const char *v = std::getenv(name);
    if (!v || !*v)
      continue;
    long value = 0;
    const char *c = v;
    for (; *c >= '0' && *c <= '9' && value < (1L << 30); ++c)
      value = value * 10 + (*c - '0');
    if (*c == 0)
      return static_cast<int>(value);
  }
  return -1;
}

int runtime::launcherLocalRank() {
  return firstRankVariable({"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                            "PMIX_LOCAL_RANK", "SLURM_LOCALID"});
}

int runtime::launcherRank() {
  return firstRankVariable(
      {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"});
}

int runtime::launcherSize() {
  return firstRankVariable(
      {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"});
}

int runtime::localDeviceIndex(int rank, int devices) {
  int local = launcherLocalRank();
  if (local < 0)
    local = rank;
  return devices > 0 ? local % devices : 0;
}
