// The float64 CPU reference of hadamard that tests and tools compare kernels with: each output by
// the dense definition y[i] = scale * sum_j H_n[i][j] x[j], nothing shared with the kernel's
// factorization.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/hadamard/plan.hpp"

namespace shapejit::detail {

/// Element offsets of the n values of row `row` (rows ordered as the kernel's: head group fastest,
/// then the outer dims innermost first) in a view of the plan's shape with `strides`.
std::vector<std::int64_t> hadamard_row_offsets(const plan::HadamardPlanData& plan,
                                               const std::vector<std::int64_t>& strides, std::int64_t row);

/// The n inputs of row `row`, as doubles, from a host copy of x laid out as `plan.desc.x` says.
std::vector<double> hadamard_row_inputs(const plan::HadamardPlanData& plan, const void* host_x, std::int64_t row);

/// Output i of a row whose inputs are `in`, scale included.
double hadamard_reference_output(const plan::HadamardPlanData& plan, const std::vector<double>& in, std::int64_t i);

}  // namespace shapejit::detail
