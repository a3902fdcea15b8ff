#include "core/byte_range.hpp"

namespace shapejit {

ByteRange byte_range(const TensorDesc& desc) {
  const auto strides = desc.effective_strides();
  const auto e = static_cast<std::int64_t>(desc.element_size());
  ByteRange range{0, e};
  for (std::size_t i = 0; i < strides.size(); ++i) {
    const std::int64_t reach = strides[i] * (desc.shape[i] - 1) * e;
    (reach < 0 ? range.lo : range.hi) += reach;
  }
  return range;
}

bool ranges_overlap(std::uintptr_t a_base, ByteRange a, std::uintptr_t b_base, ByteRange b) {
  using Wide = __int128;
  const Wide a_lo = static_cast<Wide>(a_base) + a.lo, a_hi = static_cast<Wide>(a_base) + a.hi;
  const Wide b_lo = static_cast<Wide>(b_base) + b.lo, b_hi = static_cast<Wide>(b_base) + b.hi;
  return a_lo < b_hi && b_lo < a_hi;
}

}  // namespace shapejit
