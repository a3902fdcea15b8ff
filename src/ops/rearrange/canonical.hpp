// Rearrange canonicalization: a pair of strided views reduced to the fewest dimensions that describe
// the same copy, as small pure functions over a list of dims (extent, source stride, destination stride).
//
//   zip_dims -> drop_unit_dims -> flip_negative_dims -> sort_by_dst_stride -> merge_contiguous_dims
//   (the canonical form in elements) -> fold_into_units (bytes, then the widest unit that every
//   stride, the shared innermost run and both pointers' alignment allow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shapejit/core.hpp"

namespace shapejit::plan {

/// One dimension of a copy: its extent and the stride of each side, in elements or units.
struct RearrangeDim {
  std::int64_t extent = 1;
  std::int64_t src_stride = 0;
  std::int64_t dst_stride = 0;
  bool operator==(const RearrangeDim&) const = default;
};

using RearrangeDims = std::vector<RearrangeDim>;

/// A copy in canonical form: dims outermost first (descending destination stride), strides and
/// offsets counted in units of `unit_bytes`. The offsets are what flipping added to each base pointer.
struct CanonicalForm {
  RearrangeDims dims;
  std::int64_t unit_bytes = 1;
  std::int64_t src_offset = 0;
  std::int64_t dst_offset = 0;
  bool operator==(const CanonicalForm&) const = default;
};

/// The dims of `dst` and `src` side by side (both already validated: same shape).
RearrangeDims zip_dims(const TensorDesc& dst, const TensorDesc& src);

/// Removes extent-1 dims: they move nothing.
RearrangeDims drop_unit_dims(RearrangeDims dims);

/// Negates both strides of every dim whose destination stride is negative (a dim reversed on both
/// sides becomes forward on both), so the destination is always walked forward. Returns the element
/// offsets that the flips add to the source and destination base pointers.
struct FlipOffsets {
  std::int64_t src = 0;
  std::int64_t dst = 0;
};
FlipOffsets flip_negative_dims(RearrangeDims& dims);

/// Orders dims outermost first: descending destination stride, then descending |source stride|.
RearrangeDims sort_by_dst_stride(RearrangeDims dims);

/// Merges each dim into the next inner one when both sides are contiguous across the pair.
RearrangeDims merge_contiguous_dims(RearrangeDims dims);

/// The canonical form in elements (unit_bytes = element size): drop, flip, sort, merge.
CanonicalForm canonicalize(const TensorDesc& dst, const TensorDesc& src);

/// Largest power of two (at most 16) dividing `value`; 16 for 0.
std::int64_t alignment_of(std::int64_t value);

/// Re-expresses an element form in units: strides become bytes, the shared contiguous innermost run
/// is folded into units of up to 16 bytes, as wide as every stride, that run and both effective
/// pointer alignments (`src_align`, `dst_align`, in bytes) allow.
CanonicalForm fold_into_units(const CanonicalForm& elements, std::int64_t src_align, std::int64_t dst_align);

/// Number of units the form copies (1 for no dims).
std::int64_t unit_count(const RearrangeDims& dims);

/// "[extent:src:dst, ...]" for plans and error messages.
std::string format_dims(const RearrangeDims& dims);

}  // namespace shapejit::plan
