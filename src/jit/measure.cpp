#include "jit/measure.hpp"

#include <algorithm>
#include <array>

#include "jit/driver.hpp"

namespace shapejit::jit {
namespace {

// Owns a stream and two events of the current context.
struct Timer {
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;

  Timer() {
    const Driver& d = driver();
    check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate (tuning)");
    check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate (tuning)");
    check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate (tuning)");
  }
  ~Timer() {
    const Driver& d = driver();
    if (stop) d.cuEventDestroy(stop);
    if (start) d.cuEventDestroy(start);
    if (stream) d.cuStreamDestroy(stream);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Milliseconds for `count` back-to-back launches.
  float time(const std::function<void(CUstream)>& launch, int count) const {
    const Driver& d = driver();
    check(d.cuEventRecord(start, stream), "cuEventRecord (tuning)");
    for (int i = 0; i < count; ++i) launch(stream);
    check(d.cuEventRecord(stop, stream), "cuEventRecord (tuning)");
    check(d.cuEventSynchronize(stop), "cuEventSynchronize (tuning)");
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime (tuning)");
    return ms;
  }
};

constexpr int kBatches = 7;
constexpr float kBatchMs = 0.5f;
constexpr int kMaxBatchLaunches = 200;

}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  const Driver& d = driver();
  check(d.cuMemAlloc(&address_, std::max<std::size_t>(bytes, 1)), "cuMemAlloc (tuning scratch)");
  const CUresult filled = d.cuMemsetD8(address_, 0x5a, std::max<std::size_t>(bytes, 1));
  if (filled != CUDA_SUCCESS) {
    d.cuMemFree(address_);
    check(filled, "cuMemsetD8 (tuning scratch)");
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (address_) driver().cuMemFree(address_);
}

double median_launch_us(const std::function<void(CUstream)>& launch) {
  const Timer timer;
  timer.time(launch, 2);
  const float one_ms = std::max(timer.time(launch, 1), 1e-4f);
  const int count = std::clamp(static_cast<int>(kBatchMs / one_ms), 1, kMaxBatchLaunches);
  std::array<double, kBatches> per_launch_us{};
  for (double& us : per_launch_us) us = 1000.0 * timer.time(launch, count) / count;
  std::nth_element(per_launch_us.begin(), per_launch_us.begin() + kBatches / 2, per_launch_us.end());
  return per_launch_us[kBatches / 2];
}

std::string current_device_name() {
  const Driver& d = driver();
  const CUdevice device = ensure_context();
  std::array<char, 256> name{};
  check(d.cuDeviceGetName(name.data(), static_cast<int>(name.size()), device), "cuDeviceGetName");
  return name.data();
}

}  // namespace shapejit::jit
