// A kernel ready to launch from a plan: resolved once per device, then launched without locks.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <vector>

#include "jit/driver.hpp"
#include "jit/program.hpp"

namespace shapejit::jit {

struct LaunchDims {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;  ///< dynamic shared memory
};

class KernelHandle {
 public:
  /// `max_shared_bytes`: the most dynamic shared memory any launch will ask for.
  explicit KernelHandle(Program program, unsigned max_shared_bytes = 0);
  KernelHandle(const KernelHandle&) = delete;
  KernelHandle& operator=(const KernelHandle&) = delete;

  const Program& program() const noexcept { return program_; }

  /// Launches on `stream` on the stream's device, in the stream's context, whatever the caller's
  /// current context (the null and per-thread default streams: the current context, device 0's
  /// primary context when there is none). The first launch on a device loads or compiles that
  /// device's kernel. `args` are the kernel's parameters, as for cuLaunchKernel. Throws on any failure.
  void launch(const LaunchDims& dims, void* stream, void** args) const;
  /// launch() for a caller that already holds `context`, the StreamContext of `stream`.
  void launch(const StreamContext& context, const LaunchDims& dims, void* stream, void** args) const;

  /// Loads or compiles the kernel for the device of `stream` now, so the first launch does not.
  void prepare(void* stream = nullptr) const;

 private:
  static constexpr int kMaxDevices = 64;
  CUkernel kernel_for(CUdevice device) const;

  Program program_;
  unsigned max_shared_bytes_;
  mutable std::array<std::atomic<CUkernel>, kMaxDevices> per_device_{};
};

/// Loads or compiles every kernel in `kernels` for the current context's device, on up to `workers`
/// threads that each make that context current: NVRTC compiles distinct programs side by side, so
/// measured planning's candidates compile in about the time of the slowest few rather than of all.
/// After every worker has stopped, rethrows the first failure.
void prepare_kernels(const std::vector<const KernelHandle*>& kernels, unsigned workers);

}  // namespace shapejit::jit
