//===- CudaBackend.h - Run a compiled program on an NVIDIA GPU -*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's GPU backend: loads the program's CUDA image (program.proto's
// CudaModule) once, and runs each function on one stream: the generated
// kernels by replaying their launch plans, GEMMs through cuBLASLt (fp32
// without TF32, bf16/fp16 with fp32 accumulation, the bias as an
// epilogue, the algorithm chosen once per shape), attention and the
// embedding's gradient with the runtime's own kernels. Every value lives
// in device memory: one arena per function as the compiler's buffer plan
// sizes it; the trainer's state stays resident between steps and crosses
// to the host only for checkpoints and dumps. See docs/Runtime.md.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CUDA_CUDABACKEND_H
#define GPTC_RUNTIME_CUDA_CUDABACKEND_H

#include "gptc/Runtime/Backend.h"

#include <memory>
#include <string>

namespace gptc::runtime {

/// Whether a CUDA device answers (before compiling for one); `why` says
/// what failed when none does.
bool cudaDeviceAvailable(std::string &why);

/// The number of visible CUDA devices (0 when none answers).
int cudaDeviceCount();

/// A backend on GPU `device` (of the visible ones) for `program`, which
/// must carry a CUDA image for that GPU's architecture. Null with `error`
/// set when there is no usable GPU, the image does not load, or the
/// program needs what this backend does not run (named with the op's
/// location).
/// A program for a mesh (a grid of several devices) runs one process per
/// GPU: `bootstrap` (MPI) is then this process's communicator, which makes
/// the NCCL communicators of the program's groups; its collectives run on
/// device buffers on a stream of their own (CollectiveSchedule.h).
std::unique_ptr<Backend> createCudaBackend(const program::Program &program,
                                           int device, std::string &error,
                                           Communicator *bootstrap = nullptr);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CUDA_CUDABACKEND_H
