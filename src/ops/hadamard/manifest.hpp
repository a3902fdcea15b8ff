// The hadamard manifest line: `hadamard --dtype D --shape ...,H,D [--group G] [--scale S] [--inplace]
// [--check-pointers] [--vec N] [--index 32|64] [--row-dims N]`, what `shapejit plan` accepts and
// record mode writes.
#pragma once

#include <string>

#include "ops/hadamard/plan.hpp"

namespace shapejit::plan {

/// The manifest line that reproduces the kernels of `plan`: dtype, shape, group and flags, plus
/// --vec, --index and --row-dims where the plan's strides made it choose differently from the
/// contiguous descriptor of the same shape.
std::string hadamard_manifest_line(const HadamardPlanData& plan);

}  // namespace shapejit::plan
