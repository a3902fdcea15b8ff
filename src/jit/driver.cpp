#include "jit/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "core/errors.hpp"

namespace shapejit::jit {
namespace {

#define SHAPEJIT_STRINGIFY_EXPANDED(x) SHAPEJIT_STRINGIFY(x)
#define SHAPEJIT_STRINGIFY(x) #x

struct DriverState {
  Driver driver;
  std::string error;  // non-empty when the driver cannot be used
};

DriverState load_driver() {
  DriverState state;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    state.error = fmt::format("the CUDA driver (libcuda.so.1) could not be loaded: {}", dlerror());
    return state;
  }
  Driver& d = state.driver;
  // The versioned symbol names (cuMemAlloc_v2, ...) come from cuda.h's macros, expanded here.
#define SHAPEJIT_LOAD(name)                                                                    \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(handle, SHAPEJIT_STRINGIFY_EXPANDED(name))); \
  if (d.name == nullptr) {                                                                     \
    state.error = "the CUDA driver lacks " SHAPEJIT_STRINGIFY_EXPANDED(name) " (driver too old?)"; \
    return state;                                                                              \
  }
  SHAPEJIT_DRIVER_FUNCTIONS(SHAPEJIT_LOAD)
#undef SHAPEJIT_LOAD
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    state.error = fmt::format("cuInit failed ({}): no usable GPU or driver", name ? name : "?");
    return state;
  }
  d.cuDriverGetVersion(&d.version);
  int count = 0;
  if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) state.error = "no CUDA device found";
  return state;
}

const DriverState& state() {
  static const DriverState s = load_driver();
  return s;
}

}  // namespace

const Driver& driver() {
  const DriverState& s = state();
  if (!s.error.empty()) throw Error(ErrorCode::driver_unavailable, s.error);
  return s.driver;
}

bool driver_available() noexcept { return state().error.empty(); }

std::string driver_unavailable_reason() { return state().error; }

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  d.cuGetErrorName(result, &name);
  d.cuGetErrorString(result, &text);
  fail(ErrorCode::driver_error, "{} failed: {} ({})", what, name ? name : "unknown error",
       text ? text : "");
}

CUdevice ensure_context() {
  const Driver& d = driver();
  CUcontext current = nullptr;
  check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr) {
    static CUcontext primary = [&] {
      CUdevice device0 = 0;
      check(d.cuDeviceGet(&device0, 0), "cuDeviceGet(0)");
      CUcontext ctx = nullptr;
      check(d.cuDevicePrimaryCtxRetain(&ctx, device0), "cuDevicePrimaryCtxRetain(device 0)");
      return ctx;
    }();
    check(d.cuCtxSetCurrent(primary), "cuCtxSetCurrent(primary context of device 0)");
  }
  CUdevice device = 0;
  check(d.cuCtxGetDevice(&device), "cuCtxGetDevice");
  return device;
}

namespace {

bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

}  // namespace

StreamContext::StreamContext(void* stream) {
  const auto s = static_cast<CUstream>(stream);
  if (is_default_stream(s)) {
    device_ = ensure_context();
    return;
  }
  const Driver& d = driver();
  CUcontext stream_context = nullptr, current = nullptr;
  check(d.cuStreamGetCtx(s, &stream_context), "cuStreamGetCtx (is the stream valid?)");
  check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (stream_context != current) {
    check(d.cuCtxSetCurrent(stream_context), "cuCtxSetCurrent(the stream's context)");
    previous_ = current;
    switched_ = true;
  }
  if (const CUresult r = d.cuCtxGetDevice(&device_); r != CUDA_SUCCESS) {
    if (switched_) d.cuCtxSetCurrent(previous_);
    check(r, "cuCtxGetDevice");
  }
}

StreamContext::~StreamContext() {
  if (switched_) driver().cuCtxSetCurrent(previous_);
}

std::string device_arch(CUdevice device) {
  const Driver& d = driver();
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute(compute capability major)");
  check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute(compute capability minor)");
  return fmt::format("sm_{}{}", major, minor);
}

std::string driver_version_name(const Driver& d) {
  return fmt::format("{}.{}", d.version / 1000, d.version % 1000 / 10);
}

std::vector<DeviceInfo> list_devices(const Driver& d) {
  int count = 0;
  check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    check(d.cuDeviceGet(&dev, i), "cuDeviceGet");
    char name[256] = {};
    check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    std::size_t bytes = 0;
    check(d.cuDeviceTotalMem(&bytes, dev), "cuDeviceTotalMem");
    out.push_back({i, name, device_arch(dev), bytes});
  }
  return out;
}

}  // namespace shapejit::jit
