// Rope code generation: a specialization rendered into templates/rope.cu.
#pragma once

#include <string>

#include "jit/program.hpp"
#include "ops/rope/plan.hpp"

namespace shapejit::codegen {

/// A readable kernel name that spells out the specialization, e.g.
/// "rope_neox_bf16_tabf32_posi64b_d128_r128_4d_k_c8_a8_ta4".
std::string rope_kernel_label(const plan::RopeSpec& spec);

/// The complete program of `spec`; `manifest_line` is the `shapejit plan` line that reproduces it.
jit::Program rope_program(const plan::RopeSpec& spec, const std::string& manifest_line);

}  // namespace shapejit::codegen
