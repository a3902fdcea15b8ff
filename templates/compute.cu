// Conversions between the data type and the arithmetic type, and to float8 e4m3fn codes, shared
// by the float operators' templates. Reads compute_t (float, or double for f64 data).

template <typename T>
__device__ __forceinline__ compute_t to_compute(T v) {
  if constexpr (sizeof(compute_t) == 8) return sj_to_double(v);
  else return sj_to_float(v);
}

template <typename T>
__device__ __forceinline__ T from_compute(compute_t v) {
  if constexpr (sizeof(compute_t) == 8) return v;  // f64 data only
  else return sj_from_float<T>(v);
}

__device__ __forceinline__ compute_t nan_compute() {
  if constexpr (sizeof(compute_t) == 8) return sj_nan_double();
  else return sj_nan_float();
}

// x (|x| <= 448) as float8 e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, rounded to
// nearest even; NaN as 0x7f.
__device__ __forceinline__ unsigned char to_e4m3(float x) {
  if (x != x) return 0x7f;
  const unsigned sign = __float_as_uint(x) >> 31 << 7;
  const float a = fminf(fabsf(x), 448.0f);
  unsigned code;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (a code of 8 is 2^-6, the first normal)
    code = (unsigned)__float2int_rn(a * 512.0f);
  } else {
    const unsigned bits = __float_as_uint(a);
    const unsigned rounded = bits + 0x7ffffu + ((bits >> 20) & 1u);  // to 3 mantissa bits, ties to even
    code = (((rounded >> 23) - 120u) << 3) | ((rounded >> 20) & 7u);  // exponent rebased from 127 to 7
    code = code > 0x7eu ? 0x7eu : code;
  }
  return (unsigned char)(sign | code);
}

// Two values as float8 e4m3fn codes, a in the low byte: the conversion instruction where the chip
// has one (sm_89 on), else the rounding above.
__device__ __forceinline__ unsigned short to_e4m3x2(float a, float b) {
#if __CUDA_ARCH__ >= 890
  unsigned short pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(b), "f"(a));
  return pair;
#else
  return (unsigned short)(to_e4m3(a) | (unsigned)to_e4m3(b) << 8);
#endif
}
