// Torch tensors read from C++: the fast path of eager launches and one-shot calls.
//
// Each entry point either launches with tensors that match what it expects, or returns False
// having done nothing, and the Python layer (shapejit/_torch.py, _ops.py) takes its general path,
// which explains any error and makes missing plans. Validation and messages stay in one place;
// this file only makes the common case cheap: a tensor is read through libtorch's stable C
// functions (found at run time; nothing of torch is needed to build) instead of Python attribute
// calls, and the one-shot plans are found by a key of raw integers.
#pragma once

#include <nanobind/nanobind.h>

namespace shapejit::python {

/// Adds the torch fast path's functions and the Layouts class to the module.
void bind_torch_fast_path(nanobind::module_& m);

}  // namespace shapejit::python
