// Timing launches on the current device, for measured planning: scratch device memory and the
// median GPU time of a launch, taken with CUDA events.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>

namespace shapejit::jit {

/// Device memory in the current context for the life of the object.
class DeviceBuffer {
 public:
  /// Allocates `bytes` (at least one) and fills them with a nonzero byte pattern.
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr address() const noexcept { return address_; }

 private:
  CUdeviceptr address_ = 0;
};

/// Median GPU time of one `launch(stream)` in microseconds, on a stream of the current context:
/// two warm-up launches, then seven batches of launches (each batch about half a millisecond),
/// each timed between two events. Every launch is checked by the callee; throws on driver errors.
double median_launch_us(const std::function<void(CUstream)>& launch);

/// The current context's device name as the driver reports it ("NVIDIA H100 80GB HBM3").
std::string current_device_name();

}  // namespace shapejit::jit
