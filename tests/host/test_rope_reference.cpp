// The float64 CPU reference the GPU tests trust, checked against values computed by hand, and the
// host element conversions it reads and writes with.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "ops/rope/reference.hpp"

using namespace shapejit;

namespace {

/// One token, one head of f32 data x (D = x.size()), f32 tables of two rows:
/// row 0 the identity (cos 1, sin 0), row 1 the given cos/sin.
std::vector<double> reference(RopeStyle style, std::vector<float> x, std::vector<float> cos1, std::vector<float> sin1,
                              std::int64_t position, std::int64_t rotary_dim = 0, bool inverse = false) {
  const auto width = static_cast<std::int64_t>(cos1.size());
  std::vector<float> cos(static_cast<std::size_t>(width), 1.0f), sin(static_cast<std::size_t>(width), 0.0f);
  cos.insert(cos.end(), cos1.begin(), cos1.end());
  sin.insert(sin.end(), sin1.begin(), sin1.end());
  RopeDesc desc;
  desc.style = style;
  desc.x = {{1, 1, static_cast<std::int64_t>(x.size())}, {}, DType::f32};
  desc.table = {{2, width}, {}, DType::f32};
  desc.rotary_dim = rotary_dim;
  desc.inverse = inverse;
  desc.positions = TensorDesc{{1}, {}, DType::i64};
  const std::int64_t positions[] = {position};
  std::vector<double> out;
  detail::rope_reference_token(plan::plan_rope_data(desc), {x.data(), nullptr, nullptr, nullptr, cos.data(), sin.data(), positions, 0},
                               0, 0, out);
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}

}  // namespace

TEST_CASE("the CPU reference rotates NeoX halves, GPT-J neighbours, inverse and partial rotary as computed by hand") {
  // x = (1, 2, 3, 4); pair 0 turns by (cos 0.6, sin 0.8), pair 1 by a quarter turn (cos 0, sin 1).
  const std::vector<float> x = {1, 2, 3, 4}, c = {0.6f, 0.0f}, s = {0.8f, 1.0f};
  // NeoX pairs (x0, x2) = (1, 3) and (x1, x3) = (2, 4).
  check_close(reference(RopeStyle::neox, x, c, s, 1), {1 * 0.6 - 3 * 0.8, 2 * 0.0 - 4 * 1.0, 1 * 0.8 + 3 * 0.6, 2 * 1.0 + 4 * 0.0});
  // GPT-J pairs (x0, x1) = (1, 2) and (x2, x3) = (3, 4).
  check_close(reference(RopeStyle::gptj, x, c, s, 1), {1 * 0.6 - 2 * 0.8, 1 * 0.8 + 2 * 0.6, -4, 3});
  // Inverse NeoX: sin negated.
  check_close(reference(RopeStyle::neox, x, c, s, 1, 0, true), {1 * 0.6 + 3 * 0.8, 4, -1 * 0.8 + 3 * 0.6, -2});
  // Partial rotary: R = 2 of D = 4 rotates (x0, x1) only; x2, x3 pass through.
  check_close(reference(RopeStyle::neox, x, {0.6f}, {0.8f}, 1, 2), {1 * 0.6 - 2 * 0.8, 1 * 0.8 + 2 * 0.6, 3, 4});
}

TEST_CASE("the CPU reference is the identity at position 0 and NaN outside the table") {
  const std::vector<float> x = {1.5f, -2.25f, 3.0f, 0.125f, 7.0f, -8.0f};
  for (RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    const auto same = reference(style, x, {0.6f, 0.0f, 0.3f}, {0.8f, 1.0f, 0.1f}, 0);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(same[i] == static_cast<double>(x[i]));
    for (std::int64_t bad : {-1, 2, 1000}) {
      const auto nan = reference(style, x, {0.6f, 0.0f, 0.3f}, {0.8f, 1.0f, 0.1f}, bad);
      for (double v : nan) CHECK(std::isnan(v));
    }
  }
}

TEST_CASE("host f16 and bf16 conversions round once to nearest even and round-trip every value") {
  auto f16_bits = [](double v) {
    std::uint16_t bits = 0;
    detail::store_from_double(&bits, DType::f16, 0, v);
    return bits;
  };
  auto bf16_bits = [](double v) {
    std::uint16_t bits = 0;
    detail::store_from_double(&bits, DType::bf16, 0, v);
    return bits;
  };
  CHECK(f16_bits(1.0) == 0x3c00);
  CHECK(f16_bits(-2.0) == 0xc000);
  CHECK(f16_bits(65504.0) == 0x7bff);
  CHECK(f16_bits(65520.0) == 0x7c00);               // halfway to the next binade: rounds to infinity
  CHECK(f16_bits(std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(f16_bits(std::ldexp(1.0, -25)) == 0x0000);  // tie: to even (zero)
  CHECK(f16_bits(std::ldexp(3.0, -25)) == 0x0002);  // tie: to even (two)
  CHECK(f16_bits(1.0 + std::ldexp(1.0, -11)) == 0x3c00);
  CHECK(f16_bits(1.0 + std::ldexp(3.0, -11)) == 0x3c02);
  CHECK((f16_bits(std::nan("")) & 0x7c00) == 0x7c00);
  CHECK(bf16_bits(1.0) == 0x3f80);
  CHECK(bf16_bits(1.0 + std::ldexp(1.0, -8)) == 0x3f80);
  CHECK(bf16_bits(1.0 + std::ldexp(3.0, -8)) == 0x3f82);
  // A value just above a bf16 tie, which rounding through float first would miss.
  CHECK(bf16_bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 0x3f81);
  CHECK(bf16_bits(-3.0e38) == 0xff62);
  for (DType t : {DType::f16, DType::bf16}) {
    int checked = 0;
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const auto bits = static_cast<std::uint16_t>(b);
      const double v = detail::load_as_double(&bits, t, 0);
      if (std::isnan(v)) continue;
      std::uint16_t back = 0;
      detail::store_from_double(&back, t, 0, v);
      if (back != bits) FAIL_CHECK(dtype_name(t) << " bits " << b << " -> " << v << " -> " << back);
      ++checked;
    }
    CHECK(checked > 60000);
  }
  const std::int8_t small = -5;
  const std::uint64_t big = 0xffffffffffffffffull;
  CHECK(detail::load_as_double(&small, DType::i8, 0) == -5.0);
  CHECK(detail::load_as_double(&big, DType::u64, 0) == 18446744073709551615.0);
}

TEST_CASE("reference: the blocks rule rotates ChatGLM-6B's 2-D RoPE (each half of the head NeoX-rotated by its own "
          "position with one frequency ladder), from rope_axes_tables") {
  // ChatGLM: q1, q2 = chunk(q, 2); q1 rotated at the position, q2 at the block position, each with
  // cos, sin of p * theta^(-2k / 64), k < 32, and rotate_half inside its 64 channels.
  const std::int64_t D = 128, rows = 40, p = 37, bp = 5;
  const RopeTables tables = rope_axes_tables(rows, {64, 64}, DType::f64);
  std::vector<double> x(static_cast<std::size_t>(D));
  for (std::int64_t i = 0; i < D; ++i) x[static_cast<std::size_t>(i)] = std::sin(0.37 * static_cast<double>(i) + 0.1);
  RopeDesc desc;
  desc.style = RopeStyle::neox;
  desc.x = {{1, 1, D}, {}, DType::f64};
  desc.table = tables.desc();
  desc.positions = TensorDesc{{2, 1}, {}, DType::i64};
  desc.axis_rule = RopeAxisRule::blocks;
  desc.axis_sections = {32, 32};
  const std::int64_t positions[] = {p, bp};
  std::vector<double> out;
  detail::rope_reference_token(plan::plan_rope_data(desc),
                               {x.data(), nullptr, nullptr, nullptr, tables.cos.data(), tables.sin.data(), positions, 0},
                               0, 0, out);
  for (std::int64_t half = 0; half < 2; ++half)
    for (std::int64_t k = 0; k < 32; ++k) {
      const double angle = static_cast<double>(half == 0 ? p : bp) * std::pow(10000.0, -2.0 * static_cast<double>(k) / 64);
      const std::size_t a = static_cast<std::size_t>(64 * half + k), b = a + 32;
      INFO("half " << half << " pair " << k);
      CHECK(out[a] == doctest::Approx(x[a] * std::cos(angle) - x[b] * std::sin(angle)).epsilon(1e-12));
      CHECK(out[b] == doctest::Approx(x[b] * std::cos(angle) + x[a] * std::sin(angle)).epsilon(1e-12));
    }
}

TEST_CASE("reference: 8-bit codes decode as int8 and float8 e4m3fn, and their steps") {
  using detail::rope_code_step;
  using detail::rope_code_value;
  CHECK(rope_code_value(RopeQuantize::int8, 0xff, 0.5) == -0.5);
  CHECK(rope_code_value(RopeQuantize::int8, 127, 0.5) == 63.5);
  CHECK(rope_code_value(RopeQuantize::fp8_e4m3, 0x38, 2.0) == 2.0);    // 1.0: exponent 7, mantissa 0
  CHECK(rope_code_value(RopeQuantize::fp8_e4m3, 0xb8, 1.0) == -1.0);
  CHECK(rope_code_value(RopeQuantize::fp8_e4m3, 0x7e, 1.0) == 448.0);  // the largest finite value
  CHECK(rope_code_value(RopeQuantize::fp8_e4m3, 0x01, 1.0) == 0x1p-9);  // the smallest subnormal
  CHECK(std::isnan(rope_code_value(RopeQuantize::fp8_e4m3, 0x7f, 1.0)));
  CHECK(std::isnan(rope_code_value(RopeQuantize::fp8_e4m3, 0xff, 1.0)));
  CHECK(rope_code_step(RopeQuantize::int8, 5.0, 0.25) == 0.25);
  CHECK(rope_code_step(RopeQuantize::fp8_e4m3, 1.0, 1.0) == 0.125);
  CHECK(rope_code_step(RopeQuantize::fp8_e4m3, 300.0, 2.0) == 32.0);  // 150 in [128, 256): steps of 16
  CHECK(rope_code_step(RopeQuantize::fp8_e4m3, 0.001, 1.0) == 0x1p-9);
}
