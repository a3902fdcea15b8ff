// The float64 CPU reference of rope that tests and tools compare kernels with (element conversions:
// core/convert.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/convert.hpp"
#include "ops/rope/plan.hpp"
#include "shapejit/rope.hpp"

namespace shapejit::detail {

/// The rope outputs of one token (batch b, sequence index s), computed in double from host
/// copies of the inputs laid out exactly as `plan.desc` describes them (x, k, v, table, positions;
/// cos and sin share the table's layout). `out` receives [heads_q + heads_k][dhead] values, q
/// heads first (with a cache append, then heads_k rows of v as given); a position outside the
/// table makes q's and k's rows NaN. A plan fused with a Hadamard
/// transform also multiplies each group of its heads by scale * H_n (the dense definition), before
/// or after the rotation as the plan orders them.
void rope_reference_token(const plan::RopePlanData& plan, const RopePointers& host, std::int64_t b, std::int64_t s,
                          std::vector<double>& out);

/// An 8-bit code (int8: an i8 value; fp8_e4m3: float8 e4m3fn bits, NaN for 0x7f and 0xff) times
/// its scale.
double rope_code_value(RopeQuantize q, std::uint8_t code, double scale);

/// The spacing of the codes times `scale` at `value`: the scale for int8, the e4m3 step at
/// |value| / scale (2^-9 below 2^-6) for fp8_e4m3. A dequantized code within one step of the
/// value it stands for is right.
double rope_code_step(RopeQuantize q, double value, double scale);


}  // namespace shapejit::detail
