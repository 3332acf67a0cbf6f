//===- Session.cpp - Processes, backend, trainer of a run -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Session.h"

#include "gptc/Runtime/Backend.h"
#include "gptc/Runtime/Grid.h"
#include "gptc/Runtime/PipelineTrainer.h"

#ifdef GPTC_HAVE_CUDA
#include "gptc/Runtime/CUDA/CudaBackend.h"
#endif

namespace gptc::runtime {

bool startProcesses(int64_t devices, bool mpi,
                    std::unique_ptr<Communicator> &comm, std::string &error) {
  comm.reset();
  if (devices <= 1 && !mpi && !launchedByMpi())
    return true;
  comm = createMpiCommunicator(nullptr, nullptr);
  if (!comm) {
    error = "MPI did not start";
    return false;
  }
  if (devices > 0 && comm->size() != devices) {
    error = "the mesh has " + std::to_string(devices) + " devices but " +
            std::to_string(comm->size()) +
            " processes run it: use mpirun -np " + std::to_string(devices);
    return false;
  }
  return true;
}

/// The backend `device` asks for: null for the CPU's own executor, or
/// null with `error` set when it cannot start.
static std::unique_ptr<Backend> createBackend(const program::Program &program,
                                              const DeviceOptions &device,
                                              Communicator *comm,
                                              std::string &error) {
  error.clear();
  if (device.cuda) {
#ifdef GPTC_HAVE_CUDA
    int gpu = comm ? localDeviceIndex(comm->rank(), cudaDeviceCount()) : 0;
    // A communicator of one process makes no NCCL communicator.
    return createCudaBackend(program, gpu, error,
                             comm && comm->size() > 1 ? comm : nullptr);
#else
    error = "--device cuda: this build has no CUDA runtime";
    return nullptr;
#endif
  }
  if (!device.checkResidency)
    return nullptr;
  std::unique_ptr<Backend> cpu = createCpuBackend(program, error);
  return cpu ? createResidencyCheckingBackend(std::move(cpu)) : nullptr;
}

std::unique_ptr<TrainingRun>
openTrainingRun(const program::Program &program, const TrainOptions &options,
                const DeviceOptions &device, Communicator *comm,
                std::map<std::string, std::string> initial, bool resume,
                std::string &error) {
  std::unique_ptr<Backend> backend =
      createBackend(program, device, comm, error);
  if (!backend && !error.empty())
    return nullptr;
  std::unique_ptr<TrainingRun> run;
  if (program.has_pipeline())
    run = PipelineTrainer::create(program, options, error, comm,
                                  std::move(backend));
  else
    run = Trainer::create(program, options, error, comm, std::move(backend));
  if (!run)
    return nullptr;
  if (!initial.empty() && !run->setInitialValues(std::move(initial), error))
    return nullptr;
  if (resume) {
    if (!run->loadCheckpoint(options.checkpointPath, error))
      return nullptr;
  } else {
    run->initialize();
  }
  return run;
}

} // namespace gptc::runtime
