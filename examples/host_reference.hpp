// The CPU reference the examples check their GPU results against: a naive strided copy.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "shapejit/core.hpp"

namespace examples {

/// Element offsets of the lowest and highest element a strided view touches, relative to its base.
struct ElementSpan {
  std::int64_t lowest = 0;
  std::int64_t highest = 0;
  /// Elements a buffer must hold for the view (its base lies `-lowest` elements in).
  std::int64_t count() const { return highest - lowest + 1; }
};

/// The span of `view` (negative strides reach below the base). Assumes no zero extent.
inline ElementSpan element_span(const shapejit::TensorDesc& view) {
  ElementSpan span;
  const std::vector<std::int64_t> strides = view.effective_strides();
  for (std::size_t d = 0; d < view.shape.size(); ++d) {
    const std::int64_t reach = (view.shape[d] - 1) * strides[d];
    (reach < 0 ? span.lowest : span.highest) += reach;
  }
  return span;
}

/// Copies every logical element of `src` into `dst` on the host, one element at a time in
/// row-major order of the shared shape. `dst` and `src` point at element 0 of each view.
inline void reference_rearrange(std::uint8_t* dst, const shapejit::TensorDesc& dst_desc, const std::uint8_t* src,
                                const shapejit::TensorDesc& src_desc) {
  const std::int64_t n = src_desc.numel();
  if (n == 0) return;
  const std::size_t elem = src_desc.element_size();
  const std::vector<std::int64_t> dst_strides = dst_desc.effective_strides();
  const std::vector<std::int64_t> src_strides = src_desc.effective_strides();
  const std::size_t rank = src_desc.shape.size();
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t dst_offset = 0, src_offset = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + dst_offset * static_cast<std::int64_t>(elem), src + src_offset * static_cast<std::int64_t>(elem),
                elem);
    // Odometer step over the shape, keeping both offsets in step with the index.
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < src_desc.shape[d]) {
        dst_offset += dst_strides[d];
        src_offset += src_strides[d];
        break;
      }
      index[d] = 0;
      dst_offset -= (src_desc.shape[d] - 1) * dst_strides[d];
      src_offset -= (src_desc.shape[d] - 1) * src_strides[d];
    }
  }
}

}  // namespace examples
