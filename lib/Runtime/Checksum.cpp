//===- Checksum.cpp - Checksums of what the runtime writes ------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Checksum.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

using namespace gptc::runtime;

/// The reflected Castagnoli polynomial's byte table.
static const std::array<uint32_t, 256> &table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[i] = c;
    }
    return t;
  }();
  return t;
}

static uint32_t crc32cTable(uint32_t crc, const uint8_t *p, size_t n) {
  const std::array<uint32_t, 256> &t = table();
  uint32_t c = ~crc;
  while (n--)
    c = t[(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32cHardware(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n; --n)
    c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#endif

uint32_t gptc::runtime::crc32c(uint32_t crc, const void *data, size_t bytes) {
  const auto *p = static_cast<const uint8_t *>(data);
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware)
    return crc32cHardware(crc, p, bytes);
#endif
  return crc32cTable(crc, p, bytes);
}

uint64_t gptc::runtime::fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}
