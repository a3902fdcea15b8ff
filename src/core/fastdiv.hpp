// Division by a run-time constant as a multiply-high and a shift (Granlund-Montgomery).
// The host computes (multiplier, shift) once per plan; kernels evaluate sj_fastdiv from the prelude.
#pragma once

#include <bit>
#include <cstdint>

namespace shapejit {

struct FastDivisor {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;
};

/// Magic numbers for dividing any 32-bit unsigned value by `divisor` (>= 1).
constexpr FastDivisor make_fast_divisor(std::uint32_t divisor) {
  const auto shift = static_cast<std::uint32_t>(std::bit_width(divisor - 1));  // the least with 2^shift >= divisor
  const std::uint64_t numerator = (std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - divisor);
  return {divisor, static_cast<std::uint32_t>(numerator / divisor + 1), shift};
}

/// n / d exactly, for every 32-bit n: ((umulhi(n, m) + n) >> s) with a 64-bit sum.
constexpr std::uint32_t fast_div(std::uint32_t n, FastDivisor d) {
  const std::uint64_t hi = (std::uint64_t{n} * d.multiplier) >> 32;
  return static_cast<std::uint32_t>((hi + n) >> d.shift);
}

}  // namespace shapejit
