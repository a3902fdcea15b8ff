// Conversions between the data type and the arithmetic type, shared by the float operators'
// templates. Reads compute_t (float, or double for f64 data).

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
