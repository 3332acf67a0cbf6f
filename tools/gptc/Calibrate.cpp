//===- Calibrate.cpp - gptc calibrate --------------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// `[mpirun -np N] gptc calibrate [-o FILE]`: measures this machine as
// `gptc plan` sees it, one device per MPI process (the processes share the
// cores as `gptc train`'s do): each process's GEMM FLOP/s in fp32 and bf16
// at the shapes of a training step, its memory bandwidth, and the
// processes' all-reduce bus bandwidth and latency; writes a hardware
// description (docs/Planning.md). All processes measure at once, as they
// train at once.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "gptc/Frontend/InputFile.h"
#include "gptc/Runtime/CPU/Gemm.h"
#include "gptc/Runtime/CPU/Kernels.h"
#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/TrainLoop.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

using namespace mlir;
using namespace mlir::gptc;
namespace rt = ::gptc::runtime;
namespace cpu = ::gptc::cpu;

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The best of `repeats` timings of `f` (after one warm-up run).
template <typename F>
static double best(int repeats, F &&f) {
  f();
  double t = 1e30;
  for (int r = 0; r < repeats; ++r) {
    double start = now();
    f();
    t = std::min(t, now() - start);
  }
  return t;
}

/// FLOP/s of y[m, n] = x[m, k] W[n, k]^T, the products of a training step.
template <typename T>
static double gemmRate(int64_t m, int64_t n, int64_t k, bool bf16) {
  cpu::GemmProblem p = cpu::linearProblem(m, n, k, /*bias=*/false);
  p.bf16 = bf16;
  std::vector<T> a(m * k), b(n * k), c(m * n);
  double t = best(5, [&] { cpu::gemm(p, a.data(), b.data(), c.data()); });
  return 2.0 * double(m) * double(n) * double(k) / t;
}

/// Bytes/s of a copy over buffers far larger than the caches, on this
/// process's threads (read + write counted).
static double memoryBandwidth(int threads) {
  const size_t n = size_t(32) << 20; // 128 MiB per buffer
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  double t = best(3, [&] {
    std::vector<std::thread> pool;
    size_t chunk = (n + threads - 1) / threads;
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] {
        size_t begin = std::min(n, i * chunk), end = std::min(n, begin + chunk);
        std::memcpy(b.data() + begin, a.data() + begin,
                    (end - begin) * sizeof(float));
      });
    for (std::thread &th : pool)
      th.join();
  });
  return 2.0 * double(n) * sizeof(float) / t;
}

static std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos)
        return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "CPU";
}

int mlir::gptc::runCalibrate(const std::string &outputPath) {
  auto comm = rt::createMpiCommunicator(nullptr, nullptr);
  int ranks = comm->size();
  bool leader = comm->rank() == 0;
  std::string error;
  std::string threadsLine = rt::shareCores(comm.get(), error);
  if (threadsLine.empty()) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  int threads = cpu::numThreads();
  std::vector<int64_t> grid{ranks}, axes{0};
  auto mean = [&](double x) {
    if (ranks > 1 &&
        !comm->allReduceSum(&x, 1, ::gptc::program::F64, grid, axes, error)) {
      llvm::errs() << "gptc: error: " << error << "\n";
      comm->abort(1);
    }
    return x / ranks;
  };
  // A small and a large product: the rate R F / (F + H) through both
  // points gives the large-GEMM rate R and the half-rate FLOPs H (from
  // fp32; bf16 takes the same H).
  auto flops = [](double m, double n, double k) { return 2 * m * n * k; };
  const double small = flops(128, 256, 256), large = flops(2048, 1024, 1024);
  double fp32Small = mean(gemmRate<float>(128, 256, 256, false));
  double fp32Large = mean(gemmRate<float>(2048, 1024, 1024, false));
  double bf16Large = mean(gemmRate<cpu::BFloat16>(2048, 1024, 1024, true));
  double halfFlops = 0;
  if (fp32Large > fp32Small)
    halfFlops =
        (fp32Large - fp32Small) / (fp32Small / small - fp32Large / large);
  double fp32 = fp32Large * (large + halfFlops) / large;
  double bf16 = bf16Large * (large + halfFlops) / large;
  double bandwidth = mean(memoryBandwidth(threads));
  // The processes' ring all-reduce: bus bandwidth from 64 MiB, latency
  // from one value.
  double busBandwidth = 0, latency = 0;
  if (ranks > 1) {
    std::vector<float> big(size_t(16) << 20, 1.0f);
    double t = best(3, [&] {
      if (!comm->allReduceSum(big.data(), int64_t(big.size()),
                              ::gptc::program::F32, grid, axes, error))
        comm->abort(1);
    });
    double bytes = double(big.size()) * sizeof(float);
    busBandwidth = 2.0 * (ranks - 1) / ranks * bytes / t;
    double one = 0;
    const int calls = 200;
    double small = best(3, [&] {
      for (int i = 0; i < calls; ++i)
        if (!comm->allReduceSum(&one, 1, ::gptc::program::F64, grid, axes,
                                error))
          comm->abort(1);
    });
    latency = small / calls / (2.0 * (ranks - 1));
  }
  if (!leader)
    return 0;
  int64_t memory = int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  std::unique_ptr<OutputFile> out =
      OutputFile::open(outputPath.empty() ? "-" : outputPath, error);
  if (!out) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  llvm::raw_ostream &os = out->os();
  os << "# Measured by gptc calibrate on " << ranks << " process"
     << (ranks > 1 ? "es" : "") << " x " << threads << " thread"
     << (threads > 1 ? "s" : "") << " (" << threadsLine << "): a device is\n"
     << "# one process. GEMMs of 128 x 256 x 256 and 2048 x 1024 x 1024 "
        "(oneDNN), a\n"
     << "# copy of 128 MiB, an all-reduce of 64 MiB and of one value; each "
        "the\n"
     << "# best of its repeats, averaged over the processes.\n";
  os << "name: \"cpu-" << ranks << "x" << threads << "\"\n";
  os << "devices_per_node: " << ranks << "\n";
  os << "nodes: 1\n";
  os << "device {\n";
  os << "  name: \"" << threads << "-core process of " << cpuModel() << "\"\n";
  os << "  memory_bytes: " << memory / ranks << "\n";
  os << llvm::format("  peak_flops_fp32: %.4g\n", fp32);
  os << llvm::format("  peak_flops_bf16: %.4g\n", bf16);
  os << "  # The measured large-GEMM rate is the peak a plan is priced at;\n"
     << llvm::format("  # fp32: %.4g FLOP/s at 128 x 256 x 256, %.4g at 2048 x "
                     "1024 x 1024.\n",
                     fp32Small, fp32Large);
  os << "  gemm_efficiency: 1\n";
  os << llvm::format("  gemm_half_flops: %.4g\n", halfFlops);
  os << llvm::format("  memory_bandwidth: %.4g\n", bandwidth);
  os << "}\n";
  if (ranks > 1)
    os << llvm::format("intra_node { bandwidth: %.4g latency: %.4g }\n",
                       busBandwidth, latency);
  else
    os << "# One process: no link measured (run under mpirun -np N).\n"
       << "intra_node { bandwidth: 1e12 }\n";
  if (!out->finish(error)) {
    llvm::errs() << "gptc: error: " << error << "\n";
    return 1;
  }
  return 0;
}
