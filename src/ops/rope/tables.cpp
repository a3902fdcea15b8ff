// Host sin/cos table builders, after the rope types of transformers' modeling_rope_utils
// ("default", "linear", "llama3", "yarn"), evaluated in double.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/errors.hpp"
#include "ops/rope/reference.hpp"
#include "shapejit/rope.hpp"

namespace shapejit {
namespace {

void validate(std::int64_t rotary_dim, const RopeTableOptions& o) {
  if (rotary_dim < 2 || rotary_dim % 2 != 0) invalid_argument("rotary_dim is {}; it must be even and at least 2", rotary_dim);
  if (!(o.theta > 1)) invalid_argument("theta is {}; it must be greater than 1", o.theta);
  if (o.scaling != RopeScaling::none && !(o.factor > 0))
    invalid_argument("factor is {}; it must be greater than 0", o.factor);
  if ((o.scaling == RopeScaling::llama3 || o.scaling == RopeScaling::yarn) && o.original_max_positions < 1)
    invalid_argument("original_max_positions is {}; it must be at least 1", o.original_max_positions);
  if (o.scaling == RopeScaling::llama3 && !(o.high_freq_factor > o.low_freq_factor && o.low_freq_factor > 0))
    invalid_argument("llama3 needs 0 < low_freq_factor < high_freq_factor; got low {} and high {}", o.low_freq_factor,
                     o.high_freq_factor);
  if (o.scaling == RopeScaling::yarn && !(o.beta_fast > 0 && o.beta_slow > 0))
    invalid_argument("yarn needs beta_fast and beta_slow above 0; got {} and {}", o.beta_fast, o.beta_slow);
}

/// Llama 3.1: long wavelengths divided by factor, short ones kept, a smooth blend in between.
void apply_llama3(std::vector<double>& inv_freq, const RopeTableOptions& o) {
  const double original = static_cast<double>(o.original_max_positions);
  const double low_freq_wavelen = original / o.low_freq_factor;
  const double high_freq_wavelen = original / o.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      f /= o.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (original / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
      f = (1 - smooth) * f / o.factor + smooth * f;
    }
  }
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

/// The dimension at which a frequency completes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, std::int64_t dim, double base, double original) {
  return static_cast<double>(dim) * std::log(original / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

/// YaRN: frequencies ramp from extrapolated (high) to interpolated (low) between two dimensions.
double apply_yarn(std::vector<double>& inv_freq, std::int64_t rotary_dim, const RopeTableOptions& o) {
  const double original = static_cast<double>(o.original_max_positions);
  double low = yarn_correction_dim(o.beta_fast, rotary_dim, o.theta, original);
  double high = yarn_correction_dim(o.beta_slow, rotary_dim, o.theta, original);
  if (o.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // as the reference does, to avoid dividing by zero
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;
    const double extrapolated = inv_freq[i], interpolated = inv_freq[i] / o.factor;
    inv_freq[i] = interpolated * (1 - extrapolation) + extrapolated * extrapolation;
  }
  if (o.attention_factor) return *o.attention_factor;
  if (o.mscale != 0 && o.mscale_all_dim != 0)
    return yarn_mscale(o.factor, o.mscale) / yarn_mscale(o.factor, o.mscale_all_dim);
  return yarn_mscale(o.factor, 1.0);
}

}  // namespace

RopeTableOptions RopeTableOptions::llama3_defaults() {
  RopeTableOptions o;
  o.theta = 500000.0;
  o.scaling = RopeScaling::llama3;
  o.factor = 8.0;
  o.low_freq_factor = 1.0;
  o.high_freq_factor = 4.0;
  o.original_max_positions = 8192;
  return o;
}

RopeFrequencies rope_frequencies(std::int64_t rotary_dim, const RopeTableOptions& options) {
  validate(rotary_dim, options);
  RopeFrequencies out;
  out.inv_freq.resize(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < out.inv_freq.size(); ++i)
    out.inv_freq[i] = 1.0 / std::pow(options.theta, static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
  switch (options.scaling) {
    case RopeScaling::none: break;
    case RopeScaling::linear:
      for (double& f : out.inv_freq) f /= options.factor;
      break;
    case RopeScaling::llama3: apply_llama3(out.inv_freq, options); break;
    case RopeScaling::yarn: out.attention_factor = apply_yarn(out.inv_freq, rotary_dim, options); break;
  }
  return out;
}

TensorDesc RopeTables::desc() const { return TensorDesc{{rows, width}, {}, dtype}; }

namespace {

/// cos and sin of p * freq.inv_freq[i], times the attention factor, for p < rows.
RopeTables tables_of(std::int64_t rows, const RopeFrequencies& freq, DType dtype) {
  if (rows < 1) invalid_argument("rows is {}; a table needs at least one row", rows);
  if (!dtype_is_float(dtype)) invalid_argument("dtype is {}; tables must be f16, bf16, f32 or f64", dtype_name(dtype));
  RopeTables t;
  t.dtype = dtype;
  t.rows = rows;
  t.width = static_cast<std::int64_t>(freq.inv_freq.size());
  const std::size_t bytes = static_cast<std::size_t>(rows * t.width) * dtype_size(dtype);
  t.cos.resize(bytes);
  t.sin.resize(bytes);
  for (std::int64_t p = 0; p < rows; ++p)
    for (std::int64_t i = 0; i < t.width; ++i) {
      const double angle = static_cast<double>(p) * freq.inv_freq[static_cast<std::size_t>(i)];
      detail::store_from_double(t.cos.data(), dtype, p * t.width + i, std::cos(angle) * freq.attention_factor);
      detail::store_from_double(t.sin.data(), dtype, p * t.width + i, std::sin(angle) * freq.attention_factor);
    }
  return t;
}

}  // namespace

RopeTables rope_tables(std::int64_t rows, std::int64_t rotary_dim, DType dtype, const RopeTableOptions& options) {
  return tables_of(rows, rope_frequencies(rotary_dim, options), dtype);
}

RopeTables rope_axes_tables(std::int64_t rows, const std::vector<std::int64_t>& axes_dims, DType dtype, double theta) {
  if (axes_dims.empty()) invalid_argument("axes_dims is empty; give each axis's rotary dim");
  RopeFrequencies all;
  RopeTableOptions options;
  options.theta = theta;
  for (std::int64_t d : axes_dims) {
    if (d < 2 || d % 2 != 0) invalid_argument("axes_dims holds {}; each axis's dim must be even and at least 2", d);
    const RopeFrequencies axis = rope_frequencies(d, options);
    all.inv_freq.insert(all.inv_freq.end(), axis.inv_freq.begin(), axis.inv_freq.end());
  }
  return tables_of(rows, all, dtype);
}

}  // namespace shapejit
