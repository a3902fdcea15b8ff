#include "ops/rope/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.hpp"
#include "ops/hadamard/plan.hpp"

namespace shapejit::detail {
namespace {

// Offsets come from the descriptors' own strides, not the planner's arguments, so that a planner
// stride bug cannot hide in the reference too.

/// Element offset of (b, s, head) in a [seq, heads, dhead] or [batch, seq, heads, dhead] view.
std::int64_t row_offset(const TensorDesc& t, std::int64_t b, std::int64_t s, std::int64_t head) {
  const std::vector<std::int64_t> st = t.effective_strides();
  const std::size_t r = st.size();
  return (r == 4 ? b * st[0] : 0) + s * st[r - 3] + head * st[r - 2];
}

/// The position of token (b, s) on an axis; -1 for a u64 id beyond 2^63 (outside any table).
std::int64_t reference_position(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b,
                                std::int64_t s, std::int64_t axis) {
  const plan::RopeSpec& spec = plan.spec;
  if (!spec.position) return s + host.offset;
  const TensorDesc& positions = *plan.desc.positions;  // [axes,] [batch,] seq
  const std::vector<std::int64_t> st = positions.effective_strides();
  const bool axes = plan.desc.axis_rule != RopeAxisRule::none;
  const bool batched = positions.shape.size() == (axes ? 3u : 2u);
  const std::int64_t at = (axes ? axis * st[0] : 0) + (batched ? b * st[st.size() - 2] : 0) + s * st.back();
  if (*spec.position == DType::u64) {
    std::uint64_t raw = 0;
    std::memcpy(&raw, static_cast<const char*>(host.positions) + at * 8, sizeof raw);
    if (raw > INT64_MAX) return -1;
  }
  return static_cast<std::int64_t>(load_as_double(host.positions, *spec.position, at));
}

/// The token's inputs, [heads_total][dhead]: q heads, then k heads, then (cache append) v heads.
std::vector<double> token_inputs(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b,
                                 std::int64_t s) {
  const RopeDesc& d = plan.desc;
  const std::int64_t D = plan.spec.head_dim;
  const std::int64_t heads_total = plan.heads_q + plan.heads_k * (d.cache_layout != KvCacheLayout::none ? 2 : 1);
  std::vector<double> values(static_cast<std::size_t>(heads_total * D));
  for (std::int64_t h = 0; h < heads_total; ++h) {
    const int tensor = h < plan.heads_q ? 0 : h < plan.heads_q + plan.heads_k ? 1 : 2;  // q, k, v
    const TensorDesc& view = tensor == 0 ? d.x : tensor == 1 ? *d.k : *d.v;
    const void* base = tensor == 0 ? host.x : tensor == 1 ? host.k : host.v;
    const std::int64_t head = tensor == 0 ? h : tensor == 1 ? h - plan.heads_q : h - plan.heads_q - plan.heads_k;
    const std::int64_t row = row_offset(view, b, s, head);
    for (std::int64_t i = 0; i < D; ++i) values[static_cast<std::size_t>(h * D + i)] = load_as_double(base, plan.spec.data, row + i);
  }
  return values;
}

/// The axis whose position rotary pair j takes, from the descriptor's rule and sections.
std::int64_t reference_pair_axis(const RopeDesc& desc, std::int64_t j) {
  const std::vector<std::int64_t>& sections = desc.axis_sections;
  switch (desc.axis_rule) {
    case RopeAxisRule::sections:
    case RopeAxisRule::blocks: {
      std::int64_t axis = 0;
      for (std::int64_t end = sections[0]; j >= end; end += sections[static_cast<std::size_t>(axis)]) ++axis;
      return axis;
    }
    case RopeAxisRule::interleaved:
      if (j % 3 == 1 && j < 3 * sections[1]) return 1;
      if (j % 3 == 2 && j < 3 * sections[2]) return 2;
      return 0;
    case RopeAxisRule::none: break;
  }
  return 0;
}

/// Rotates every head of `values`, pair j by the angles of table row positions[axis of j].
void rotate_heads(const plan::RopePlanData& plan, const RopePointers& host, const std::vector<std::int64_t>& positions,
                  std::vector<double>& values) {
  const plan::RopeSpec& spec = plan.spec;
  const std::int64_t D = spec.head_dim, half = spec.rotary_dim / 2;
  const std::int64_t table_stride = plan.desc.table.effective_strides()[0];
  for (std::int64_t h = 0; h < plan.heads_q + plan.heads_k; ++h) {  // v's heads are not rotated
    double* y = &values[static_cast<std::size_t>(h * D)];
    for (std::int64_t i = 0; i < half; ++i) {
      const std::int64_t axis = reference_pair_axis(plan.desc, i);
      std::int64_t i0 = spec.style == RopeStyle::neox ? i : 2 * i;
      std::int64_t i1 = spec.style == RopeStyle::neox ? i + half : 2 * i + 1;
      if (spec.axis_rule == RopeAxisRule::blocks && spec.style == RopeStyle::neox) {
        // Block `axis` holds channels [2 b, 2 b + 2 s) for its first pair b and section s; pair i
        // is its (i - b)-th, half-split inside the block.
        std::int64_t block_first = 0;
        for (std::int64_t a = 0; a < axis; ++a) block_first += plan.desc.axis_sections[static_cast<std::size_t>(a)];
        i0 = 2 * block_first + (i - block_first);
        i1 = i0 + plan.desc.axis_sections[static_cast<std::size_t>(axis)];
      }
      const std::int64_t at = positions[static_cast<std::size_t>(axis)] * table_stride + i;
      const double c = load_as_double(host.cos, spec.table, at);
      const double sn = (spec.inverse ? -1 : 1) * load_as_double(host.sin, spec.table, at);
      const double x0 = y[i0], x1 = y[i1];
      y[i0] = x0 * c - x1 * sn;
      y[i1] = x0 * sn + x1 * c;
    }
  }
}

/// Multiplies each group of hadamard_group heads of `values` by scale * H_n, by the dense definition.
void transform_groups(const plan::RopePlanData& plan, std::vector<double>& values) {
  const std::int64_t n = plan.spec.hadamard_group * plan.spec.head_dim;
  const plan::HadamardFactors f = plan::hadamard_factors(n);
  std::vector<double> in(static_cast<std::size_t>(n));
  for (std::size_t first = 0; first < values.size(); first += static_cast<std::size_t>(n)) {
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(first), n, in.begin());
    for (std::int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < n; ++j) sum += plan::hadamard_sign(f, i, j) * in[static_cast<std::size_t>(j)];
      values[first + static_cast<std::size_t>(i)] = sum * plan.args.hadamard_scale;
    }
  }
}

}  // namespace

void rope_reference_token(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b, std::int64_t s,
                          std::vector<double>& out) {
  std::vector<std::int64_t> positions(static_cast<std::size_t>(plan.spec.position_axes));
  for (std::int64_t axis = 0; axis < plan.spec.position_axes; ++axis) {
    const std::int64_t position = reference_position(plan, host, b, s, axis);
    if (position < 0 || position >= plan.desc.table.shape[0]) {  // any axis outside: q's and k's rows are NaN
      out = token_inputs(plan, host, b, s);
      std::fill_n(out.begin(), (plan.heads_q + plan.heads_k) * plan.spec.head_dim, std::numeric_limits<double>::quiet_NaN());
      return;
    }
    positions[static_cast<std::size_t>(axis)] = position;
  }
  out = token_inputs(plan, host, b, s);
  const bool fused = plan.spec.hadamard_group != 0;
  if (fused && plan.spec.hadamard_first) transform_groups(plan, out);
  rotate_heads(plan, host, positions, out);
  if (fused && !plan.spec.hadamard_first) transform_groups(plan, out);
}

double rope_code_value(RopeQuantize q, std::uint8_t code, double scale) {
  if (q == RopeQuantize::int8) return static_cast<std::int8_t>(code) * scale;
  if ((code & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = (code >> 3) & 15, mantissa = code & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80 ? -magnitude : magnitude) * scale;
}

double rope_code_step(RopeQuantize q, double value, double scale) {
  if (q == RopeQuantize::int8) return scale;
  const double units = std::fabs(value) / scale;
  return (units < 0x1p-6 ? 0x1p-9 : std::ldexp(1.0, std::ilogb(units) - 3)) * scale;
}

}  // namespace shapejit::detail
