// Host bf16 helpers shared by the examples (not part of the library): conversions and random data.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/device.hpp"

namespace shapejit::support {

inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Rounds to nearest even (finite inputs).
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/// n random bf16 values in [-1, 1).
inline std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed) {
  const std::vector<std::uint8_t> bytes = random_bytes(n * 4, seed);
  std::vector<std::uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t r;
    std::memcpy(&r, &bytes[i * 4], 4);
    out[i] = float_to_bf16(static_cast<float>(r) / 2147483648.0f - 1.0f);
  }
  return out;
}

}  // namespace shapejit::support
