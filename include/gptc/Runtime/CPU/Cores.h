//===- Cores.h - The cores a process may use --------------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// How many threads the CPU runtime runs: the cores in the process's
// affinity mask (taskset, numactl, a launcher's binding, a container's
// cpuset), capped by its cgroup's CPU quota (a container's --cpus, a
// SLURM or Kubernetes limit), and shared between the ranks of one host
// that were given the same cores (docs/Runtime.md, "Threads").
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CPU_CORES_H
#define GPTC_RUNTIME_CPU_CORES_H

#include <string>

namespace gptc::cpu {

struct CoreBudget {
  /// CPUs the system has online.
  int online = 1;
  /// CPUs in this process's affinity mask.
  int affinity = 1;
  /// The cgroup's CPU quota in cores (quota / period); 0 where there is
  /// none.
  double quota = 0;
  /// The file the quota was read from ("" where there is none).
  std::string quotaFile;

  /// The threads one process with this budget runs: the affinity mask's
  /// CPUs, at most the quota rounded down (a thread beyond it would be
  /// throttled and hold up every parallel loop), at least one.
  int cores() const;
  /// "2 cores in the affinity mask (of 8 online), cgroup quota 1.5 cores".
  std::string describe() const;
};

/// This process's budget: sched_getaffinity, /proc/self/cgroup and the
/// cgroup v2 `cpu.max` (or v1 `cpu.cfs_quota_us`) of its cgroup and every
/// ancestor (the smallest quota binds).
CoreBudget readCoreBudget();

/// The quota in cores of a cgroup v2 `cpu.max` ("150000 100000" is 1.5,
/// "max 100000" is 0: none); -1 where the text is not one.
double parseCpuMax(const std::string &text);

/// The smallest CPU quota (in cores; 0: none) of the cgroup that
/// `procSelfCgroup` (the text of /proc/self/cgroup) names and its
/// ancestors, under the cgroup file systems mounted at `root` (normally
/// /sys/fs/cgroup); `file` is where it was read.
double cgroupQuota(const std::string &root, const std::string &procSelfCgroup,
                   std::string &file);

} // namespace gptc::cpu

#endif // GPTC_RUNTIME_CPU_CORES_H
