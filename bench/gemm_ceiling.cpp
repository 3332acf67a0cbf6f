//===- gemm_ceiling.cpp - oneDNN's large-GEMM rate on this CPU -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
//   gptc-gemm-ceiling [--size N] [--repeats R]
//
// The ceiling the benchmarks report gptc's achieved FLOP/s against: the
// best of R timings of an N^3 matmul through the oneDNN primitive gptc's
// runtime uses, in fp32 and in bf16 (bf16 inputs, fp32 accumulation and
// output: AMX or AVX512-BF16 where the CPU has them). Prints one line per
// precision: "fp32 <GFLOP/s> <implementation>".
//
//===----------------------------------------------------------------------===//

#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dnnl;

static double rate(memory::data_type in, int64_t n, int repeats,
                   std::string &impl) {
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  memory::desc a({n, n}, in, memory::format_tag::ab);
  memory::desc b({n, n}, in, memory::format_tag::ab);
  memory::desc c({n, n}, memory::data_type::f32, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
  impl = pd.impl_info_str();
  matmul mm(pd);
  memory am(a, eng), bm(b, eng), cm(c, eng);
  std::memset(am.get_data_handle(), 0, a.get_size());
  std::memset(bm.get_data_handle(), 0, b.get_size());
  double best = 0;
  for (int r = 0; r < repeats + 1; ++r) {
    auto start = std::chrono::steady_clock::now();
    mm.execute(
        s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    s.wait();
    double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0)
      best = std::max(best, 2.0 * n * n * n / t);
  }
  return best;
}

int main(int argc, char **argv) {
  int64_t n = 2048;
  int repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--size"))
      n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
  }
  std::string impl;
  double f32 = rate(memory::data_type::f32, n, repeats, impl);
  std::printf("fp32 %.1f %s\n", f32 / 1e9, impl.c_str());
  double bf16 = rate(memory::data_type::bf16, n, repeats, impl);
  std::printf("bf16 %.1f %s\n", bf16 / 1e9, impl.c_str());
  return 0;
}
