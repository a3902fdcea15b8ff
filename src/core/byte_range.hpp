// The memory a strided view reaches, as a byte range relative to its base pointer.
#pragma once

#include <cstdint>

#include "shapejit/core.hpp"

namespace shapejit {

/// Bytes a view touches, relative to its base pointer: [lo, hi).
struct ByteRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};

/// The bytes `desc` touches (its extents must be positive and its span fit in 63 bits).
ByteRange byte_range(const TensorDesc& desc);

/// Whether [a.lo, a.hi) at `a_base` and [b.lo, b.hi) at `b_base` share a byte.
bool ranges_overlap(std::uintptr_t a_base, ByteRange a, std::uintptr_t b_base, ByteRange b);

/// Throws invalid_argument, naming the view `name`, unless every element of `desc` (an output) has
/// its own address: sorted by |stride|, each stride must exceed the span of the smaller ones (a
/// layout that interleaves its dims is refused even when it happens to be distinct).
void check_distinct_elements(const TensorDesc& desc, const char* name);

}  // namespace shapejit
