#include "core/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.hpp"

namespace shapejit::detail {
namespace {

template <typename T>
T load(const void* base, std::int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <typename T>
void store(void* base, std::int64_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
}

/// A binary16-like format with `mantissa` fraction bits and `exponent` exponent bits.
struct HalfFormat {
  int mantissa, exponent;
};
constexpr HalfFormat kF16{10, 5};
constexpr HalfFormat kBF16{7, 8};

double half_to_double(std::uint16_t bits, HalfFormat f) {
  const int bias = (1 << (f.exponent - 1)) - 1;
  const int e = (bits >> f.mantissa) & ((1 << f.exponent) - 1);
  const int m = bits & ((1 << f.mantissa) - 1);
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (e == (1 << f.exponent) - 1) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - f.mantissa);
  return sign * std::ldexp(m + (1 << f.mantissa), e - bias - f.mantissa);
}

// Rounds once, straight from double (no detour through float that could round twice).
std::uint16_t half_from_double(double v, HalfFormat f) {
  const int bias = (1 << (f.exponent - 1)) - 1;
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const std::uint16_t inf = static_cast<std::uint16_t>(((1 << f.exponent) - 1) << f.mantissa);
  if (std::isnan(v)) return static_cast<std::uint16_t>(inf | (1 << (f.mantissa - 1)));
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isinf(a)) return sign | inf;
  int e2 = 0;
  std::frexp(a, &e2);
  int e = std::max(e2 - 1, 1 - bias);  // unbiased exponent, clamped at the subnormal one
  double q = std::nearbyint(std::ldexp(a, f.mantissa - e));  // significand with the implicit bit
  if (q >= std::ldexp(1.0, f.mantissa + 1)) q /= 2, ++e;
  if (e > bias) return sign | inf;
  const auto significand = static_cast<std::uint32_t>(q);
  if (significand < (1u << f.mantissa)) return static_cast<std::uint16_t>(sign | significand);  // subnormal
  return static_cast<std::uint16_t>(sign | ((e + bias) << f.mantissa) | (significand - (1u << f.mantissa)));
}

}  // namespace

double load_as_double(const void* base, DType t, std::int64_t index) {
  switch (t) {
    case DType::u8: return load<std::uint8_t>(base, index);
    case DType::i8: return load<std::int8_t>(base, index);
    case DType::u16: return load<std::uint16_t>(base, index);
    case DType::i16: return load<std::int16_t>(base, index);
    case DType::u32: return load<std::uint32_t>(base, index);
    case DType::i32: return load<std::int32_t>(base, index);
    case DType::u64: return static_cast<double>(load<std::uint64_t>(base, index));
    case DType::i64: return static_cast<double>(load<std::int64_t>(base, index));
    case DType::f16: return half_to_double(load<std::uint16_t>(base, index), kF16);
    case DType::bf16: return half_to_double(load<std::uint16_t>(base, index), kBF16);
    case DType::f32: return load<float>(base, index);
    case DType::f64: return load<double>(base, index);
  }
  return 0;
}

void store_from_double(void* base, DType t, std::int64_t index, double value) {
  switch (t) {
    case DType::f16: return store(base, index, half_from_double(value, kF16));
    case DType::bf16: return store(base, index, half_from_double(value, kBF16));
    case DType::f32: return store(base, index, static_cast<float>(value));
    case DType::f64: return store(base, index, value);
    default: fail(ErrorCode::internal, "store_from_double: {} is not a float dtype", dtype_name(t));
  }
}

}  // namespace shapejit::detail
