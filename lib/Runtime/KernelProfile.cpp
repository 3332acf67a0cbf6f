//===- KernelProfile.cpp - Where a step's time goes, and how well -*- C++ -*-//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/KernelProfile.h"

#include "gptc/Runtime/Tensor.h"
#include "gptc/Runtime/Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

using namespace gptc;
using namespace gptc::runtime;

//===----------------------------------------------------------------------===//
// The copy's bandwidth on the host
//===----------------------------------------------------------------------===//

double Backend::copyBandwidth() {
  // 256 MiB: well past any CPU's last-level cache. The copy is split over
  // the runtime's OpenMP threads, as the kernels are.
  constexpr int64_t bytes = int64_t(256) << 20, chunks = 256;
  constexpr int64_t chunk = bytes / chunks;
  std::unique_ptr<std::byte[]> a(new (std::nothrow) std::byte[bytes]);
  std::unique_ptr<std::byte[]> b(new (std::nothrow) std::byte[bytes]);
  if (!a || !b)
    return 0;
  std::byte *src = a.get(), *dst = b.get();
  // First touch on the threads that copy (pages where they run).
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    std::memset(src + c * chunk, 1, chunk);
    std::memset(dst + c * chunk, 0, chunk);
  }
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      std::memcpy(dst + c * chunk, src + c * chunk, chunk);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s > 0)
      best = std::max(best, 2.0 * bytes / s);
  }
  return best;
}

//===----------------------------------------------------------------------===//
// What a kernel costs
//===----------------------------------------------------------------------===//

static double elements(const program::Value &v) {
  double n = 1;
  for (int64_t d : v.type().shape())
    n *= static_cast<double>(d);
  return n;
}

static double valueBytes(const program::Value &v) {
  return elements(v) * static_cast<double>(elementSize(v.type().dtype()));
}

const char *gptc::runtime::className(KernelCost::Class cls) {
  switch (cls) {
  case KernelCost::Gemm:
    return "gemm";
  case KernelCost::Attention:
    return "attention";
  case KernelCost::Collective:
    return "collective";
  case KernelCost::Memory:
    return "memory";
  case KernelCost::Other:
    return "other";
  }
  return "other";
}

KernelCost gptc::runtime::kernelCost(const program::Function &f,
                                     const program::Kernel &k) {
  KernelCost cost;
  auto value = [&](int32_t id) -> const program::Value & {
    return f.values(id);
  };
  for (int32_t id : k.inputs())
    cost.bytes += valueBytes(value(id));
  for (int32_t id : k.outputs())
    cost.bytes += valueBytes(value(id));
  auto shape = [&](int32_t id) {
    const auto &s = value(id).type().shape();
    return std::vector<int64_t>(s.begin(), s.end());
  };
  switch (k.op()) {
  case program::LINEAR:
  case program::MATMUL: {
    cost.cls = KernelCost::Gemm;
    if (k.inputs_size() < 2 || k.outputs_size() < 1)
      break;
    std::vector<int64_t> lhs = shape(k.inputs(0));
    if (lhs.empty())
      break;
    bool transposed = k.op() == program::MATMUL && k.has_matmul() &&
                      k.matmul().transpose_lhs() && lhs.size() >= 2;
    double depth =
        static_cast<double>(transposed ? lhs[lhs.size() - 2] : lhs.back());
    cost.flops = 2 * elements(value(k.outputs(0))) * depth;
    break;
  }
  case program::ATTENTION_BLOCK:
  case program::ATTENTION_BLOCK_GRAD: {
    // A ring step: with the load-balanced chunks each query sees half the
    // block's keys (all of a chunk or none) after the first step, and
    // half on average in the first: B Tq Tk C per product.
    cost.cls = KernelCost::Attention;
    if (k.inputs_size() < 2)
      break;
    std::vector<int64_t> q = shape(k.inputs(0)), key = shape(k.inputs(1));
    if (q.size() != 3 || key.size() != 3)
      break;
    cost.flops = 2 * static_cast<double>(q[0]) * static_cast<double>(q[1]) *
                 static_cast<double>(key[1]) * static_cast<double>(q[2]);
    if (k.op() == program::ATTENTION_BLOCK_GRAD)
      cost.flops *= 2.5;
    break;
  }
  case program::CAUSAL_ATTENTION:
  case program::CAUSAL_ATTENTION_GRAD: {
    cost.cls = KernelCost::Attention;
    if (k.inputs_size() < 1)
      break;
    std::vector<int64_t> q = shape(k.inputs(0));
    if (q.size() != 3)
      break;
    double b = static_cast<double>(q[0]), t = static_cast<double>(q[1]),
           c = static_cast<double>(q[2]);
    // Context parallelism: queries of a part of the sequence against the
    // keys of all of it (Tk), each query seeing half of them on average.
    double tk = t;
    if (k.inputs_size() >= 2) {
      std::vector<int64_t> key = shape(k.inputs(1));
      if (key.size() == 3)
        tk = static_cast<double>(key[1]);
    }
    // S = Q K^T and O = P V, each 2 B T Tk C, half of each under the mask;
    // the backward's five products are 2.5 times that.
    cost.flops = 2 * b * t * tk * c;
    if (k.op() == program::CAUSAL_ATTENTION_GRAD)
      cost.flops *= 2.5;
    break;
  }
  case program::ALL_REDUCE:
  case program::ALL_GATHER:
  case program::REDUCE_SCATTER:
  case program::ALL_SLICE:
  case program::ALL_REDUCE_MAX:
  case program::SHIFT:
    cost.cls = KernelCost::Collective;
    break;
  case program::CONSTANT:
  case program::IOTA:
  case program::RESHAPE:
  case program::ACCUMULATE:
  case program::LEARNING_RATE:
  case program::SHARD_OFFSET:
  case program::LOSS_SCALE_UPDATE:
  case program::CLIP_SCALE:
  case program::SQRT:
    cost.cls = KernelCost::Other;
    break;
  case program::EMBEDDING: {
    // The table's rows the ids select, not the whole table.
    cost.cls = KernelCost::Memory;
    for (int32_t id : k.inputs()) {
      const program::Value &v = value(id);
      program::DType t = v.type().dtype();
      if (t != program::I32 && t != program::I64 && k.outputs_size() > 0) {
        cost.bytes -= valueBytes(v);
        cost.bytes +=
            elements(value(k.outputs(0))) * static_cast<double>(elementSize(t));
      }
    }
    break;
  }
  default:
    cost.cls = KernelCost::Memory;
    break;
  }
  return cost;
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

namespace {
struct Row {
  const KernelTime *time;
  const program::Kernel *kernel;
  KernelCost cost;
};
} // namespace

static std::vector<Row> rows(const std::vector<KernelTime> &kernels) {
  std::vector<Row> out;
  for (const KernelTime &t : kernels) {
    if (!t.function || t.kernel < 0 || t.kernel >= t.function->kernels_size() ||
        t.calls == 0)
      continue;
    const program::Kernel &k = t.function->kernels(t.kernel);
    out.push_back({&t, &k, kernelCost(*t.function, k)});
  }
  return out;
}

std::string gptc::runtime::kernelName(const program::Kernel &k) {
  if (k.op() != program::COMPILED)
    return program::OpKind_Name(k.op());
  return k.compiled().name().empty() ? k.compiled().symbol()
                                     : k.compiled().name();
}

/// A kernel's location for one line: a fused kernel's first op's and how
/// many more ("a + 18 more").
static std::string shortLocation(const std::string &loc) {
  size_t plus = loc.find(" + ");
  if (plus == std::string::npos)
    return loc;
  size_t more = 0;
  for (size_t at = plus; at != std::string::npos; at = loc.find(" + ", at + 3))
    ++more;
  return loc.substr(0, plus) + " + " + std::to_string(more) + " more";
}

/// 3 significant digits, no exponent: "412", "41.2", "4.12", "0.0412".
static std::string sig3(double x) {
  int digits = x > 0 ? static_cast<int>(std::floor(std::log10(x))) : 0;
  std::ostringstream os;
  os << std::fixed << std::setprecision(std::clamp(2 - digits, 0, 6)) << x;
  return os.str();
}

void gptc::runtime::printKernelProfile(std::ostream &log,
                                       const std::string &function,
                                       const std::vector<KernelTime> &kernels,
                                       int64_t steps, bool afterFirst,
                                       double stepSeconds,
                                       double copyBandwidth) {
  std::vector<Row> all = rows(kernels);
  if (all.empty() || steps <= 0)
    return;
  double total = 0;
  std::map<int, std::pair<double, int64_t>> byKind;
  for (const Row &r : all) {
    total += r.time->seconds;
    auto &[sec, calls] = byKind[r.kernel->op()];
    sec += r.time->seconds;
    calls += r.time->calls;
  }
  if (total <= 0)
    return;
  double perStep = total / static_cast<double>(steps);
  // The caller's stream gets its format back.
  struct Restore {
    std::ostream &os;
    std::ios_base::fmtflags flags;
    std::streamsize precision;
    ~Restore() {
      os.flags(flags);
      os.precision(precision);
    }
  } restore{log, log.flags(), log.precision()};
  log << std::fixed;
  log << "gptc: @" << function << "'s kernels over " << steps << " step"
      << (steps == 1 ? "" : "s") << (afterFirst ? " after the first" : "")
      << ": " << sig3(perStep * 1e3) << " ms a step";
  if (stepSeconds > 0)
    log << " of " << sig3(stepSeconds * 1e3) << " ms (" << std::setprecision(0)
        << 100 * perStep / stepSeconds << "%)";
  log << "\n";
  // By kind.
  std::vector<std::pair<int, std::pair<double, int64_t>>> kinds(byKind.begin(),
                                                                byKind.end());
  std::sort(kinds.begin(), kinds.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  log << "  by kind:\n";
  for (const auto &[kind, v] : kinds)
    log << "    " << std::left << std::setw(24)
        << program::OpKind_Name(static_cast<program::OpKind>(kind))
        << std::right << std::setw(6) << std::setprecision(1)
        << 100 * v.first / total << "%  " << std::setw(8)
        << sig3(v.first / static_cast<double>(steps) * 1e3) << " ms  "
        << v.second / steps << " calls a step\n";

  // By class, with each class's rate.
  struct Sum {
    double seconds = 0, bytes = 0, flops = 0;
    int64_t kernels = 0;
  } gemm, attention, large, small, collective, other;
  for (const Row &r : all) {
    double calls = static_cast<double>(r.time->calls);
    Sum &s = r.cost.cls == KernelCost::Gemm         ? gemm
             : r.cost.cls == KernelCost::Attention  ? attention
             : r.cost.cls == KernelCost::Collective ? collective
             : r.cost.cls == KernelCost::Other      ? other
             : r.cost.bytes >= kSmallKernelBytes    ? large
                                                    : small;
    s.seconds += r.time->seconds;
    s.bytes += r.cost.bytes * calls;
    s.flops += r.cost.flops * calls;
    ++s.kernels;
  }
  auto line = [&](const char *name, const Sum &s) {
    if (!s.kernels)
      return false;
    log << "    " << std::left << std::setw(14) << name << std::right
        << std::setw(6) << std::setprecision(1) << 100 * s.seconds / total
        << "%  " << std::setw(8)
        << sig3(s.seconds / static_cast<double>(steps) * 1e3) << " ms  "
        << std::setw(5) << s.kernels << " kernels";
    return true;
  };
  log << "  by class:\n";
  for (const auto &[name, s] :
       {std::pair<const char *, const Sum &>{"GEMMs", gemm},
        {"attention", attention}}) {
    if (line(name, s)) {
      if (s.seconds > 0)
        log << "  " << sig3(s.flops / s.seconds * 1e-12) << " TFLOP/s";
      log << "\n";
    }
  }
  if (line("memory-bound", large)) {
    if (large.seconds > 0) {
      double bw = large.bytes / large.seconds;
      log << "  " << sig3(bw * 1e-9) << " GB/s";
      if (copyBandwidth > 0)
        log << ", " << std::setprecision(0) << 100 * bw / copyBandwidth
            << "% of the copy's " << sig3(copyBandwidth * 1e-9) << " GB/s";
    }
    log << " (each moving >= 1 MiB a call)\n";
  }
  if (line("small", small))
    log << " (memory-bound, < 1 MiB a call)\n";
  if (line("collectives", collective))
    log << "\n";
  if (line("other", other))
    log << " (views, constants, scalars)\n";

  // The slowest of the GEMMs and of the large memory-bound kernels.
  auto slowest = [&](bool gemms) {
    std::vector<const Row *> pick;
    for (const Row &r : all)
      if (gemms ? r.cost.cls == KernelCost::Gemm
                : r.cost.cls == KernelCost::Memory &&
                      r.cost.bytes >= kSmallKernelBytes)
        pick.push_back(&r);
    if (pick.empty())
      return;
    std::sort(pick.begin(), pick.end(), [](const Row *a, const Row *b) {
      return a->time->seconds > b->time->seconds;
    });
    if (pick.size() > 8)
      pick.resize(8);
    log << "  the slowest " << (gemms ? "GEMMs" : "memory-bound kernels")
        << " (% of kernel time, per call, rate, where):\n";
    for (const Row *r : pick) {
      double perCall = r->time->seconds / static_cast<double>(r->time->calls);
      log << "    " << std::setw(5) << std::setprecision(1)
          << 100 * r->time->seconds / total << "%  " << std::setw(8)
          << sig3(perCall * 1e6) << " us  ";
      if (gemms) {
        log << std::setw(6) << sig3(r->cost.flops / perCall * 1e-12)
            << " TFLOP/s  ";
      } else {
        double bw = r->cost.bytes / perCall;
        log << std::setw(6) << sig3(bw * 1e-9) << " GB/s";
        if (copyBandwidth > 0)
          log << " " << std::setw(4) << std::setprecision(0)
              << 100 * bw / copyBandwidth << "%";
        log << "  ";
      }
      log << kernelName(*r->kernel);
      if (!r->kernel->location().empty())
        log << "  " << shortLocation(r->kernel->location());
      log << "\n";
    }
  };
  slowest(true);
  slowest(false);
  log << std::flush;
}

static std::string quoted(const std::string &s) {
  return "\"" + jsonEscape(s) + "\"";
}

bool gptc::runtime::writeKernelProfile(
    const std::string &path, const std::string &function,
    const std::vector<KernelTime> &kernels, int64_t steps, double stepSeconds,
    double copyBandwidth, const std::string &device, std::string &error) {
  std::ofstream os(path);
  if (!os) {
    error = "cannot write the profile '" + path + "'";
    return false;
  }
  os << std::setprecision(9);
  os << "{\n \"function\": " << quoted(function)
     << ",\n \"device\": " << quoted(device) << ",\n \"steps\": " << steps
     << ",\n \"step_seconds\": " << stepSeconds
     << ",\n \"copy_bytes_per_second\": " << copyBandwidth
     << ",\n \"small_kernel_bytes\": " << kSmallKernelBytes
     << ",\n \"kernels\": [";
  bool firstRow = true;
  auto operands = [&](const program::Function &f,
                      const google::protobuf::RepeatedField<int32_t> &ids) {
    os << "[";
    for (int i = 0; i < ids.size(); ++i) {
      const program::Value &v = f.values(ids[i]);
      os << (i ? ", " : "")
         << "{\"dtype\": " << quoted(program::DType_Name(v.type().dtype()))
         << ", \"shape\": [";
      for (int d = 0; d < v.type().shape_size(); ++d)
        os << (d ? ", " : "") << v.type().shape(d);
      os << "]}";
    }
    os << "]";
  };
  for (const Row &r : rows(kernels)) {
    const program::Kernel &k = *r.kernel;
    const program::Function &f = *r.time->function;
    os << (firstRow ? "\n" : ",\n") << "  {\"function\": " << quoted(f.name())
       << ", \"index\": " << r.time->kernel
       << ", \"op\": " << quoted(program::OpKind_Name(k.op()))
       << ", \"name\": " << quoted(kernelName(k))
       << ", \"location\": " << quoted(k.location())
       << ", \"class\": " << quoted(className(r.cost.cls))
       << ", \"calls\": " << r.time->calls
       << ", \"seconds\": " << r.time->seconds
       << ", \"bytes\": " << r.cost.bytes << ", \"flops\": " << r.cost.flops;
    if (k.has_matmul())
      os << ", \"transpose_lhs\": "
         << (k.matmul().transpose_lhs() ? "true" : "false")
         << ", \"transpose_rhs\": "
         << (k.matmul().transpose_rhs() ? "true" : "false")
         << ", \"epilogue\": "
         << quoted(program::MatmulParams::Epilogue_Name(k.matmul().epilogue()));
    if (k.has_attention())
      os << ", \"num_heads\": " << k.attention().num_heads();
    os << ",\n   \"inputs\": ";
    operands(f, k.inputs());
    os << ", \"outputs\": ";
    operands(f, k.outputs());
    os << "}";
    firstRow = false;
  }
  os << "\n ]\n}\n";
  if (!os) {
    error = "cannot write the profile '" + path + "'";
    return false;
  }
  return true;
}

void KernelTimes::reset(const program::Function &f) {
  function = &f;
  seconds.assign(f.kernels_size(), 0.0);
  calls.assign(f.kernels_size(), 0);
  bodies.clear();
}

void KernelTimes::add(int index, double s, bool again) {
  if (!function)
    return;
  seconds[index] += s;
  if (!again)
    ++calls[index];
}

double KernelTimes::totalSeconds() const {
  double sum = 0;
  for (double s : seconds)
    sum += s;
  for (const KernelTimes *body : bodies)
    sum += body->totalSeconds();
  return sum;
}

std::vector<KernelTime> KernelTimes::kernels() const {
  std::vector<KernelTime> out;
  for (size_t i = 0; i < seconds.size(); ++i)
    if (calls[i])
      out.push_back({function, static_cast<int>(i), seconds[i], calls[i]});
  for (const KernelTimes *body : bodies) {
    std::vector<KernelTime> inner = body->kernels();
    out.insert(out.end(), inner.begin(), inner.end());
  }
  return out;
}
