// GPU test support: tests are registered with `* gpu_only()`, which skips them (reported by name
// and count in doctest's summary) when no CUDA device can be used. Device memory helpers come from
// support/device.hpp.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "jit/driver.hpp"
#include "shapejit/core.hpp"
#include "support/device.hpp"

namespace shapejit::test {

inline bool gpu_present() {
  static const bool present = jit::driver_available();
  return present;
}

/// Decorator: skip this test case when there is no GPU.
inline doctest::skip gpu_only() { return doctest::skip(!gpu_present()); }

/// CUDA devices the driver sees (0 without a GPU).
inline int device_count() {
  if (!gpu_present()) return 0;
  int count = 0;
  jit::check(jit::driver().cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

/// Decorator: skip this test case when fewer than two GPUs are present.
inline doctest::skip two_gpus() { return doctest::skip(device_count() < 2); }

/// Spacing of the float dtype's values at |v|.
inline double ulp(DType t, double v) {
  const int mantissa = t == DType::f16 ? 10 : t == DType::bf16 ? 7 : t == DType::f32 ? 23 : 52;
  const int min_exponent = t == DType::f16 ? -14 : t == DType::f64 ? -1022 : -126;
  int e = 0;
  std::frexp(std::fabs(v), &e);
  return std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa);
}

using support::DeviceBuffer;
using support::random_bytes;

}  // namespace shapejit::test
