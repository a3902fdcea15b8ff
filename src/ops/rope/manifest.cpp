#include "ops/rope/manifest.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace shapejit::plan {
namespace {

DType default_table_dtype(DType data) { return data == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace

RopeDesc manifest_desc(const RopeManifest& m) {
  RopeDesc desc;
  desc.style = m.style;
  desc.x = TensorDesc{m.shape, {}, m.dtype};
  desc.rotary_dim = m.rotary_dim;
  desc.inplace = m.inplace;
  desc.inverse = m.inverse;
  desc.checked = m.checked;
  desc.check_pointers = m.check_pointers;
  const DType table_dtype = m.table_dtype.value_or(default_table_dtype(m.dtype));
  if (m.shape.size() < 3) {  // the planner names what is wrong with x
    desc.table = TensorDesc{{1, std::max<std::int64_t>(m.rotary_dim / 2, 1)}, {}, table_dtype};
    return desc;
  }
  const std::size_t rank = m.shape.size();
  const std::int64_t seq = m.shape[rank - 3];
  const std::int64_t rotary_dim = m.rotary_dim == 0 ? m.shape.back() : m.rotary_dim;
  if (m.k_heads) {
    std::vector<std::int64_t> k_shape = m.shape;
    k_shape[rank - 2] = *m.k_heads;
    desc.k = TensorDesc{k_shape, {}, m.dtype};
  }
  desc.table = TensorDesc{{std::max<std::int64_t>(seq, 1), std::max<std::int64_t>(rotary_dim / 2, 1)}, {}, table_dtype};
  if (m.position_dtype) {
    std::vector<std::int64_t> pos_shape = {seq};
    if (rank == 4 && !m.positions_shared) pos_shape = {m.shape[0], seq};
    desc.positions = TensorDesc{pos_shape, {}, *m.position_dtype};
  }
  return desc;
}

std::string rope_manifest_line(const RopePlanData& plan) {
  const RopeSpec& spec = plan.spec;
  RopeManifest m;
  m.style = spec.style;
  m.dtype = spec.data;
  m.table_dtype = spec.table;
  m.position_dtype = spec.position;
  m.positions_shared = spec.four_d && spec.position && !spec.positions_batched;
  m.shape = plan.desc.x.shape;
  if (spec.has_k) m.k_heads = plan.heads_k;
  m.rotary_dim = spec.rotary_dim == spec.head_dim ? 0 : spec.rotary_dim;
  m.inplace = spec.inplace;
  m.inverse = spec.inverse;
  m.checked = spec.checked;
  const RopeSpec natural = plan_rope_data(manifest_desc(m)).spec;

  std::string line = fmt::format("rope --algo {} --dtype {}", rope_style_name(spec.style), dtype_name(spec.data));
  if (spec.table != default_table_dtype(spec.data)) line += fmt::format(" --table-dtype {}", dtype_name(spec.table));
  if (spec.position != DType::i64)
    line += fmt::format(" --pos-dtype {}", spec.position ? dtype_name(*spec.position) : "none");
  if (m.positions_shared) line += " --pos-layout seq";
  line += fmt::format(" --shape {}", fmt::join(m.shape, ","));
  if (m.k_heads) line += fmt::format(" --k-heads {}", *m.k_heads);
  if (m.rotary_dim != 0) line += fmt::format(" --rotary-dim {}", m.rotary_dim);
  if (spec.inplace) line += " --inplace";
  if (spec.inverse) line += " --inverse";
  if (spec.checked) line += " --checked";
  if (spec.access != natural.access) line += fmt::format(" --access {}", spec.access);
  if (spec.table_access != natural.table_access) line += fmt::format(" --table-access {}", spec.table_access);
  if (spec.wide_index != natural.wide_index) line += fmt::format(" --index {}", spec.wide_index ? 64 : 32);
  return line;
}

}  // namespace shapejit::plan
