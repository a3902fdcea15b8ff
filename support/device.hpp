// Device helpers shared by examples, tests and benchmarks (not part of the library): device
// buffers, random host data, and CUDA-event timing, all through shapejit's dlopen'ed driver.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "jit/driver.hpp"

namespace shapejit::support {

/// Owns device memory; makes a context current (device 0's primary one when none is).
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
  CUdeviceptr address() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

  void upload(const void* host, std::size_t n, std::size_t offset = 0) {
    jit::check(jit::driver().cuMemcpyHtoD(ptr_ + offset, host, n), "cuMemcpyHtoD");
  }
  /// Waits for all work in the context, then copies `n` bytes out (from byte `offset`).
  void download(void* host, std::size_t n, std::size_t offset = 0) const {
    jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed?)");
    jit::check(jit::driver().cuMemcpyDtoH(host, ptr_ + offset, n), "cuMemcpyDtoH");
  }
  /// Fills every byte with `byte` (poisoning before a correctness run) and waits until they are
  /// written: the memset may still be running when cuMemsetD8 returns, and a kernel on a
  /// non-blocking stream does not wait for it.
  void fill(std::uint8_t byte) {
    jit::check(jit::driver().cuMemsetD8(ptr_, byte, bytes_), "cuMemsetD8");
    jit::check(jit::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_;
};

/// The name of the current context's device.
inline std::string device_name() {
  char name[256] = {};
  CUdevice device = 0;
  jit::check(jit::driver().cuCtxGetDevice(&device), "cuCtxGetDevice");
  jit::check(jit::driver().cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  return name;
}

/// Deterministic pseudo-random bytes (xorshift64*), never all zeros.
inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    const std::uint64_t r = x * 0x2545f4914f6cdd1dull;
    std::memcpy(out.data() + i, &r, std::min<std::size_t>(8, n - i));
  }
  return out;
}

/// Median of per-run device times in milliseconds, measured with CUDA events around each run of
/// `body(stream)` after `warmup` untimed runs.
template <typename Body>
double median_ms(Body&& body, int warmup = 10, int runs = 50, CUstream stream = nullptr) {
  const jit::Driver& d = jit::driver();
  CUevent start = nullptr, stop = nullptr;
  jit::check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  jit::check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < warmup; ++i) body(stream);
  std::vector<float> times(static_cast<std::size_t>(runs));
  for (float& t : times) {
    jit::check(d.cuEventRecord(start, stream), "cuEventRecord");
    body(stream);
    jit::check(d.cuEventRecord(stop, stream), "cuEventRecord");
    jit::check(d.cuEventSynchronize(stop), "cuEventSynchronize (a kernel failed?)");
    jit::check(d.cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Device-to-device copy bandwidth in GB/s (bytes read + bytes written over time) for `bytes`
/// bytes, measured now: the ceiling every memory-movement kernel is compared with.
inline double copy_bandwidth_gbs(std::size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  a.fill(0x5a);
  const double ms = median_ms([&](CUstream s) {
    jit::check(jit::driver().cuMemcpyDtoDAsync(b.address(), a.address(), bytes, s), "cuMemcpyDtoDAsync");
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

}  // namespace shapejit::support
