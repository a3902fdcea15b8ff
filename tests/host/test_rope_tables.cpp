// rope_tables and rope_frequencies against the transformers formulas, evaluated here step by step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "ops/rope/reference.hpp"
#include "shapejit/rope.hpp"

using namespace shapejit;

namespace {

constexpr double kPi = std::numbers::pi;

/// theta^(-2i/R), the "default" frequencies.
double default_inv_freq(double theta, int i, int rotary_dim) { return 1.0 / std::pow(theta, 2.0 * i / rotary_dim); }

/// The message of the shapejit::Error `f` throws ("" if it returns).
template <typename F>
std::string message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("default and linear frequencies") {
  const RopeFrequencies f = rope_frequencies(128);
  REQUIRE(f.inv_freq.size() == 64);
  CHECK(f.attention_factor == 1.0);
  CHECK(f.inv_freq[0] == 1.0);
  for (int i : {1, 17, 63}) CHECK(f.inv_freq[static_cast<std::size_t>(i)] == doctest::Approx(default_inv_freq(1e4, i, 128)).epsilon(1e-15));
  RopeTableOptions linear;
  linear.scaling = RopeScaling::linear;
  linear.factor = 4;
  const RopeFrequencies l = rope_frequencies(64, linear);
  for (int i : {0, 5, 31}) CHECK(l.inv_freq[static_cast<std::size_t>(i)] == doctest::Approx(default_inv_freq(1e4, i, 64) / 4).epsilon(1e-15));
}

TEST_CASE("llama3 frequencies: short wavelengths kept, long ones divided by factor, a blend between") {
  const RopeTableOptions o = RopeTableOptions::llama3_defaults();
  const RopeFrequencies f = rope_frequencies(128, o);
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = default_inv_freq(500000.0, i, 128);
    const double wavelen = 2 * kPi / base;
    double want = base;
    if (wavelen < 8192.0 / 4) {
      ++kept;
    } else if (wavelen > 8192.0 / 1) {
      want = base / 8, ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      want = (1 - smooth) * base / 8 + smooth * base, ++blended;
    }
    CHECK(f.inv_freq[static_cast<std::size_t>(i)] == doctest::Approx(want).epsilon(1e-14));
  }
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(blended > 0);
}

TEST_CASE("yarn frequencies and attention factor") {
  RopeTableOptions o;
  o.scaling = RopeScaling::yarn;
  o.theta = 10000;
  o.factor = 4;
  o.original_max_positions = 4096;
  const int R = 64;
  const RopeFrequencies f = rope_frequencies(R, o);
  CHECK(f.attention_factor == doctest::Approx(0.1 * std::log(4.0) + 1.0));
  // Correction range: dims where a frequency makes beta_fast (32) and beta_slow (1) turns over 4096.
  const double low = std::max(0.0, std::floor(R * std::log(4096 / (32 * 2 * kPi)) / (2 * std::log(10000.0))));
  const double high = std::min(R - 1.0, std::ceil(R * std::log(4096 / (1 * 2 * kPi)) / (2 * std::log(10000.0))));
  for (int i = 0; i < R / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1 - ramp;
    const double base = default_inv_freq(10000, i, R);
    const double want = base / 4 * (1 - extrapolation_factor) + base * extrapolation_factor;
    CHECK(f.inv_freq[static_cast<std::size_t>(i)] == doctest::Approx(want).epsilon(1e-14));
  }
  CHECK(f.inv_freq[0] == 1.0);                                                             // extrapolated
  CHECK(f.inv_freq[31] == doctest::Approx(default_inv_freq(10000, 31, R) / 4).epsilon(1e-14));  // interpolated

  o.mscale = 1.0;
  o.mscale_all_dim = 0.5;  // DeepSeek style: ratio of the two mscales
  CHECK(rope_frequencies(R, o).attention_factor ==
        doctest::Approx((0.1 * 1.0 * std::log(4.0) + 1) / (0.1 * 0.5 * std::log(4.0) + 1)));
  o.attention_factor = 0.75;
  CHECK(rope_frequencies(R, o).attention_factor == 0.75);
}

TEST_CASE("tables hold cos and sin of p * inv_freq times the attention factor, rounded once to the dtype") {
  RopeTableOptions o;
  o.scaling = RopeScaling::yarn;
  o.factor = 2;
  o.original_max_positions = 2048;
  const RopeFrequencies f = rope_frequencies(32, o);
  for (DType t : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    const RopeTables tables = rope_tables(300, 32, t, o);
    CHECK(tables.rows == 300);
    CHECK(tables.width == 16);
    CHECK(tables.desc().shape == std::vector<std::int64_t>{300, 16});
    CHECK(tables.cos.size() == 300 * 16 * dtype_size(t));
    for (std::int64_t p : {0, 1, 150, 299})
      for (std::int64_t i : {0, 7, 15}) {
        const double angle = static_cast<double>(p) * f.inv_freq[static_cast<std::size_t>(i)];
        std::uint64_t want_cos = 0, want_sin = 0;
        detail::store_from_double(&want_cos, t, 0, std::cos(angle) * f.attention_factor);
        detail::store_from_double(&want_sin, t, 0, std::sin(angle) * f.attention_factor);
        CHECK(std::memcmp(&want_cos, tables.cos.data() + (p * 16 + i) * dtype_size(t), dtype_size(t)) == 0);
        CHECK(std::memcmp(&want_sin, tables.sin.data() + (p * 16 + i) * dtype_size(t), dtype_size(t)) == 0);
      }
  }
  const RopeTables plain = rope_tables(4, 8, DType::f32);
  CHECK(detail::load_as_double(plain.cos.data(), DType::f32, 0) == 1.0);  // row 0: the identity
  CHECK(detail::load_as_double(plain.sin.data(), DType::f32, 3) == 0.0);
}

TEST_CASE("axial tables (FLUX EmbedND): one block per axis, each with its own frequency ladder") {
  // FLUX.1: axes_dim (16, 56, 56), theta 10000: width 64, blocks of 8, 28 and 28 columns.
  const std::vector<std::int64_t> axes = {16, 56, 56};
  const RopeTables t = rope_axes_tables(50, axes, DType::f64);
  CHECK(t.width == 64);
  CHECK(t.rows == 50);
  const std::int64_t starts[] = {0, 8, 36};
  for (std::size_t a = 0; a < axes.size(); ++a)
    for (std::int64_t k : {std::int64_t{0}, std::int64_t{3}, axes[a] / 2 - 1})
      for (std::int64_t p : {0, 1, 17, 49}) {
        // EmbedND's rope(): omega = 1 / theta^(arange(0, d, 2) / d); angle = p * omega[k].
        const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * static_cast<double>(k) / static_cast<double>(axes[a]));
        const std::int64_t column = starts[a] + k;
        CHECK(detail::load_as_double(t.cos.data(), DType::f64, p * 64 + column) == doctest::Approx(std::cos(angle)).epsilon(1e-15));
        CHECK(detail::load_as_double(t.sin.data(), DType::f64, p * 64 + column) == doctest::Approx(std::sin(angle)).epsilon(1e-15));
      }
  CHECK(message([] { rope_axes_tables(8, {}, DType::f32); }).find("axes_dims is empty") != std::string::npos);
  CHECK(message([] { rope_axes_tables(8, {16, 7}, DType::f32); }).find("axes_dims holds 7") != std::string::npos);
  CHECK(message([] { rope_axes_tables(0, {16}, DType::f32); }).find("rows is 0") != std::string::npos);
}

TEST_CASE("table builders reject bad parameters by name") {
  CHECK(message([] { rope_tables(0, 64, DType::f32); }).find("rows is 0") != std::string::npos);
  CHECK(message([] { rope_tables(8, 63, DType::f32); }).find("rotary_dim is 63") != std::string::npos);
  CHECK(message([] { rope_tables(8, 64, DType::i32); }).find("dtype is i32") != std::string::npos);
  RopeTableOptions o;
  o.theta = 1.0;
  CHECK(message([&] { rope_frequencies(64, o); }).find("theta is 1") != std::string::npos);
  o = RopeTableOptions::llama3_defaults();
  o.high_freq_factor = 0.5;
  CHECK(message([&] { rope_frequencies(64, o); }).find("low_freq_factor < high_freq_factor") != std::string::npos);
}
