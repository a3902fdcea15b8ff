// Hadamard codegen: a spec -> the kernel's program (the prelude, the spec's facts, the transform
// piece and hadamard.cu).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/program.hpp"
#include "ops/hadamard/plan.hpp"

namespace shapejit::codegen {

/// The kernel's label, e.g. hadamard_bf16_n4096_g32_d128_m1_v8_t128_r1_dims2.
std::string hadamard_kernel_label(const plan::HadamardSpec& spec);

/// The signs of the m-point factor H_base, row-major, as the transform piece reads them (HM): {1}
/// for base 1.
std::vector<std::int64_t> hadamard_base_signs(std::int64_t base);

/// The program of `spec`, tagged with the manifest line that plans it.
jit::Program hadamard_program(const plan::HadamardSpec& spec, const std::string& manifest_line);

}  // namespace shapejit::codegen
