#include "ops/rope/reference.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.hpp"

namespace shapejit::detail {

void rope_reference_token(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b, std::int64_t s,
                          std::vector<double>& out) {
  const plan::RopeSpec& spec = plan.spec;
  const plan::RopeKernelArgs& args = plan.args;
  const std::int64_t D = spec.head_dim, half = spec.rotary_dim / 2;
  std::int64_t position = s + host.offset;
  if (spec.position) {
    const std::int64_t at = b * args.position_stride[0] + s * args.position_stride[1];
    position = static_cast<std::int64_t>(load_as_double(host.positions, *spec.position, at));
    if (*spec.position == DType::u64) {
      std::uint64_t raw = 0;
      std::memcpy(&raw, static_cast<const char*>(host.positions) + at * 8, sizeof raw);
      if (raw > INT64_MAX) position = -1;
    }
  }
  const bool valid = position >= 0 && position < args.table_rows;
  out.assign(static_cast<std::size_t>((plan.heads_q + plan.heads_k) * D), std::numeric_limits<double>::quiet_NaN());
  if (!valid) return;
  for (std::int64_t h = 0; h < plan.heads_q + plan.heads_k; ++h) {
    const bool is_q = h < plan.heads_q;
    const void* in = is_q ? host.x : host.k;
    const std::int64_t(&st)[3] = is_q ? args.x_stride : args.k_stride;
    const std::int64_t row = b * st[0] + s * st[1] + (is_q ? h : h - plan.heads_q) * st[2];
    double* y = &out[static_cast<std::size_t>(h * D)];
    for (std::int64_t i = 0; i < D; ++i) y[i] = load_as_double(in, spec.data, row + i);
    for (std::int64_t i = 0; i < half; ++i) {
      const std::int64_t i0 = spec.style == RopeStyle::neox ? i : 2 * i;
      const std::int64_t i1 = spec.style == RopeStyle::neox ? i + half : 2 * i + 1;
      const double c = load_as_double(host.cos, spec.table, position * args.table_stride + i);
      const double sn = (spec.inverse ? -1 : 1) * load_as_double(host.sin, spec.table, position * args.table_stride + i);
      const double x0 = y[i0], x1 = y[i1];
      y[i0] = x0 * c - x1 * sn;
      y[i1] = x0 * sn + x1 * c;
    }
  }
}

}  // namespace shapejit::detail
