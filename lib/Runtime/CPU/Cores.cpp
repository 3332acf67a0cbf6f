//===- Cores.cpp - The cores a process may use ------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Cores.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <unistd.h>

using namespace gptc::cpu;

int CoreBudget::cores() const {
  int n = std::max(1, affinity);
  if (quota > 0)
    n = std::min(n, std::max(1, static_cast<int>(std::floor(quota + 1e-9))));
  return n;
}

std::string CoreBudget::describe() const {
  std::ostringstream os;
  os << affinity << (affinity == 1 ? " core" : " cores")
     << " in the affinity mask";
  if (affinity != online)
    os << " (of " << online << " online)";
  if (quota > 0) {
    os << ", cgroup quota ";
    os.precision(3);
    os << quota << (quota == 1 ? " core" : " cores");
  }
  return os.str();
}

double gptc::cpu::parseCpuMax(const std::string &text) {
  std::istringstream is(text);
  std::string quota;
  long long period = 0;
  if (!(is >> quota >> period) || period <= 0)
    return -1;
  if (quota == "max")
    return 0;
  char *end = nullptr;
  long long q = std::strtoll(quota.c_str(), &end, 10);
  if (*end || q <= 0)
    return -1;
  return static_cast<double>(q) / static_cast<double>(period);
}

static std::string readSmallFile(const std::string &path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text, '\0');
  return in || in.eof() ? text : std::string();
}

/// `dir` and each of its parents up to (not beyond) `top`.
template <typename F>
static void forEachAncestor(const std::string &top, std::string dir, F f) {
  while (true) {
    f(dir);
    if (dir.size() <= top.size())
      return;
    size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash < top.size())
      dir = top;
    else
      dir.resize(slash);
  }
}

double gptc::cpu::cgroupQuota(const std::string &root,
                              const std::string &procSelfCgroup,
                              std::string &file) {
  double best = 0;
  file.clear();
  auto consider = [&](double cores, const std::string &from) {
    if (cores > 0 && (best == 0 || cores < best)) {
      best = cores;
      file = from;
    }
  };
  std::istringstream lines(procSelfCgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-ID:controllers:path"
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path.empty() || path[0] != '/')
      continue;
    if (path == "/")
      path.clear();
    if (controllers.empty()) {
      // cgroup v2: one hierarchy at root.
      forEachAncestor(root, root + path, [&](const std::string &dir) {
        std::string f = dir + "/cpu.max";
        consider(parseCpuMax(readSmallFile(f)), f);
      });
      continue;
    }
    // cgroup v1: the hierarchy holding the cpu controller.
    std::istringstream names(controllers);
    std::string name;
    bool cpu = false;
    while (std::getline(names, name, ','))
      cpu |= name == "cpu";
    if (!cpu)
      continue;
    for (const std::string &mount :
         {root + "/cpu,cpuacct", root + "/cpu", root + "/" + controllers}) {
      forEachAncestor(mount, mount + path, [&](const std::string &dir) {
        std::string q = readSmallFile(dir + "/cpu.cfs_quota_us");
        std::string p = readSmallFile(dir + "/cpu.cfs_period_us");
        if (q.empty() || p.empty())
          return;
        long long quota = std::atoll(q.c_str()), period = std::atoll(p.c_str());
        if (quota > 0 && period > 0)
          consider(static_cast<double>(quota) / static_cast<double>(period),
                   dir + "/cpu.cfs_quota_us");
      });
    }
  }
  return best;
}

CoreBudget gptc::cpu::readCoreBudget() {
  CoreBudget budget;
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  budget.online = online > 0 ? static_cast<int>(online) : 1;
  budget.affinity = budget.online;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    budget.affinity = CPU_COUNT(&set);
  budget.quota = cgroupQuota(
      "/sys/fs/cgroup", readSmallFile("/proc/self/cgroup"), budget.quotaFile);
  return budget;
}
