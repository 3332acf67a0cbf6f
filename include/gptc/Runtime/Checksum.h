//===- Checksum.h - Checksums of what the runtime writes --------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// CRC-32C (Castagnoli), the checksum of every tensor in a checkpoint, and
// FNV-1a, a hash whose value is the same in every build (std::hash is
// not: it differs between C++ libraries).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CHECKSUM_H
#define GPTC_RUNTIME_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gptc::runtime {

/// CRC-32C of `bytes` bytes at `data`, continuing from `crc` (0 to start):
/// crc32c(crc32c(0, a), b) == crc32c(0, a + b). SSE4.2's instruction where
/// the CPU has it, a table otherwise (the same values).
uint32_t crc32c(uint32_t crc, const void *data, size_t bytes);

/// 64-bit FNV-1a of `text`.
uint64_t fnv1a64(std::string_view text);

} // namespace gptc::runtime

#endif // GPTC_RUNTIME_CHECKSUM_H
