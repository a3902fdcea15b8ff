// GPU test support: tests are registered with `* gpu_only()`, which skips them (reported by name
// and count in doctest's summary) when no CUDA device can be used. Device memory helpers go through
// the same dlopen'ed driver as the library.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "jit/driver.hpp"

namespace shapejit::test {

inline bool gpu_present() {
  static const bool present = jit::driver_available();
  return present;
}


/// Decorator: skip this test case when there is no GPU.
inline doctest::skip gpu_only() { return doctest::skip(!gpu_present()); }

/// Owns device memory; makes device 0's primary context current on first use.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    jit::ensure_context();
    if (bytes_ > 0) jit::check(jit::driver().cuMemAlloc(&ptr_, bytes_), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    if (ptr_) jit::driver().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t n) { jit::check(jit::driver().cuMemcpyHtoD(ptr_, host, n), "cuMemcpyHtoD"); }
  void download(void* host, std::size_t n) const {
    jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    jit::check(jit::driver().cuMemcpyDtoH(host, ptr_, n), "cuMemcpyDtoH");
  }
  void fill(std::uint8_t byte) { jit::check(jit::driver().cuMemsetD8(ptr_, byte, bytes_), "cuMemsetD8"); }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_;
};

/// Random bytes (never zeros everywhere) from a fixed seed.
inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> out(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t r = rng();
    std::memcpy(out.data() + i, &r, std::min<std::size_t>(8, n - i));
  }
  return out;
}

}  // namespace shapejit::test
