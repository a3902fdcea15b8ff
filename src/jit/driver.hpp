// The CUDA driver, opened with dlopen("libcuda.so.1") at first use. Nothing links against libcuda.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <vector>

namespace shapejit::jit {

#define SHAPEJIT_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName) X(cuDeviceGet)           \
  X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceTotalMem)             \
  X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)            \
  X(cuStreamGetCtx) X(cuPointerGetAttributes)                                                   \
  X(cuCtxSynchronize) X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuKernelSetAttribute)            \
  X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)   \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)        \
  X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                     \
  X(cuEventSynchronize) X(cuEventElapsedTime)

/// Entry points of the driver; every member is non-null once driver() returned.
struct Driver {
#define SHAPEJIT_DECLARE(name) decltype(&::name) name = nullptr;
  SHAPEJIT_DRIVER_FUNCTIONS(SHAPEJIT_DECLARE)
#undef SHAPEJIT_DECLARE
  int version = 0;  ///< cuDriverGetVersion, e.g. 12080
};

/// Loads and initializes the driver once. Throws ErrorCode::driver_unavailable when libcuda.so.1
/// is missing or cuInit fails (no device, no kernel module).
const Driver& driver();

/// Whether a driver with at least one device is usable; never throws.
bool driver_available() noexcept;

/// The reason driver_available() is false ("" when it is true).
std::string driver_unavailable_reason();

/// Throws ErrorCode::driver_error naming `what` when `result` is not CUDA_SUCCESS.
void check(CUresult result, const char* what);

/// Makes sure a context is current on this thread: the caller's, or else device 0's primary
/// context (retained for the life of the process). Returns the current context's device.
CUdevice ensure_context();

/// The context a launch on `stream` runs in, current for the life of this object: a non-null
/// stream's own context (made current if it is not, and the caller's restored afterwards); for
/// the null, legacy and per-thread default streams, the current context (ensure_context()).
class StreamContext {
 public:
  explicit StreamContext(void* stream);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

  CUdevice device() const noexcept { return device_; }

 private:
  CUdevice device_ = 0;
  bool switched_ = false;
  CUcontext previous_ = nullptr;
};

/// NVRTC architecture name of a device: "sm_" + major + minor, e.g. "sm_90".
std::string device_arch(CUdevice device);

/// The driver's CUDA version as "major.minor", e.g. "12.8".
std::string driver_version_name(const Driver& d);

/// A device the driver sees, as `shapejit doctor` reports it.
struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string arch;       ///< device_arch()
  std::size_t bytes = 0;  ///< total memory
};

/// Every device the driver sees, in ordinal order.
std::vector<DeviceInfo> list_devices(const Driver& d);

}  // namespace shapejit::jit
