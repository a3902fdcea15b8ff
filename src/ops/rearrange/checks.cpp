#include "ops/rearrange/checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/byte_range.hpp"
#include "core/errors.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::plan {
namespace {

using Wide = __int128;
constexpr Wide kMaxSpan = (Wide{1} << 63) - 1;

void check_desc(const TensorDesc& desc, const char* name) {
  if (desc.shape.size() > static_cast<std::size_t>(kMaxRearrangeRank))
    fail(ErrorCode::unsupported, "{} has rank {}: rearrange accepts at most {} dimensions", name, desc.shape.size(),
         kMaxRearrangeRank);
  if (!desc.strides.empty() && desc.strides.size() != desc.shape.size())
    invalid_argument("{}.strides has {} values but {}.shape has {} dimensions: give one stride per dimension (or none "
                     "for row-major contiguous)",
                     name, desc.strides.size(), name, desc.shape.size());
  for (std::size_t i = 0; i < desc.shape.size(); ++i)
    if (desc.shape[i] < 0)
      invalid_argument("{}.shape[{}] is {}: extents must be 0 or more", name, i, desc.shape[i]);
  if (desc.elem_bytes < 0 || desc.elem_bytes > 64)
    invalid_argument("{}.elem_bytes is {}: give 1 to 64 bytes, or 0 for the dtype's size", name, desc.elem_bytes);
}

// Largest byte offset reachable from the base, in either direction, plus one element.
Wide byte_extent(const TensorDesc& desc) {
  const auto strides = desc.effective_strides();
  const Wide e = static_cast<Wide>(desc.element_size());
  Wide span = e;
  for (std::size_t i = 0; i < strides.size(); ++i) {
    const Wide stride = strides[i] < 0 ? -static_cast<Wide>(strides[i]) : static_cast<Wide>(strides[i]);
    const Wide reach = stride * (desc.shape[i] - 1);  // both factors < 2^63: no overflow
    if (reach > kMaxSpan) return kMaxSpan + 1;
    span += reach * e;
    if (span > kMaxSpan) return kMaxSpan + 1;
  }
  return span;
}

}  // namespace

void check_rearrange_descs(const TensorDesc& dst, const TensorDesc& src) {
  check_desc(dst, "dst");
  check_desc(src, "src");
  if (dst.shape != src.shape)
    invalid_argument("dst.shape {} and src.shape {} differ: rearrange copies between equal shapes (express a "
                     "permute through the source's strides, e.g. with shapejit::permuted)",
                     dst.shape, src.shape);
  if (dst.element_size() != src.element_size())
    invalid_argument("dst element size ({} bytes) and src element size ({} bytes) differ: both sides must have the "
                     "same element size",
                     dst.element_size(), src.element_size());
  for (std::int64_t e : dst.shape)
    if (e == 0) return;  // nothing is copied: strides cannot matter
  if (byte_extent(dst) > kMaxSpan)
    invalid_argument("dst: shape {} with strides {} spans more than 2^63 bytes", dst.shape, dst.effective_strides());
  if (byte_extent(src) > kMaxSpan)
    invalid_argument("src: shape {} with strides {} spans more than 2^63 bytes", src.shape, src.effective_strides());
  check_distinct_elements(dst, "dst");
}

void check_assumed_alignment(std::size_t alignment) {
  if (alignment < 1 || alignment > 16 || (alignment & (alignment - 1)) != 0)
    invalid_argument("options.assumed_alignment is {}: give a power of two from 1 to 16 bytes", alignment);
}

}  // namespace shapejit::plan
