// Host element conversions between doubles and every dtype, for CPU references, table builders and
// tests.
#pragma once

#include <cstdint>

#include "shapejit/core.hpp"

namespace shapejit::detail {

/// Element `index` of a host array of dtype `t` (any float or integer dtype), as a double.
double load_as_double(const void* base, DType t, std::int64_t index);

/// Stores `value` rounded to nearest (ties to even) into element `index` of a host array of
/// float dtype `t`; values beyond the range become infinities, NaN stays NaN.
void store_from_double(void* base, DType t, std::int64_t index, double value);

}  // namespace shapejit::detail
