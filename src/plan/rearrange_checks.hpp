// Rearrange input checks: what a plan refuses (shape or element-size mismatch, a destination whose
// elements overlap, rank over the limit, spans over 64 bits) and the memory each side touches.
#pragma once

#include <cstdint>

#include "shapejit/core.hpp"

namespace shapejit::plan {

/// Bytes a view touches, relative to its base pointer: [lo, hi).
struct ByteRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};

/// Throws shapejit::Error naming the argument unless `dst` and `src` can be planned: equal ranks
/// (at most kMaxRearrangeRank) and shapes, extents >= 0, one stride per dim, equal element sizes of
/// 1 to 64 bytes, byte spans that fit in 63 bits and a destination whose elements are distinct.
void check_rearrange_descs(const TensorDesc& dst, const TensorDesc& src);

/// Throws unless `alignment` is a power of two from 1 to 16 (RearrangeOptions::assumed_alignment).
void check_assumed_alignment(std::size_t alignment);

/// The bytes `desc` touches (its extents must be positive and its span checked).
ByteRange byte_range(const TensorDesc& desc);

/// Whether [a.lo, a.hi) at `a_base` and [b.lo, b.hi) at `b_base` share a byte.
bool ranges_overlap(std::uintptr_t a_base, ByteRange a, std::uintptr_t b_base, ByteRange b);

}  // namespace shapejit::plan
