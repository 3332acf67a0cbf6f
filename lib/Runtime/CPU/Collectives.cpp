//===- Collectives.cpp - The CPU executor's collectives ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Executor::runCollective: shard.all_reduce (sum, max), all_gather,
// reduce_scatter, all_slice and gptc.shard_offset on host tensors, through
// the executor's Communicator (MPI; NCCL staged through the device).
//
//===----------------------------------------------------------------------===//

#include "KernelCall.h"

#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/CollectiveSchedule.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Executor.h"
#include "gptc/Runtime/Grid.h"

#include <algorithm>
#include <cstring>

using namespace gptc;
using namespace gptc::runtime;
using detail::Call;
using program::DType;
using program::Kernel;
using program::OpKind;

/// Elements before and after `axis` of `shape`.
static void aroundAxis(const std::vector<int64_t> &shape, int64_t axis,
                       int64_t &outer, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis)
      outer *= shape[d];
    else if (d > axis)
      inner *= shape[d];
  }
}

bool Executor::allReduceCall(void *data, int64_t count, DType dtype,
                             const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes, bool max,
                             std::vector<int64_t> *async, std::string &error) {
  if (!async)
    return max ? communicator->allReduceMax(data, count, dtype, grid, axes,
                                            error)
               : communicator->allReduceSum(data, count, dtype, grid, axes,
                                            error);
  int64_t request;
  if (!communicator->startAllReduce(data, count, dtype, grid, axes, max,
                                    request, error))
    return false;
  async->push_back(request);
  return true;
}

bool Executor::allGatherCall(const void *in, void *out, int64_t count,
                             DType dtype, const std::vector<int64_t> &grid,
                             const std::vector<int64_t> &axes,
                             std::vector<int64_t> *async, std::string &error) {
  if (!async)
    return communicator->allGather(in, out, count, dtype, grid, axes, error);
  int64_t request;
  if (!communicator->startAllGather(in, out, count, dtype, grid, axes, request,
                                    error))
    return false;
  async->push_back(request);
  return true;
}

bool Executor::reduceScatterCall(const void *in, void *out, int64_t count,
                                 DType dtype, const std::vector<int64_t> &grid,
                                 const std::vector<int64_t> &axes,
                                 std::vector<int64_t> *async,
                                 std::string &error) {
  if (!async)
    return communicator->reduceScatterSum(in, out, count, dtype, grid, axes,
                                          error);
  int64_t request;
  if (!communicator->startReduceScatterSum(in, out, count, dtype, grid, axes,
                                           request, error))
    return false;
  async->push_back(request);
  return true;
}

bool Executor::runBucket(const Kernel &k, const std::vector<int64_t> &grid,
                         const std::vector<int64_t> &axes, int64_t ranks,
                         std::string &error, std::vector<int64_t> *async) {
  Call c{{}, {}, k, error};
  std::vector<const Tensor *> xs;
  std::vector<Tensor *> ys;
  int64_t total = 0;
  for (int i = 0; i < k.inputs_size(); ++i) {
    int32_t in = k.inputs(i), out = k.outputs(i);
    xs.push_back(bound[in] ? bound[in] : &values[in]);
    ys.push_back(&values[out]);
    if (xs.back()->dtype != ys.front()->dtype ||
        ys.back()->dtype != ys.front()->dtype)
      return c.fail("a bucket's tensors must share one element type");
    if (xs.back()->numElements() != ys.back()->numElements())
      return c.fail("operand shapes do not match");
    total += ys.back()->byteSize();
  }
  if (ranks > 1 && !communicator)
    return c.fail("sums over " + std::to_string(ranks) +
                  " devices and needs a communicator: run under mpirun");
  program::DType t = ys.front()->dtype;
  int64_t size = elementSize(t);
  std::string why;
  int64_t span = bucketSpanBytes(function, k);
  // The plan's layout holds only where the tensors are where it put them:
  // an input bound to a buffer of the caller (an accumulation body's
  // operands) is read from there, not from its planned place.
  for (size_t i = 0; span && i < ys.size(); ++i) {
    int64_t planned = function.values(k.outputs(static_cast<int>(i))).offset() -
                      function.values(k.outputs(0)).offset();
    if (xs[i]->raw() != ys[i]->raw() || ys[i]->raw() != ys[0]->raw() + planned)
      span = 0;
  }
  if (span) {
    // In place over one span of the arena (gaps of alignment included,
    // which only the bucket owns): no copies.
    if (ranks == 1)
      return true;
    return allReduceCall(ys.front()->raw(), span / size, t, grid, axes,
                         /*max=*/false, async, why) ||
           c.fail(why);
  }
  // Packed around one call (which completes here: the results are
  // copied out of the scratch after it).
  if (ranks == 1) {
    for (size_t i = 0; i < ys.size(); ++i)
      if (ys[i]->raw() != xs[i]->raw())
        std::memcpy(ys[i]->raw(), xs[i]->raw(), ys[i]->byteSize());
    return true;
  }
  bucketScratch.resize(static_cast<size_t>(total));
  std::byte *at = bucketScratch.data();
  for (const Tensor *x : xs) {
    std::memcpy(at, x->raw(), x->byteSize());
    at += x->byteSize();
  }
  if (!communicator->allReduceSum(bucketScratch.data(), total / size, t, grid,
                                  axes, why))
    return c.fail(why);
  at = bucketScratch.data();
  for (Tensor *y : ys) {
    std::memcpy(y->raw(), at, y->byteSize());
    at += y->byteSize();
  }
  return true;
}

bool Executor::runBlocksBucket(const Kernel &k,
                               const std::vector<int64_t> &grid,
                               const std::vector<int64_t> &axes, int64_t ranks,
                               std::string &error,
                               std::vector<int64_t> *async) {
  Call c{{}, {}, k, error};
  bool gather = k.op() == program::ALL_GATHER;
  std::vector<const Tensor *> xs;
  std::vector<Tensor *> ys;
  // Per tensor: the bytes of one rank's block.
  std::vector<int64_t> block;
  for (int i = 0; i < k.inputs_size(); ++i) {
    int32_t in = k.inputs(i), out = k.outputs(i);
    xs.push_back(bound[in] ? bound[in] : &values[in]);
    ys.push_back(&values[out]);
    const Tensor &x = *xs.back(), &y = *ys.back();
    const Tensor &whole = gather ? y : x, &part = gather ? x : y;
    if (x.dtype != ys.front()->dtype || y.dtype != ys.front()->dtype)
      return c.fail("a bucket's tensors must share one element type");
    if (whole.shape.empty() || whole.shape.size() != part.shape.size() ||
        whole.numElements() != part.numElements() * ranks ||
        !std::equal(whole.shape.begin() + 1, whole.shape.end(),
                    part.shape.begin() + 1))
      return c.fail("operand shapes do not match the group of " +
                    std::to_string(ranks) + " devices along dimension 0");
    block.push_back(part.byteSize());
  }
  if (ranks == 1) {
    for (size_t i = 0; i < ys.size(); ++i)
      if (ys[i]->raw() != xs[i]->raw())
        std::memcpy(ys[i]->raw(), xs[i]->raw(), ys[i]->byteSize());
    return true;
  }
  if (!communicator)
    return c.fail("runs over " + std::to_string(ranks) +
                  " devices and needs a communicator: run under mpirun");
  program::DType t = ys.front()->dtype;
  int64_t size = elementSize(t);
  std::string why;
  // A large block costs more to copy than a call's latency (shared-memory
  // MPI moves it at memory speed): it goes in a call of its own, straight
  // between the tensors. The small ones travel packed, in one call.
  constexpr int64_t kPackBelow = cpu::kBucketPackBelowBytes;
  // `row`: one rank's packed blocks together.
  std::vector<size_t> packed;
  int64_t row = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (block[i] < kPackBelow) {
      packed.push_back(i);
      row += block[i];
      continue;
    }
    bool ok =
        gather ? allGatherCall(xs[i]->raw(), ys[i]->raw(), block[i] / size, t,
                               grid, axes, async, why)
               : reduceScatterCall(xs[i]->raw(), ys[i]->raw(), block[i] / size,
                                   t, grid, axes, async, why);
    if (!ok)
      return c.fail(why);
  }
  if (packed.empty())
    return true;
  // Rank r's row: its block of each packed tensor, one after another. A
  // gather sends this rank's row and receives every rank's; a
  // reduce-scatter sends every rank's and receives the sum of this rank's.
  // This call completes here (the results are copied out after it); the
  // large ones above may still be in flight, which MPI allows.
  bucketScratch.resize(static_cast<size_t>(row * (ranks + 1)));
  std::byte *mine = bucketScratch.data(), *all = mine + row;
  if (gather) {
    std::byte *at = mine;
    for (size_t i : packed) {
      std::memcpy(at, xs[i]->raw(), block[i]);
      at += block[i];
    }
    if (!communicator->allGather(mine, all, row / size, t, grid, axes, why))
      return c.fail(why);
    int64_t offset = 0;
    for (size_t i : packed) {
      for (int64_t r = 0; r < ranks; ++r)
        std::memcpy(ys[i]->raw() + r * block[i], all + r * row + offset,
                    block[i]);
      offset += block[i];
    }
    return true;
  }
  int64_t offset = 0;
  for (size_t i : packed) {
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(all + r * row + offset, xs[i]->raw() + r * block[i],
                  block[i]);
    offset += block[i];
  }
  if (!communicator->reduceScatterSum(all, mine, row / size, t, grid, axes,
                                      why))
    return c.fail(why);
  std::byte *at = mine;
  for (size_t i : packed) {
    std::memcpy(ys[i]->raw(), at, block[i]);
    at += block[i];
  }
  return true;
}

/// The MPI tag of ring attention's shifts. Context parallelism runs
/// without pipeline stages, whose messages use tags from 0 up; MPI keeps
/// the messages of one tag between two ranks in order.
static constexpr int64_t kShiftTag = 32767;

/// shard.shift with rotate: this rank's input goes to the rank `offset`
/// further along `shift_axis` (cyclically), and this rank's output comes
/// from the rank `offset` before it.
bool Executor::runShift(const Kernel &k, const std::vector<int64_t> &grid,
                        std::string &error, std::vector<int64_t> *async) {
  Call c{{}, {}, k, error};
  const program::CollectiveParams &params = k.collective();
  int64_t axis = params.shift_axis();
  if (axis < 0 || axis >= static_cast<int64_t>(grid.size()) ||
      std::find(params.grid_axes().begin(), params.grid_axes().end(), axis) ==
          params.grid_axes().end())
    return c.fail("shift axis out of range or not among the grid axes");
  const Tensor &x =
      *(bound[k.inputs(0)] ? bound[k.inputs(0)] : &values[k.inputs(0)]);
  Tensor &y = values[k.outputs(0)];
  if (x.dtype != y.dtype || x.byteSize() != y.byteSize())
    return c.fail("operand types do not match");
  int64_t n = grid[axis], offset = ((params.offset() % n) + n) % n;
  if (offset == 0) {
    if (y.raw() != x.raw())
      std::memcpy(y.raw(), x.raw(), y.byteSize());
    return true;
  }
  if (!communicator)
    return c.fail("shifts over " + std::to_string(n) +
                  " devices and needs a communicator: run under mpirun");
  if (y.raw() == x.raw())
    return c.fail("cannot shift in place");
  // The ranks `offset` after and before this one along the axis.
  std::vector<int64_t> at = gridCoordinates(grid, communicator->rank());
  auto rankAt = [&](int64_t coordinate) {
    std::vector<int64_t> p = at;
    p[axis] = coordinate;
    int64_t rank = 0;
    for (size_t d = 0; d < grid.size(); ++d)
      rank = rank * grid[d] + p[d];
    return static_cast<int>(rank);
  };
  int dest = rankAt((at[axis] + offset) % n);
  int source = rankAt((at[axis] + n - offset) % n);
  std::string why;
  int64_t sent, received;
  if (!communicator->startExchange(x.raw(), dest, y.raw(), source, x.byteSize(),
                                   kShiftTag, sent, received, why))
    return c.fail(why);
  // In flight over the next kernels when the executor overlaps it;
  // complete now otherwise.
  for (int64_t request : {received, sent}) {
    if (async && request != -1)
      async->push_back(request);
    else if (!communicator->wait(request, why))
      return c.fail(why);
  }
  return true;
}

bool Executor::runCollective(const Kernel &k, std::string &error,
                             std::vector<int64_t> *async) {
  Call c{{}, {}, k, error};
  std::vector<int64_t> grid(function.grid_shape().begin(),
                            function.grid_shape().end());
  if (k.op() == program::SHIFT)
    return runShift(k, grid, error, async);
  if (k.op() == program::SHARD_OFFSET) {
    Tensor &y = values[k.outputs(0)];
    const program::ShardOffsetParams &params = k.shard_offset();
    std::vector<int64_t> axes(params.grid_axes().begin(),
                              params.grid_axes().end());
    for (int64_t a : axes)
      if (a < 0 || a >= static_cast<int64_t>(grid.size()))
        return c.fail("grid axis out of range");
    int64_t ranks = groupSize(grid, axes);
    if (y.dtype != program::I32 || y.numElements() != 1)
      return c.fail("expects an i32 scalar result");
    if (ranks > 1 && !communicator)
      return c.fail("runs over " + std::to_string(ranks) +
                    " devices and needs a communicator: run under mpirun");
    int64_t me = ranks > 1 ? groupIndex(grid, axes, communicator->rank()) : 0;
    y.data<int32_t>()[0] = static_cast<int32_t>(me * params.block());
    return true;
  }
  const program::CollectiveParams &params = k.collective();
  std::vector<int64_t> axes(params.grid_axes().begin(),
                            params.grid_axes().end());
  for (int64_t a : axes)
    if (a < 0 || a >= static_cast<int64_t>(grid.size()))
      return c.fail("grid axis out of range");
  int64_t ranks = groupSize(grid, axes);
  if (k.op() == program::ALL_REDUCE && k.inputs_size() != 1)
    return runBucket(k, grid, axes, ranks, error, async);
  if ((k.op() == program::ALL_GATHER || k.op() == program::REDUCE_SCATTER) &&
      k.inputs_size() != 1)
    return runBlocksBucket(k, grid, axes, ranks, error, async);
  const Tensor &x =
      *(bound[k.inputs(0)] ? bound[k.inputs(0)] : &values[k.inputs(0)]);
  Tensor &y = values[k.outputs(0)];
  bool reduce =
      k.op() == program::ALL_REDUCE || k.op() == program::ALL_REDUCE_MAX;
  if (x.dtype != y.dtype)
    return c.fail("operand types do not match");
  if (reduce) {
    if (x.numElements() != y.numElements())
      return c.fail("operand shapes do not match");
    if (y.raw() != x.raw()) // in place when the plan stores y over x
      std::memcpy(y.raw(), x.raw(), y.byteSize());
    if (ranks == 1)
      return true;
    if (!communicator)
      return c.fail("sums over " + std::to_string(ranks) +
                    " devices and needs a communicator: run under mpirun");
    std::string why;
    return allReduceCall(y.raw(), y.numElements(), y.dtype, grid, axes,
                         k.op() == program::ALL_REDUCE_MAX, async, why) ||
           c.fail(why);
  }

  // Gather, scatter and slice move blocks along `axis` of the whole tensor.
  int64_t axis = params.axis();
  bool gather = k.op() == program::ALL_GATHER;
  const Tensor &whole = gather ? y : x;
  const Tensor &block = gather ? x : y;
  if (axis < 0 || axis >= static_cast<int64_t>(whole.shape.size()) ||
      whole.shape.size() != block.shape.size())
    return c.fail("tensor axis out of range");
  for (size_t d = 0; d < whole.shape.size(); ++d)
    if (whole.shape[d] !=
        block.shape[d] * (static_cast<int64_t>(d) == axis ? ranks : 1))
      return c.fail("operand shapes do not match the group of " +
                    std::to_string(ranks) + " devices");
  if (ranks > 1 && !communicator)
    return c.fail("runs over " + std::to_string(ranks) +
                  " devices and needs a communicator: run under mpirun");
  int64_t outer, inner;
  aroundAxis(block.shape, axis, outer, inner);
  // One row of a block along the axis and below it.
  int64_t chunk = block.shape[axis] * inner * elementSize(x.dtype);
  int64_t blockBytes = block.byteSize();
  int64_t me = communicator ? groupIndex(grid, axes, communicator->rank()) : 0;
  if (k.op() == program::ALL_SLICE || ranks == 1) {
    if (gather && ranks == 1) {
      std::memcpy(y.raw(), x.raw(), y.byteSize());
      return true;
    }
    if (k.op() == program::REDUCE_SCATTER) {
      std::memcpy(y.raw(), x.raw(), y.byteSize());
      return true;
    }
    // This rank's block.
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.raw() + o * chunk, x.raw() + (o * ranks + me) * chunk,
                  chunk);
    return true;
  }
  // Blocks are contiguous when nothing lies before the axis; otherwise they
  // are packed (rank-major) around the call.
  std::string why;
  if (gather) {
    if (outer == 1)
      return allGatherCall(x.raw(), y.raw(), x.numElements(), x.dtype, grid,
                           axes, async, why) ||
             c.fail(why);
    std::vector<std::byte> packed(y.byteSize());
    if (!communicator->allGather(x.raw(), packed.data(), x.numElements(),
                                 x.dtype, grid, axes, why))
      return c.fail(why);
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(y.raw() + (o * ranks + r) * chunk,
                    packed.data() + r * blockBytes + o * chunk, chunk);
    return true;
  }
  if (outer == 1)
    return reduceScatterCall(x.raw(), y.raw(), y.numElements(), x.dtype, grid,
                             axes, async, why) ||
           c.fail(why);
  std::vector<std::byte> packed(x.byteSize());
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(packed.data() + r * blockBytes + o * chunk,
                  x.raw() + (o * ranks + r) * chunk, chunk);
  return communicator->reduceScatterSum(packed.data(), y.raw(), y.numElements(),
                                        x.dtype, grid, axes, why) ||
         c.fail(why);
}
