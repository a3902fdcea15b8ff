#include "jit/kernel_registry.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace shapejit::jit {

const KernelHandle& registered_kernel(SpecKey key, const std::function<Program()>& make, unsigned max_shared_bytes) {
  static std::mutex mutex;
  static std::unordered_map<std::uint64_t, std::unique_ptr<KernelHandle>> kernels;
  std::lock_guard lock(mutex);
  std::unique_ptr<KernelHandle>& slot = kernels[key.hash];
  if (!slot) slot = std::make_unique<KernelHandle>(make(), max_shared_bytes);
  return *slot;
}

}  // namespace shapejit::jit
