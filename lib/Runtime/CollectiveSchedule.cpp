//===- CollectiveSchedule.cpp - When a device's collectives overlap -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CollectiveSchedule.h"

#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/KernelProfile.h"
#include "gptc/Runtime/Tensor.h"

#include <algorithm>
#include <cstdint>

using namespace gptc;
using namespace gptc::runtime;

bool runtime::isDeviceCollective(program::OpKind op) {
  return op == program::ALL_REDUCE || op == program::ALL_REDUCE_MAX ||
         op == program::ALL_GATHER || op == program::REDUCE_SCATTER ||
         op == program::SHIFT;
}

namespace {
/// Where a value is stored: a byte range of the arena, or (unplanned) its
/// own storage, which only the value itself occupies.
struct Storage {
  int64_t begin = 0, end = 0; // arena bytes; empty when unplanned
  int32_t id = -1;
  bool planned() const { return end > begin; }
  bool overlaps(const Storage &o) const {
    if (planned() && o.planned())
      return begin < o.end && o.begin < end;
    return id == o.id;
  }
};

Storage storageOf(const program::Function &f, int32_t id) {
  Storage s;
  s.id = id;
  if (id < 0 || id >= f.values_size())
    return s;
  const program::Value &v = f.values(id);
  if (v.offset() < 0)
    return s;
  int64_t n = elementSize(v.type().dtype());
  for (int64_t d : v.type().shape())
    n *= d;
  s.begin = v.offset();
  s.end = v.offset() + n;
  return s;
}
} // namespace

int64_t runtime::bucketSpanBytes(const program::Function &function,
                                 const program::Kernel &k) {
  if (k.op() != program::ALL_REDUCE || k.inputs_size() < 2 ||
      k.inputs_size() != k.outputs_size())
    return 0;
  int64_t begin = -1, end = -1;
  for (int i = 0; i < k.inputs_size(); ++i) {
    int32_t in = k.inputs(i), out = k.outputs(i);
    if (in < 0 || in >= function.values_size() || out < 0 ||
        out >= function.values_size())
      return 0;
    Storage x = storageOf(function, in), y = storageOf(function, out);
    if (!y.planned() || x.begin != y.begin || x.end != y.end ||
        (end >= 0 && (y.begin < end || y.begin - end >= 64)))
      return 0;
    if (begin < 0)
      begin = y.begin;
    end = y.end;
  }
  return end - begin;
}

std::vector<ScheduledCollective>
runtime::scheduleCollectives(const program::Function &function,
                             bool oneStream) {
  std::vector<ScheduledCollective> result;
  size_t count = static_cast<size_t>(function.kernels_size());
  for (size_t c = 0; c < count; ++c) {
    const program::Kernel &k = function.kernels(static_cast<int>(c));
    if (!isDeviceCollective(k.op()))
      continue;
    std::vector<Storage> outs, touched;
    for (int32_t id : k.outputs())
      outs.push_back(storageOf(function, id));
    touched = outs;
    for (int32_t id : k.inputs())
      touched.push_back(storageOf(function, id));
    auto any = [](const std::vector<Storage> &set, const Storage &s) {
      for (const Storage &t : set)
        if (t.overlaps(s))
          return true;
      return false;
    };
    size_t wait = count;
    for (size_t j = c + 1; j < count && wait == count; ++j) {
      const program::Kernel &later = function.kernels(static_cast<int>(j));
      // Collectives after it run after it on one stream: only what the
      // compute stream does can race with it. Without one stream, a later
      // collective in flight at the same time can as well.
      if (oneStream && isDeviceCollective(later.op()))
        continue;
      for (int32_t id : later.inputs())
        if (any(outs, storageOf(function, id)))
          wait = j;
      for (int32_t id : later.outputs())
        if (any(touched, storageOf(function, id)))
          wait = j;
    }
    result.push_back({c, wait});
  }
  return result;
}

void runtime::printDeviceSchedule(const program::Function &function,
                                  std::ostream &os) {
  std::vector<ScheduledCollective> schedule = scheduleCollectives(function);
  size_t count = static_cast<size_t>(function.kernels_size());
  std::vector<std::vector<size_t>> waits(count + 1);
  std::vector<size_t> waitOf(count, count);
  for (const ScheduledCollective &c : schedule) {
    waits[c.waitBefore].push_back(c.kernel);
    waitOf[c.kernel] = c.waitBefore;
  }
  int64_t overlapped = 0;
  for (const ScheduledCollective &c : schedule)
    overlapped += c.waitBefore > c.kernel + 1;
  os << "function " << function.name() << ": " << count - schedule.size()
     << " steps on the compute stream, " << schedule.size()
     << " collectives on the communication stream (" << overlapped
     << " overlapped with later kernels)\n";
  auto printWaits = [&](size_t j) {
    if (waits[j].empty())
      return;
    os << "  compute  wait";
    for (size_t c : waits[j])
      os << " #" << c;
    os << "\n";
  };
  std::vector<int64_t> grid(function.grid_shape().begin(),
                            function.grid_shape().end());
  for (size_t j = 0; j < count; ++j) {
    printWaits(j);
    const program::Kernel &k = function.kernels(static_cast<int>(j));
    bool comm = isDeviceCollective(k.op());
    os << (comm ? "  comm     #" : "  compute  #") << j << " "
       << program::OpKind_Name(k.op());
    if (k.op() == program::COMPILED && !k.compiled().symbol().empty())
      os << " " << kernelName(k);
    if (k.has_matmul() && k.matmul().epilogue() != program::MatmulParams::NONE)
      os << " epilogue "
         << program::MatmulParams::Epilogue_Name(k.matmul().epilogue());
    if (comm && k.inputs_size() && k.inputs(0) >= 0 &&
        k.inputs(0) < function.values_size()) {
      const program::TensorType &t = function.values(k.inputs(0)).type();
      if (k.inputs_size() > 1) {
        // A bucket: its tensors and their whole bytes (a gather's results,
        // a reduction's operands).
        auto bytesOf = [&](int32_t id) -> int64_t {
          if (id < 0 || id >= function.values_size())
            return 0;
          int64_t n = elementSize(function.values(id).type().dtype());
          for (int64_t d : function.values(id).type().shape())
            n *= d;
          return n;
        };
        int64_t bytes = 0;
        for (int i = 0; i < k.inputs_size(); ++i)
          bytes += std::max(bytesOf(k.inputs(i)),
                            i < k.outputs_size() ? bytesOf(k.outputs(i)) : 0);
        os << " bucket of " << k.inputs_size() << " "
           << program::DType_Name(t.dtype()) << " tensors, " << bytes
           << " bytes";
      } else {
        os << " " << program::DType_Name(t.dtype()) << "[";
        for (int d = 0; d < t.shape_size(); ++d)
          os << (d ? "x" : "") << t.shape(d);
        os << "]";
      }
      std::vector<int64_t> axes(k.collective().grid_axes().begin(),
                                k.collective().grid_axes().end());
      os << " over axes (";
      for (size_t a = 0; a < axes.size(); ++a)
        os << (a ? ", " : "") << axes[a];
      os << ") of " << groupSize(grid, axes) << " ranks, waited for ";
      if (waitOf[j] == count)
        os << "at the end";
      else
        os << "before #" << waitOf[j];
    }
    os << "\n";
  }
  printWaits(count);
}
