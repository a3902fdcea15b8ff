// Rearrange input checks: what a plan refuses (shape or element-size mismatch, a destination whose
// elements overlap, rank over the limit, spans over 64 bits).
#pragma once

#include <cstdint>

#include "core/byte_range.hpp"
#include "shapejit/core.hpp"

namespace shapejit::plan {

/// Throws shapejit::Error naming the argument unless `dst` and `src` can be planned: equal ranks
/// (at most kMaxRearrangeRank) and shapes, extents >= 0, one stride per dim, equal element sizes of
/// 1 to 64 bytes, byte spans that fit in 63 bits and a destination whose elements are distinct.
void check_rearrange_descs(const TensorDesc& dst, const TensorDesc& src);

/// Throws unless `alignment` is a power of two from 1 to 16 (RearrangeOptions::assumed_alignment).
void check_assumed_alignment(std::size_t alignment);

}  // namespace shapejit::plan
