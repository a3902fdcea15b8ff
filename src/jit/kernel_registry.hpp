// The process-wide kernel registry: one KernelHandle per specialization key, shared by every plan
// of every operator. A program is rendered only when its key is first registered.
#pragma once

#include <functional>

#include "core/spec.hpp"
#include "jit/launch.hpp"

namespace shapejit::jit {

/// The kernel registered under `key`, created from `make()` (with `max_shared_bytes`) on the key's
/// first registration. The handle lives as long as the process; plans keep pointers to it.
const KernelHandle& registered_kernel(SpecKey key, const std::function<Program()>& make,
                                      unsigned max_shared_bytes = 0);

}  // namespace shapejit::jit
