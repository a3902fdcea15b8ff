// Host-side rope helpers: element conversions between doubles and every rope dtype, and the
// float64 CPU reference that tests and tools compare kernels with.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/rope/plan.hpp"
#include "shapejit/rope.hpp"

namespace shapejit::detail {

/// Element `index` of a host array of dtype `t` (any float or integer dtype), as a double.
double load_as_double(const void* base, DType t, std::int64_t index);

/// Stores `value` rounded to nearest (ties to even) into element `index` of a host array of
/// float dtype `t`; values beyond the range become infinities, NaN stays NaN.
void store_from_double(void* base, DType t, std::int64_t index, double value);

/// The rope outputs of one token (batch b, sequence index s), computed in double from host
/// copies of the inputs laid out exactly as `plan.desc` describes them (x, k, table, positions;
/// cos and sin share the table's layout). `out` receives [heads_q + heads_k][dhead] values, q
/// heads first; a position outside the table gives a row of NaN.
void rope_reference_token(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b, std::int64_t s,
                          std::vector<double>& out);

}  // namespace shapejit::detail
