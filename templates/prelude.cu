// shapejit prelude: fixed-width types, fp16/bf16 conversions, vectors and fast division.
// Generated kernels include no toolkit header; everything they need is defined here.
typedef unsigned char sj_u8;
typedef signed char sj_i8;
typedef unsigned short sj_u16;
typedef short sj_i16;
typedef unsigned int sj_u32;
typedef int sj_i32;
typedef unsigned long long sj_u64;
typedef long long sj_i64;

struct alignas(2) sj_f16 { unsigned short bits; };
struct alignas(2) sj_bf16 { unsigned short bits; };

// Opaque element and vector units: N bytes moved as one access of that width.
template <int N> struct sj_bytes;
template <> struct alignas(1) sj_bytes<1> { unsigned char v; };
template <> struct alignas(2) sj_bytes<2> { unsigned short v; };
template <> struct alignas(4) sj_bytes<4> { unsigned int v; };
template <> struct alignas(8) sj_bytes<8> { unsigned long long v; };
template <> struct alignas(16) sj_bytes<16> { unsigned int v[4]; };

// W elements of T seen as one W * sizeof(T)-byte access.
template <int W, typename T>
union sj_access {
  sj_bytes<W * sizeof(T)> bytes;
  T elements[W];
};

// N elements at p (aligned to W elements) as N/W accesses of W elements.
template <int N, int W, typename T>
__device__ __forceinline__ void sj_load_elements(T (&v)[N], const T* p) {
#pragma unroll
  for (int i = 0; i < N / W; ++i) {
    sj_access<W, T> a;
    const auto* from = reinterpret_cast<const decltype(a.bytes)*>(p) + i;
    __builtin_assume(__isGlobal(from));  // lets the compiler use global, not generic, loads
    a.bytes = *from;
#pragma unroll
    for (int j = 0; j < W; ++j) v[i * W + j] = a.elements[j];
  }
}

// One access that asks L2 to evict its line last (sm_80 and later): for small data that every
// block reads again, such as rope's tables, so that the streamed tensors don't push it out.
__device__ __forceinline__ unsigned long long sj_l2_evict_last_policy() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ sj_bytes<2> sj_load_l2_last(const sj_bytes<2>* p) {
  sj_bytes<2> v;
  asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v.v) : "l"(p), "l"(sj_l2_evict_last_policy()));
  return v;
}
__device__ __forceinline__ sj_bytes<4> sj_load_l2_last(const sj_bytes<4>* p) {
  sj_bytes<4> v;
  asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v.v) : "l"(p), "l"(sj_l2_evict_last_policy()));
  return v;
}
__device__ __forceinline__ sj_bytes<8> sj_load_l2_last(const sj_bytes<8>* p) {
  sj_bytes<8> v;
  asm("ld.global.L2::cache_hint.u64 %0, [%1], %2;" : "=l"(v.v) : "l"(p), "l"(sj_l2_evict_last_policy()));
  return v;
}
__device__ __forceinline__ sj_bytes<16> sj_load_l2_last(const sj_bytes<16>* p) {
  sj_bytes<16> v;
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.v[0]), "=r"(v.v[1]), "=r"(v.v[2]), "=r"(v.v[3])
      : "l"(p), "l"(sj_l2_evict_last_policy()));
  return v;
}

// sj_load_elements with the evict-last hint (elements of 2 to 16 bytes per access; before sm_80,
// plain loads).
template <int N, int W, typename T>
__device__ __forceinline__ void sj_load_elements_l2_last(T (&v)[N], const T* p) {
#if __CUDA_ARCH__ >= 800
#pragma unroll
  for (int i = 0; i < N / W; ++i) {
    sj_access<W, T> a;
    a.bytes = sj_load_l2_last(reinterpret_cast<const decltype(a.bytes)*>(p) + i);
#pragma unroll
    for (int j = 0; j < W; ++j) v[i * W + j] = a.elements[j];
  }
#else
  sj_load_elements<N, W>(v, p);
#endif
}

template <int N, int W, typename T>
__device__ __forceinline__ void sj_store_elements(T* p, const T (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N / W; ++i) {
    sj_access<W, T> a;
#pragma unroll
    for (int j = 0; j < W; ++j) a.elements[j] = v[i * W + j];
    auto* to = reinterpret_cast<decltype(a.bytes)*>(p) + i;
    __builtin_assume(__isGlobal(to));
    *to = a.bytes;
  }
}

__device__ __forceinline__ float sj_to_float(sj_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ float sj_to_float(sj_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }
__device__ __forceinline__ float sj_to_float(float x) { return x; }
__device__ __forceinline__ float sj_to_float(double x) { return (float)x; }

__device__ __forceinline__ double sj_to_double(sj_f16 h) { return (double)sj_to_float(h); }
__device__ __forceinline__ double sj_to_double(sj_bf16 h) { return (double)sj_to_float(h); }
__device__ __forceinline__ double sj_to_double(float x) { return (double)x; }
__device__ __forceinline__ double sj_to_double(double x) { return x; }

template <typename T> __device__ __forceinline__ T sj_from_float(float f);
template <> __device__ __forceinline__ float sj_from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ double sj_from_float<double>(float f) { return (double)f; }
template <> __device__ __forceinline__ sj_f16 sj_from_float<sj_f16>(float f) {
  sj_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
template <> __device__ __forceinline__ sj_bf16 sj_from_float<sj_bf16>(float f) {
  sj_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}

// Which 2-byte float type T is.
template <typename T> constexpr bool sj_is_bf16 = false;
template <> constexpr bool sj_is_bf16<sj_bf16> = true;
template <typename T> constexpr bool sj_is_f16 = false;
template <> constexpr bool sj_is_f16<sj_f16> = true;

// Two floats rounded to a 2-byte float type T as one word, `low` in its low half: one conversion
// instruction for both on sm_80 and later.
template <typename T>
__device__ __forceinline__ unsigned sj_pair_from_floats(float low, float high) {
  static_assert(sizeof(T) == 2, "pairs of f16 or bf16 values");
#if __CUDA_ARCH__ >= 800
  unsigned w;
  if constexpr (sj_is_bf16<T>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(high), "f"(low));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(high), "f"(low));
  return w;
#else
  return sj_from_float<T>(low).bits | (unsigned)sj_from_float<T>(high).bits << 16;
#endif
}

__device__ __forceinline__ double sj_nan_double() { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ __forceinline__ float sj_nan_float() { return __uint_as_float(0x7fc00000u); }

// n / d for any 32-bit n, with (multiplier, shift) computed on the host (make_fast_divisor).
__device__ __forceinline__ unsigned sj_fastdiv(unsigned n, unsigned multiplier, unsigned shift) {
  return (unsigned)(((unsigned long long)__umulhi(n, multiplier) + n) >> shift);
}
