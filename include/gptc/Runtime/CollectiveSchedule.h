//===- CollectiveSchedule.h - When collectives overlap ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A device backend runs a function's collectives (ALL_REDUCE,
// ALL_REDUCE_MAX, ALL_GATHER, REDUCE_SCATTER) on a communication stream of
// their own, so that the gradient all-reduces of late layers run while the
// backward pass computes earlier ones. The compute stream hands each
// collective its inputs at the collective's place in the kernel order (an
// event) and waits for its result only before the first later kernel that
// needs it to be done:
//   - reads one of its outputs (or a value stored over one: a view);
//   - writes a value stored over one of its inputs or outputs (the buffer
//     plan reuses a buffer once its last reader, the collective, is
//     behind it in program order, which is not yet so on the device).
// A collective's own inputs and outputs that no later kernel touches are
// waited for at the end of the function, before its outputs are read.
// Collectives keep their program order on the one communication stream,
// which is the order every rank issues them in (NCCL needs that).
//
// This is host-side scheduling over the artifact, without CUDA: the GPU
// backend consumes it, `gptc --emit=launches` prints it and the unit tests
// check it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVESCHEDULE_H
#define GPTC_RUNTIME_COLLECTIVESCHEDULE_H

#include "gptc/Runtime/program.pb.h"

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

namespace gptc::runtime {

/// Whether `op` is a collective that moves data between devices (and so
/// runs on the communication stream).
bool isDeviceCollective(program::OpKind op);

struct ScheduledCollective {
  /// The collective's kernel index in the function.
  size_t kernel;
  /// The kernel before which the compute stream waits for it;
  /// Function.kernels_size() when only the end of the function does.
  size_t waitBefore;
};

/// For an ALL_REDUCE with several inputs (a gradient bucket): the bytes
/// from its first output to the end of its last when the buffer plan laid
/// it out for one call in place (each output planned over its input, in
/// order, each at the first 64-byte boundary after the one before, as
/// gptc-plan-buffers does), so that the gaps belong to the bucket; 0
/// otherwise (the tensors are then reduced apart or packed).
int64_t bucketSpanBytes(const program::Function &function,
                        const program::Kernel &kernel);

/// The collectives of `function` in program order, each with the place
/// where the compute stream waits for it (see the file comment). Values
/// planned in the arena (offset >= 0) alias by their byte ranges; others
/// only themselves.
///
/// `oneStream`: later collectives run after it on the same stream (the
/// GPU's), so only compute kernels can race with it. Without it (the CPU,
/// where MPI keeps several in flight at once) a later collective that
/// touches its storage is waited for too.
std::vector<ScheduledCollective>
scheduleCollectives(const program::Function &function, bool oneStream = true);

/// The host-side sequence the GPU backend enqueues for `function`, one
/// line per step: each kernel with its stream ("compute" or "comm"), a
/// collective with its group and where it is waited for, each wait of the
/// compute stream (`gptc --emit=streams`).
void printDeviceSchedule(const program::Function &function, std::ostream &os);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_COLLECTIVESCHEDULE_H
