// Checked pointers: before a launch, every pointer is shown to be memory the stream's device can
// use, and every byte a view reaches to lie inside the pointer's allocation.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "core/byte_range.hpp"

namespace shapejit::jit {

/// What a launch asks of one pointer argument: `name` (as the error names it: "src", "pointers.x"), its base pointer
/// and the bytes [reach.lo, reach.hi) around it that the kernel may read or write.
struct PointerUse {
  const char* name;
  const void* base;
  ByteRange reach;
};

/// What the driver says of the memory at an address (a default value for memory it does not know).
struct AllocationInfo {
  bool known = false;    ///< device, managed or registered host memory of some context
  bool managed = false;  ///< managed (unified) memory: usable from any device
  bool host = false;     ///< host memory (pinned or registered), not device memory
  int device = -1;       ///< ordinal of the device that owns it
  std::uintptr_t start = 0, size = 0;  ///< the whole allocation
};

/// Queries the driver (cuPointerGetAttributes) about `address`.
AllocationInfo allocation_info(const void* address);

/// Throws invalid_argument naming `use.name` unless `info` (what the driver said of use.base) is
/// device memory of `device` or managed memory and the allocation holds every byte of the reach.
/// Pure: the testable half of check_pointer.
void check_allocation(const PointerUse& use, const AllocationInfo& info, int device);

/// check_allocation(use, allocation_info(use.base), device).
void check_pointer(const PointerUse& use, CUdevice device);

}  // namespace shapejit::jit
