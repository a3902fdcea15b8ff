// Reading DLPack capsules (the __dlpack__ protocol that CuPy, JAX and PyTorch speak).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace shapejit::python {

/// What a DLPack tensor says about itself: data pointer (byte offset applied), shape, strides in
/// elements (std::nullopt: compact row-major), shapejit dtype code (-1 when it has none, e.g. bool
/// or complex: such tensors still copy as opaque elements), element bytes, device type and id.
using DlpackView = std::tuple<std::uintptr_t, std::vector<std::int64_t>, std::optional<std::vector<std::int64_t>>,
                              int, int, int, int>;

/// Reads a "dltensor" or "dltensor_versioned" capsule without consuming it: the producer's
/// deleter still runs when the capsule is released. Throws shapejit::Error (invalid_argument) for
/// anything else, or a used capsule.
DlpackView dlpack_view(nanobind::handle capsule);

}  // namespace shapejit::python
