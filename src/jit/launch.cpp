#include "jit/launch.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "core/errors.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_cache.hpp"

namespace shapejit::jit {
namespace {

constexpr unsigned kDefaultSharedLimit = 48 * 1024;

const std::string& cached_device_arch(CUdevice device) {
  static std::mutex mutex;
  static std::array<std::string, 64> archs;
  std::lock_guard lock(mutex);
  std::string& arch = archs.at(static_cast<std::size_t>(device));
  if (arch.empty()) arch = device_arch(device);
  return arch;
}

}  // namespace

KernelHandle::KernelHandle(Program program, unsigned max_shared_bytes)
    : program_(std::move(program)), max_shared_bytes_(max_shared_bytes) {}

CUkernel KernelHandle::kernel_for(CUdevice device) const {
  if (device < 0 || device >= kMaxDevices)
    fail(ErrorCode::unsupported, "device ordinal {} is beyond the {} devices shapejit supports", device, kMaxDevices);
  std::atomic<CUkernel>& slot = per_device_[static_cast<std::size_t>(device)];
  if (CUkernel k = slot.load(std::memory_order_acquire)) return k;
  CUkernel k = obtain_kernel(program_, cached_device_arch(device));
  if (max_shared_bytes_ > kDefaultSharedLimit)
    check(driver().cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        static_cast<int>(max_shared_bytes_), k, device),
          "cuKernelSetAttribute(max dynamic shared memory)");
  slot.store(k, std::memory_order_release);
  return k;
}

void KernelHandle::prepare(void* stream) const { kernel_for(StreamContext(stream).device()); }

void KernelHandle::launch(const LaunchDims& dims, void* stream, void** args) const {
  const StreamContext context(stream);
  launch(context, dims, stream, args);
}

void KernelHandle::launch(const StreamContext& context, const LaunchDims& dims, void* stream, void** args) const {
  const CUkernel kernel = kernel_for(context.device());
  const CUresult r = driver().cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), dims.grid[0], dims.grid[1],
                                             dims.grid[2], dims.block[0], dims.block[1], dims.block[2],
                                             dims.shared_bytes, static_cast<CUstream>(stream), args, nullptr);
  if (r != CUDA_SUCCESS) check(r, program_.label.c_str());
}

void prepare_kernels(const std::vector<const KernelHandle*>& kernels, unsigned workers) {
  const Driver& d = driver();
  ensure_context();
  CUcontext context = nullptr;
  check(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    try {
      check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent (preparing kernels)");
      for (std::size_t i; (i = next++) < kernels.size();) kernels[i]->prepare();
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = kernels.size();  // the other workers stop after their current kernel
    }
  };
  std::vector<std::thread> threads;
  try {
    for (std::size_t t = 0; t < std::min<std::size_t>(workers, kernels.size()); ++t) threads.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started (or this one) do the rest.
  }
  if (threads.empty()) work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace shapejit::jit
