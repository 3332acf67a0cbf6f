//===- Session.h - Processes, backend, trainer of a run ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `gptc train`, `gptc-runtime` and the C API do between an artifact
// and its first step, in one place: start the processes of the mesh (MPI),
// pick the backend each process runs on (the CPU's, the residency checker
// around it, or the GPU its rank on the node picks), and make the trainer
// the artifact asks for (one program per device, or a pipeline's stages).
// The callers print the errors in their own voice. It links the CUDA
// runtime where the build has it, so it sits above both backends.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SESSION_H
#define GPTC_RUNTIME_SESSION_H

#include "gptc/Runtime/Communicator.h"
#include "gptc/Runtime/Trainer.h"

#include <map>
#include <memory>
#include <string>

namespace gptc::runtime {

/// Where a process runs its program.
struct DeviceOptions {
  /// A GPU (one per process, by its rank on the node: several pipeline
  /// stages may share one, a tensor axis needs one each) instead of the
  /// CPU.
  bool cuda = false;
  /// The CPU's executor behind the residency checker (`gptc train
  /// --check-residency`); ignored on a GPU.
  bool checkResidency = false;
};

/// The processes of a run on `devices` devices: an MPI communicator when
/// there are several, when `mpi` asks for one (a pipeline always runs
/// under MPI) or when an MPI launcher started this process (so that a
/// size that does not match is reported, not run N times); otherwise null
/// (one process). Fails when MPI does not start or runs another number of
/// processes than `devices` (`error` names `mpirun -np <devices>`; the
/// communicator is kept so that the caller can print once and abort all).
/// `devices` 0 checks no count (the trainer checks it against the
/// artifact's mesh).
bool startProcesses(int64_t devices, bool mpi,
                    std::unique_ptr<Communicator> &comm, std::string &error);

/// This process's run of `program`: its backend (null for the CPU's own
/// executor, the residency checker around it, or the GPU its rank on the
/// node picks), the trainer the program needs (its pipeline's stages when
/// it has a pipeline plan, else one program per device, with `initial` as
/// the parameters' initial values: an imported model's weights; a pipeline
/// takes none), then resumed from `options.checkpointPath` (`resume`) or
/// initialized (every parameter from its init, the optimizer state zero).
/// Null with `error` set.
std::unique_ptr<TrainingRun>
openTrainingRun(const program::Program &program, const TrainOptions &options,
                const DeviceOptions &device, Communicator *comm,
                std::map<std::string, std::string> initial, bool resume,
                std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_SESSION_H
