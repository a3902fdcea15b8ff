// Launch helpers shared by the extension's entry points (integer pointers and torch tensors).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "shapejit/shapejit.hpp"

namespace shapejit::python {

inline void* as_ptr(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

/// A rope launch; checked plans wait for the stream, so they let other Python threads run meanwhile.
inline void launch_rope(const RopePlan& plan, const RopePointers& p, void* stream, bool checked) {
  if (checked) {
    nanobind::gil_scoped_release release;
    plan.launch(p, stream);
  } else {
    plan.launch(p, stream);
  }
}

}  // namespace shapejit::python
