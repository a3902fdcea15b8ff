#include "core/byte_range.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/errors.hpp"

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

void check_distinct_elements(const TensorDesc& desc, const char* name) {
  using Wide = __int128;
  const auto strides = desc.effective_strides();
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (desc.shape[i] > 1) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::llabs(strides[a]) < std::llabs(strides[b]); });
  Wide span = 0;
  for (std::size_t i : order) {
    const Wide stride = std::llabs(strides[i]);
    if (stride == 0)
      invalid_argument("{}.strides[{}] is 0 with extent {}: output elements would overlap; every output element "
                       "needs its own address",
                       name, i, desc.shape[i]);
    if (stride <= span)
      invalid_argument("{}.strides {} make output elements overlap (dim {} with stride {} falls inside the span of "
                       "the dims with smaller strides): sorted by |stride|, each stride must exceed "
                       "sum(|stride| * (extent - 1)) of the smaller ones",
                       name, strides, i, strides[i]);
    span += stride * (desc.shape[i] - 1);
  }
}

}  // namespace shapejit
