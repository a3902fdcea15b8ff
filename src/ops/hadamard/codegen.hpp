// Hadamard codegen: a spec -> the kernel's program (the prelude, the spec's facts, hadamard.cu).
#pragma once

#include <string>

#include "jit/program.hpp"
#include "ops/hadamard/plan.hpp"

namespace shapejit::codegen {

/// The kernel's label, e.g. hadamard_bf16_n4096_g32_d128_m1_v8_t128_r1_dims2.
std::string hadamard_kernel_label(const plan::HadamardSpec& spec);

/// The program of `spec`, tagged with the manifest line that plans it.
jit::Program hadamard_program(const plan::HadamardSpec& spec, const std::string& manifest_line);

}  // namespace shapejit::codegen
