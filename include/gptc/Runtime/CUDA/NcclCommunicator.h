//===- NcclCommunicator.h - Collectives over NCCL --------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's Communicator over NCCL, for one process per GPU: each group
// of grid axes gets an NCCL communicator, bootstrapped through another
// Communicator (MPI) that broadcasts the group's unique id. Collectives on
// host tensors (the CPU executor's) are staged through device memory; a
// CUDA executor will pass device pointers straight through (not written
// yet). Built only where NCCL is found; exercised only on a machine with a
// GPU per rank (test/Runtime/nccl-collectives.test).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define GPTC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "gptc/Runtime/Communicator.h"

#include <memory>
#include <string>

namespace gptc::runtime {

/// An NCCL communicator on this process's GPU (its local rank modulo the
/// visible devices), bootstrapped by `bootstrap`, which must outlive it.
/// Returns null with `error` set when CUDA or NCCL cannot start.
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap,
                                                     std::string &error);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
