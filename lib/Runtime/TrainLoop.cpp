//===- TrainLoop.cpp - The one training loop of every trainer -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// TrainingRun::train: what a step is around the trainer's own computation,
// for one program per device (Trainer) and a pipeline's stages
// (PipelineTrainer) alike: the step's batch, the watchdog, progress, the
// non-finite policy, evaluation and checkpoint cadence, and the timeline.
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Trainer.h"

#include "gptc/Runtime/CPU/Cores.h"
#include "gptc/Runtime/Npy.h"
#include "gptc/Runtime/Preemption.h"
#include "gptc/Runtime/Progress.h"
#include "gptc/Runtime/Trace.h"
#include "gptc/Runtime/TrainLoop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <random>
#include <sched.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace gptc;
using namespace gptc::runtime;

namespace {
/// `path` with `.rank<r>` before its extension.
std::string rankPath(std::string path, int rank) {
  size_t dot = path.rfind('.'), slash = path.rfind('/');
  std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    path += tag;
  else
    path.insert(dot, tag);
  return path;
}

std::string number(double x) {
  if (std::isnan(x))
    return "NaN";
  std::ostringstream os;
  os << std::setprecision(6) << x;
  return os.str();
}

const char *nonFinite(double x) { return std::isnan(x) ? "NaN" : "infinite"; }
} // namespace

std::string TrainingRun::lastGoodCheckpoint(const std::string &path) const {
  if (checkpointStep < 0)
    return "; no checkpoint of this run was written before";
  return "; the checkpoint of step " + std::to_string(checkpointStep) +
         " in '" + path + "' is as it was (--resume continues from it)";
}

bool TrainingRun::train(const Dataset &data, std::ostream &log,
                        std::string &error) {
  const TrainOptions &o = runOptions();
  Communicator *comm = communicator();
  int rank = comm ? comm->rank() : 0;
  bool writer = rank == 0;
  int64_t T = o.seqLen, rows = batchRows();
  int64_t first = step, last = o.steps;
  int64_t stop = o.stopAfter >= 0 ? std::min(o.stopAfter, last) : last;
  // The step's whole batch: every rank draws the same one (the trainer
  // takes its rows). Batches depend on the data seed and the step only, so
  // that a resumed run sees the batches an uninterrupted one would.
  Tensor tokens(program::I32, {rows, T}), labels(program::I32, {rows, T});
  if (!o.dumpDir.empty() &&
      !prepareOutputDirectory(o.dumpDir, "--dump-dir", error))
    return false;
  Progress progress(log, writer, first, stop, last, rows * T, o.logInterval,
                    o.liveProgress, hasLossScale());
  if (!o.dumpDir.empty() &&
      !progress.openTable(o.dumpDir + "/steps.tsv", error))
    return false;
  // The timeline (--trace): the steps, evaluations and checkpoints on track
  // 0, the trainer's kernels and (pipelines) chunks and waits on others.
  std::unique_ptr<TraceRecorder> trace;
  if (!o.tracePath.empty())
    trace = std::make_unique<TraceRecorder>(rank);
  struct EndSteps {
    TrainingRun &run;
    bool begun = false;
    ~EndSteps() {
      if (begun)
        run.endSteps();
    }
  } end{*this};
  if (!beginSteps(first, stop, trace.get(), error))
    return false;
  end.begun = true;
  // The watchdog: ten minutes in the first step (warm-up), then five times
  // the slowest step, at least --collective-timeout.
  double slowest = 0;
  auto armWatchdog = [&] {
    if (comm && o.collectiveTimeout > 0)
      comm->setWatchdog(slowest > 0 ? std::max(o.collectiveTimeout, 5 * slowest)
                                    : std::max(o.collectiveTimeout, 600.0));
  };
  armWatchdog();
  if (comm)
    comm->setOverlapCollectives(o.overlapCollectives);
  stoppedBySignal = 0;
  auto minutesSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
               .count() /
           60;
  };
  auto lastCheckpoint = std::chrono::steady_clock::now();
  auto checkpoint = [&](int64_t stepsDone) {
    double start = TraceRecorder::now();
    if (!saveCheckpoint(o.checkpointPath, stepsDone, error)) {
      error += lastGoodCheckpoint(o.checkpointPath);
      return false;
    }
    lastCheckpoint = std::chrono::steady_clock::now();
    if (trace)
      trace->slice("checkpoint", "checkpoint", start, TraceRecorder::now(), 0);
    return true;
  };
  for (; step < stop; ++step) {
    std::mt19937_64 rng(o.dataSeed * 1000003 + step);
    data.sampleTrain(rng, rows, T, tokens.data<int32_t>(),
                     labels.data<int32_t>());
    if (writer && !o.dumpDir.empty()) {
      std::string prefix = o.dumpDir + "/batch." + std::to_string(step);
      if (!writeNpy(prefix + ".tokens.npy", tokens, error) ||
          !writeNpy(prefix + ".labels.npy", labels, error))
        return false;
    }
    double stepStart = TraceRecorder::now();
    StepResult r;
    if (!runStep(step, tokens, labels, r, error))
      return false;
    if (trace)
      trace->slice("step " + std::to_string(step + 1), "step", stepStart,
                   TraceRecorder::now(), 0);
    slowest = std::max(slowest, (TraceRecorder::now() - stepStart) * 1e-6);
    armWatchdog();
    // A skipped step's norm may be infinite (fp16's overflow); otherwise
    // the loss and the gradient norm must be finite. Without a loss scale
    // a program skips only a non-finite step (its skip flag).
    bool finite = std::isfinite(r.loss) &&
                  (hasLossScale() ? r.skipped || std::isfinite(r.norm)
                                  : !r.skipped && std::isfinite(r.norm));
    bool policySkip = o.skipNonFinite && r.skipped &&
                      (!hasLossScale() || !std::isfinite(r.loss));
    if (!finite && !policySkip) {
      error =
          (std::isfinite(r.loss)
               ? std::string("the gradients are ") + nonFinite(r.norm) +
                     " at step " + std::to_string(step + 1) + " (loss " +
                     number(r.loss) + ", "
               : std::string("the loss is ") + nonFinite(r.loss) + " at step " +
                     std::to_string(step + 1) + " (") +
          "gradient norm " + number(r.norm) + ", learning rate " +
          number(r.lr) + "); " +
          (r.skipped ? std::string("the update was not applied; ")
                     : std::string()) +
          (checkpointStep >= 0
               ? "the last good state is the checkpoint of step " +
                     std::to_string(checkpointStep) + " in '" +
                     o.checkpointPath + "' (--resume)"
               : std::string("no checkpoint was written before it")) +
          (canSkipNonFinite() ? "; nan_policy SKIP would skip such steps" : "");
      return false;
    }
    if (policySkip) {
      if (++nonFiniteInARow >= kMaxNonFiniteInARow) {
        error = std::to_string(nonFiniteInARow) +
                " steps in a row had NaN or infinite gradients (the last, "
                "step " +
                std::to_string(step + 1) +
                "): the run has diverged; nan_policy SKIP gives up";
        return false;
      }
    } else {
      nonFiniteInARow = 0;
    }
    if (std::isfinite(r.loss))
      lastLoss = r.loss;
    progress.step({step, r.loss, r.norm, r.lr, r.skipped, r.lossScale});
    bool final = step + 1 == stop;
    if (o.evalInterval > 0 && ((step + 1) % o.evalInterval == 0 || final)) {
      double val, start = TraceRecorder::now();
      if (!evaluate(data, val, error))
        return false;
      if (trace)
        trace->slice("evaluate", "evaluate", start, TraceRecorder::now(), 0);
      progress.validation(step, val);
      if (writer && !o.dumpDir.empty() &&
          !appendValidation(o.dumpDir, step + 1, val, error))
        return false;
    }
    // What every rank does after this step, agreed: stop (a signal reached
    // some rank) and checkpoint by the clock (rank 0's decides).
    double agreed[2] = {0, 0};
    if (o.stopOnSignal)
      agreed[0] = preemptionSignal();
    if (o.checkpointMinutes > 0 && writer && !final &&
        minutesSince(lastCheckpoint) >= o.checkpointMinutes)
      agreed[1] = 1;
    if (comm && comm->size() > 1 &&
        (o.stopOnSignal || o.checkpointMinutes > 0) &&
        !comm->allReduceMax(agreed, 2, program::F64, {comm->size()}, {0},
                            error))
      return false;
    if (agreed[0] > 0 && !final) {
      // Stopped with the steps done so far; the caller checkpoints them.
      stoppedBySignal = static_cast<int>(agreed[0]);
      ++step;
      break;
    }
    bool byInterval =
        o.checkpointInterval > 0 && (step + 1) % o.checkpointInterval == 0;
    if ((byInterval || agreed[1] > 0) && !final && !o.checkpointPath.empty() &&
        !checkpoint(step + 1))
      return false; // the checkpoint records the steps done, this one too
  }
  progress.finish();
  if (trace &&
      !trace->write(comm && comm->size() > 1 ? rankPath(o.tracePath, rank)
                                             : o.tracePath,
                    error))
    return false;
  progress.summary();
  return finishSteps(log, progress, error);
}

bool runtime::appendValidation(const std::string &dir, int64_t step,
                               double loss, std::string &error) {
  std::string path = dir + "/validation.tsv";
  struct stat st;
  bool fresh = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
  std::ofstream out(path, std::ios::app);
  if (fresh)
    out << "step\tloss\n";
  out << step << "\t" << std::setprecision(9) << loss << "\n";
  out.flush();
  if (!out) {
    error = "--dump-dir: cannot write '" + path + "'";
    return false;
  }
  return true;
}

bool runtime::prepareOutputDirectory(const std::string &dir,
                                     const std::string &flag,
                                     std::string &error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    error =
        flag + ": cannot create the directory '" + dir + "': " + ec.message();
    return false;
  }
  if (int err = writeProbe(dir)) {
    error = flag + ": cannot write into '" + dir + "': " + std::strerror(err);
    return false;
  }
  return true;
}

bool runtime::checkOutputFile(const std::string &path, const std::string &flag,
                              std::string &error) {
  struct stat st;
  bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    error = flag + ": '" + path + "' is a directory, not a file";
    return false;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = flag + ": cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  ::close(fd);
  if (!existed)
    ::unlink(path.c_str());
  return true;
}

std::string runtime::shareCores(Communicator *comm, std::string &error) {
  cpu::CoreBudget budget = cpu::readCoreBudget();
  // Per rank: a hash of its host name and its affinity mask (the first
  // 1024 CPUs).
  constexpr int kMaskWords = 16, kWords = 1 + kMaskWords;
  int64_t mine[kWords] = {};
  char host[256] = "?";
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "?");
  host[sizeof host - 1] = 0;
  mine[0] = static_cast<int64_t>(std::hash<std::string>()(host) >> 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < kMaskWords * 64 && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        mine[1 + c / 64] |= int64_t(1) << (c % 64);
  int n = comm ? comm->size() : 1;
  std::vector<int64_t> all(static_cast<size_t>(n) * kWords);
  if (n > 1) {
    if (!comm->allGather(mine, all.data(), kWords, program::I64, {n}, {0},
                         error))
      return "";
  } else {
    std::copy(mine, mine + kWords, all.begin());
  }
  // The ranks of this host, and those of them given this rank's cores.
  int onHost = 0, sameMask = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t *w = all.data() + static_cast<size_t>(r) * kWords;
    if (w[0] != mine[0])
      continue;
    ++onHost;
    sameMask += std::equal(w + 1, w + kWords, mine + 1);
  }
  int threads = std::max(1, budget.affinity / std::max(1, sameMask));
  if (budget.quota > 0)
    threads =
        std::min(threads, std::max(1, static_cast<int>(std::floor(
                                          budget.quota / onHost + 1e-9))));
  // How idle threads wait, as libgomp read it at its start (ThreadDefaults.cpp
  // bounds the spin where the user did not choose). A value libgomp would
  // silently ignore or misread is the user's error.
  if (const char *policy = std::getenv("OMP_WAIT_POLICY")) {
    std::string p = policy;
    std::transform(p.begin(), p.end(), p.begin(), ::tolower);
    if (p != "active" && p != "passive") {
      error = std::string("OMP_WAIT_POLICY='") + policy +
              "' is neither ACTIVE nor PASSIVE (how idle OpenMP threads "
              "wait)";
      return "";
    }
  }
  if (const char *spin = std::getenv("GOMP_SPINCOUNT")) {
    std::string text = spin, lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    size_t digits = text.find_first_not_of("0123456789");
    bool number =
        digits != 0 && !text.empty() &&
        (digits == std::string::npos ||
         (digits + 1 == text.size() &&
          std::string("kKmMgGtT").find(text[digits]) != std::string::npos));
    if (!number && lower != "infinite" && lower != "infinity") {
      error = "GOMP_SPINCOUNT='" + text +
              "' is not a spin count (a count >= 0, with k, M, G or T, or "
              "'infinite')";
      return "";
    }
  }
  std::string waiting;
  if (const char *policy = std::getenv("OMP_WAIT_POLICY"))
    waiting = std::string("; OMP_WAIT_POLICY=") + policy;
  else if (const char *spin = std::getenv("GOMP_SPINCOUNT"))
    waiting = std::string("; idle threads spin ") + spin +
              " times, then sleep (GOMP_SPINCOUNT)";
  else
    waiting = "; idle threads spin as libgomp's default";
  std::ostringstream line;
  if (const char *omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    // The user's choice (its first level: "4,2" runs 4), up to this
    // rank's share of the cores: more threads than cores only wait for
    // each other, and a count the system cannot start fails in libgomp.
    std::string text = omp;
    std::string first = text.substr(0, text.find(','));
    char *end = nullptr;
    errno = 0;
    long long asked = std::strtoll(first.c_str(), &end, 10);
    if (first.empty() || *end || errno || asked < 1 ||
        first.find_first_not_of("0123456789") != std::string::npos) {
      error = "OMP_NUM_THREADS='" + text +
              "' is not a thread count (a number >= 1; unset it to use "
              "every core gptc may)";
      return "";
    }
    if (asked > threads) {
      cpu::setNumThreads(threads);
      line << threads << (threads == 1 ? " thread" : " threads")
           << (n > 1 ? " per rank" : "") << ": OMP_NUM_THREADS=" << omp
           << " lowered to the cores this rank may use (" << budget.describe()
           << (sameMask > 1
                   ? ", shared by " + std::to_string(sameMask) + " ranks"
                   : std::string()) +
                  ")"
           << waiting;
      return line.str();
    }
    cpu::setNumThreads(static_cast<int>(asked));
    line << asked << (asked == 1 ? " thread" : " threads")
         << (n > 1 ? " per rank" : "") << ": OMP_NUM_THREADS=" << omp
         << waiting;
    return line.str();
  }
  cpu::setNumThreads(threads);
  line << threads << (threads == 1 ? " thread" : " threads")
       << (n > 1 ? " per rank" : "") << ": " << budget.describe();
  if (sameMask > 1)
    line << ", shared by " << sameMask << " ranks on " << host;
  else if (budget.quota > 0 && onHost > 1)
    line << " shared by " << onHost << " ranks on " << host;
  line << waiting;
  return line.str();
}
