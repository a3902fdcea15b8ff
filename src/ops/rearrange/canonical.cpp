#include "ops/rearrange/canonical.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace shapejit::plan {

RearrangeDims zip_dims(const TensorDesc& dst, const TensorDesc& src) {
  const auto dst_strides = dst.effective_strides();
  const auto src_strides = src.effective_strides();
  RearrangeDims dims(dst.shape.size());
  for (std::size_t i = 0; i < dims.size(); ++i) dims[i] = {dst.shape[i], src_strides[i], dst_strides[i]};
  return dims;
}

RearrangeDims drop_unit_dims(RearrangeDims dims) {
  std::erase_if(dims, [](const RearrangeDim& d) { return d.extent == 1; });
  return dims;
}

FlipOffsets flip_negative_dims(RearrangeDims& dims) {
  FlipOffsets offsets;
  for (RearrangeDim& d : dims) {
    if (d.dst_stride >= 0) continue;
    offsets.src += (d.extent - 1) * d.src_stride;
    offsets.dst += (d.extent - 1) * d.dst_stride;
    d.src_stride = -d.src_stride;
    d.dst_stride = -d.dst_stride;
  }
  return offsets;
}

RearrangeDims sort_by_dst_stride(RearrangeDims dims) {
  std::stable_sort(dims.begin(), dims.end(), [](const RearrangeDim& a, const RearrangeDim& b) {
    if (a.dst_stride != b.dst_stride) return a.dst_stride > b.dst_stride;
    return std::llabs(a.src_stride) > std::llabs(b.src_stride);
  });
  return dims;
}

RearrangeDims merge_contiguous_dims(RearrangeDims dims) {
  RearrangeDims merged;
  for (const RearrangeDim& d : dims) {
    if (!merged.empty()) {
      RearrangeDim& outer = merged.back();
      if (outer.src_stride == d.src_stride * d.extent && outer.dst_stride == d.dst_stride * d.extent) {
        outer = {outer.extent * d.extent, d.src_stride, d.dst_stride};
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

CanonicalForm canonicalize(const TensorDesc& dst, const TensorDesc& src) {
  RearrangeDims dims = drop_unit_dims(zip_dims(dst, src));
  const FlipOffsets offsets = flip_negative_dims(dims);
  dims = merge_contiguous_dims(sort_by_dst_stride(std::move(dims)));
  return {std::move(dims), static_cast<std::int64_t>(dst.element_size()), offsets.src, offsets.dst};
}

std::int64_t alignment_of(std::int64_t value) {
  if (value == 0) return 16;
  const auto magnitude = static_cast<std::uint64_t>(value < 0 ? -value : value);
  return std::min<std::int64_t>(16, static_cast<std::int64_t>(magnitude & (~magnitude + 1)));
}

CanonicalForm fold_into_units(const CanonicalForm& elements, std::int64_t src_align, std::int64_t dst_align) {
  const std::int64_t e = elements.unit_bytes;
  // An element is an innermost dim of `e` bytes, contiguous on both sides; merging then finds the
  // run that both sides share.
  RearrangeDims bytes;
  for (const RearrangeDim& d : elements.dims) bytes.push_back({d.extent, d.src_stride * e, d.dst_stride * e});
  bytes.push_back({e, 1, 1});
  bytes = merge_contiguous_dims(std::move(bytes));

  const std::int64_t src_offset = elements.src_offset * e;
  const std::int64_t dst_offset = elements.dst_offset * e;
  std::int64_t unit = std::min({alignment_of(bytes.back().extent), alignment_of(src_align), alignment_of(dst_align),
                                alignment_of(src_offset), alignment_of(dst_offset)});
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i)
    unit = std::min({unit, alignment_of(bytes[i].src_stride), alignment_of(bytes[i].dst_stride)});

  CanonicalForm units{{}, unit, src_offset / unit, dst_offset / unit};
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i)
    units.dims.push_back({bytes[i].extent, bytes[i].src_stride / unit, bytes[i].dst_stride / unit});
  if (bytes.back().extent > unit) units.dims.push_back({bytes.back().extent / unit, 1, 1});
  return units;
}

std::int64_t unit_count(const RearrangeDims& dims) {
  std::int64_t n = 1;
  for (const RearrangeDim& d : dims) n *= d.extent;
  return n;
}

std::string format_dims(const RearrangeDims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    out += fmt::format("{}{}:{}:{}", i ? ", " : "", dims[i].extent, dims[i].src_stride, dims[i].dst_stride);
  return out + "]";
}

}  // namespace shapejit::plan
