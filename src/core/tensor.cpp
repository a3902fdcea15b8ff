#include "shapejit/core.hpp"

namespace shapejit {

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

std::size_t TensorDesc::element_size() const noexcept {
  return elem_bytes > 0 ? static_cast<std::size_t>(elem_bytes) : dtype_size(dtype);
}

std::vector<std::int64_t> TensorDesc::effective_strides() const {
  return strides.empty() ? contiguous_strides(shape) : strides;
}

std::int64_t TensorDesc::numel() const noexcept {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

}  // namespace shapejit
