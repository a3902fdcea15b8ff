#include "jit/pointer_check.hpp"

#include "core/errors.hpp"
#include "jit/driver.hpp"

namespace shapejit::jit {

AllocationInfo allocation_info(const void* address) {
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  unsigned int memory_type = 0, managed = 0;
  int device = -1;
  CUdeviceptr start = 0;
  std::size_t size = 0;
  void* values[] = {&memory_type, &managed, &device, &start, &size};
  // Memory the driver does not know (plain host memory, a freed allocation) is no error: every
  // attribute then keeps its null value.
  check(driver().cuPointerGetAttributes(5, attributes, values, reinterpret_cast<CUdeviceptr>(address)),
        "cuPointerGetAttributes");
  AllocationInfo info;
  info.known = memory_type != 0;
  info.managed = managed != 0;
  info.host = memory_type == CU_MEMORYTYPE_HOST;
  info.device = device;
  info.start = static_cast<std::uintptr_t>(start);
  info.size = size;
  return info;
}

void check_allocation(const PointerUse& use, const AllocationInfo& info, int device) {
  const auto base = reinterpret_cast<std::uintptr_t>(use.base);
  if (!info.known)
    invalid_argument("{} ({:#x}) is not device memory: a host pointer, a freed allocation or memory of no "
                     "CUDA context; pass memory allocated on device {} (the stream's device)",
                     use.name, base, device);
  if (info.host && !info.managed)
    invalid_argument("{} ({:#x}) is host memory (pinned or registered); pass memory allocated on device {} "
                     "(the stream's device)",
                     use.name, base, device);
  if (!info.managed && info.device != device)
    invalid_argument("{} ({:#x}) is memory of device {} but the launch runs on device {} (the stream's "
                     "device); pass a stream of device {} or memory of device {}",
                     use.name, base, info.device, device, info.device, device);
  using Wide = __int128;
  const Wide lo = static_cast<Wide>(base) + use.reach.lo, hi = static_cast<Wide>(base) + use.reach.hi;
  const Wide start = info.start, end = static_cast<Wide>(info.start) + info.size;
  if (lo < start || hi > end)
    invalid_argument("{}: the view reaches bytes [{:#x}, {:#x}) but its allocation is [{:#x}, {:#x}) ({} "
                     "bytes {} it); check the pointer, shape and strides",
                     use.name, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi), info.start,
                     info.start + info.size, static_cast<std::uint64_t>(lo < start ? start - lo : hi - end),
                     lo < start ? "before" : "past");
}

void check_pointer(const PointerUse& use, CUdevice device) { check_allocation(use, allocation_info(use.base), device); }

}  // namespace shapejit::jit
