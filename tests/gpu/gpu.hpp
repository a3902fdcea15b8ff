// GPU test support: tests are registered with `* gpu_only()`, which skips them (reported by name
// and count in doctest's summary) when no CUDA device can be used. Device memory helpers come from
// support/device.hpp.
#pragma once

#include <doctest/doctest.h>

#include "jit/driver.hpp"
#include "support/device.hpp"

namespace shapejit::test {

inline bool gpu_present() {
  static const bool present = jit::driver_available();
  return present;
}

/// Decorator: skip this test case when there is no GPU.
inline doctest::skip gpu_only() { return doctest::skip(!gpu_present()); }

using support::DeviceBuffer;
using support::random_bytes;

}  // namespace shapejit::test
