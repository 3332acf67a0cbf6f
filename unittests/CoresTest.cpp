//===- CoresTest.cpp - The cores a process may use -------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/CPU/Cores.h"
#include "gptc/Runtime/Grid.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>
#include <vector>

using namespace gptc::cpu;
namespace fs = std::filesystem;

TEST(Cores, CpuMaxIsQuotaOverPeriod) {
  EXPECT_DOUBLE_EQ(parseCpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(parseCpuMax("200000 100000"), 2.0);
  EXPECT_EQ(parseCpuMax("max 100000\n"), 0);
  EXPECT_EQ(parseCpuMax(""), -1);
  EXPECT_EQ(parseCpuMax("max"), -1);
  EXPECT_EQ(parseCpuMax("12x 100000"), -1);
  EXPECT_EQ(parseCpuMax("-5 100000"), -1);
  EXPECT_EQ(parseCpuMax("100000 0"), -1);
}

TEST(Cores, BudgetIsTheMaskCappedByTheQuotaRoundedDown) {
  CoreBudget b;
  b.online = 8;
  b.affinity = 4;
  EXPECT_EQ(b.cores(), 4);
  b.quota = 2.5;
  EXPECT_EQ(b.cores(), 2);
  b.quota = 0.5; // a thread at least
  EXPECT_EQ(b.cores(), 1);
  b.quota = 16;
  EXPECT_EQ(b.cores(), 4);
  EXPECT_EQ(b.describe(), "4 cores in the affinity mask (of 8 online), "
                          "cgroup quota 16 cores");
  b.affinity = 8;
  b.quota = 0;
  EXPECT_EQ(b.describe(), "8 cores in the affinity mask");
}

namespace {
struct Tree {
  fs::path root;
  Tree() {
    root = fs::temp_directory_path() /
           ("gptc-cores-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Tree() { fs::remove_all(root); }
  void write(const std::string &rel, const std::string &text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
};
} // namespace

TEST(Cores, CgroupV2QuotaOfTheGroupOrAnAncestorTheSmallestBinds) {
  Tree t;
  std::string file;
  // No cpu.max anywhere: no quota.
  EXPECT_EQ(cgroupQuota(t.root, "0::/job/step\n", file), 0);
  EXPECT_EQ(file, "");
  t.write("job/step/cpu.max", "max 100000\n");
  t.write("job/cpu.max", "300000 100000\n");
  EXPECT_DOUBLE_EQ(cgroupQuota(t.root, "0::/job/step\n", file), 3);
  EXPECT_EQ(file, (t.root / "job/cpu.max").string());
  t.write("job/step/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(cgroupQuota(t.root, "0::/job/step\n", file), 1.5);
  EXPECT_EQ(file, (t.root / "job/step/cpu.max").string());
  // The root group.
  t.write("cpu.max", "100000 100000\n");
  EXPECT_DOUBLE_EQ(cgroupQuota(t.root, "0::/\n", file), 1);
}

TEST(Cores, CgroupV1QuotaUnderTheCpuController) {
  Tree t;
  std::string file;
  std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n";
  t.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  t.write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroupQuota(t.root, self, file), 0);
  t.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
  EXPECT_DOUBLE_EQ(cgroupQuota(t.root, self, file), 2.5);
  // Only the cpu controller's hierarchy counts.
  EXPECT_EQ(cgroupQuota(t.root, "12:memory:/docker/abc\n", file), 0);
  // Lines that are not cgroup entries are skipped.
  EXPECT_EQ(cgroupQuota(t.root, "garbage\n::\n0::relative\n", file), 0);
}

TEST(Cores, ThisProcessHasAtLeastOneCore) {
  CoreBudget b = readCoreBudget();
  EXPECT_GE(b.online, 1);
  EXPECT_GE(b.affinity, 1);
  EXPECT_LE(b.affinity, b.online);
  EXPECT_GE(b.cores(), 1);
  EXPECT_LE(b.cores(), b.affinity);
}

//===----------------------------------------------------------------------===//
// Launchers: which rank a process is, before MPI starts
//===----------------------------------------------------------------------===//

namespace {
/// Sets launcher variables for one test and restores the environment.
class LauncherEnvironment {
public:
  LauncherEnvironment() {
    for (const char *name : kNames) {
      const char *v = std::getenv(name);
      saved.emplace_back(name, v ? std::optional<std::string>(v)
                                 : std::optional<std::string>());
      ::unsetenv(name);
    }
  }
  ~LauncherEnvironment() {
    for (auto &[name, value] : saved) {
      if (value)
        ::setenv(name, value->c_str(), 1);
      else
        ::unsetenv(name);
    }
  }
  void set(const char *name, const char *value) { ::setenv(name, value, 1); }

private:
  static constexpr const char *kNames[] = {
      "PMI_RANK",        "OMPI_COMM_WORLD_RANK",
      "PMIX_RANK",       "SLURM_PROCID",
      "MPI_LOCALRANKID", "PMIX_LOCAL_RANK",
      "SLURM_LOCALID",   "OMPI_COMM_WORLD_LOCAL_RANK",
  };
  std::vector<std::pair<const char *, std::optional<std::string>>> saved;
};
} // namespace

TEST(Launchers, NoLauncherNoRank) {
  LauncherEnvironment env;
  EXPECT_EQ(gptc::runtime::launcherRank(), -1);
  EXPECT_EQ(gptc::runtime::launcherLocalRank(), -1);
  // The communicator's rank, modulo the GPUs.
  EXPECT_EQ(gptc::runtime::localDeviceIndex(5, 4), 1);
  EXPECT_EQ(gptc::runtime::localDeviceIndex(5, 0), 0);
}

TEST(Launchers, SrunThroughPmi) {
  LauncherEnvironment env;
  env.set("SLURM_PROCID", "13");
  env.set("SLURM_LOCALID", "5");
  EXPECT_EQ(gptc::runtime::launcherRank(), 13);
  EXPECT_EQ(gptc::runtime::launcherLocalRank(), 5);
  // The host's 8 GPUs: the local rank picks, not the global one.
  EXPECT_EQ(gptc::runtime::localDeviceIndex(13, 8), 5);
  // MPICH's own variables come first where both are set.
  env.set("PMI_RANK", "2");
  env.set("MPI_LOCALRANKID", "1");
  EXPECT_EQ(gptc::runtime::launcherRank(), 2);
  EXPECT_EQ(gptc::runtime::localDeviceIndex(13, 8), 1);
}

TEST(Launchers, OpenMpiAndPmix) {
  LauncherEnvironment env;
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "3");
  EXPECT_EQ(gptc::runtime::launcherRank(), 3);
  EXPECT_EQ(gptc::runtime::localDeviceIndex(3, 2), 1);
  LauncherEnvironment again;
  again.set("PMIX_RANK", "7");
  again.set("PMIX_LOCAL_RANK", "0");
  EXPECT_EQ(gptc::runtime::launcherRank(), 7);
  EXPECT_EQ(gptc::runtime::launcherLocalRank(), 0);
}

TEST(Launchers, MalformedValuesAreNotRanks) {
  LauncherEnvironment env;
  for (const char *bad : {"", "-1", "1a", " 2", "0x3", "99999999999999"}) {
    env.set("PMI_RANK", bad);
    env.set("SLURM_LOCALID", bad);
    EXPECT_EQ(gptc::runtime::launcherRank(), -1) << "'" << bad << "'";
    EXPECT_EQ(gptc::runtime::launcherLocalRank(), -1) << "'" << bad << "'";
  }
  // A malformed first variable gives way to a later one.
  env.set("SLURM_PROCID", "4");
  EXPECT_EQ(gptc::runtime::launcherRank(), 4);
}
