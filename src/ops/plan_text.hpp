// Pieces of a plan's describe() text and JSON that every operator prints the same way.
#pragma once

#include <string>
#include <vector>

#include "jit/program.hpp"
#include "shapejit/core.hpp"

namespace shapejit::ops {

/// The arch whose keys plans print: keys differ per arch, and plans are printed without a GPU.
inline constexpr const char* kDescribedArch = "sm_90";

/// "bf16 [2,64,128] strides [8192,128,1]".
std::string tensor_text(const TensorDesc& t);

/// {"dtype": ..., "shape": [...], "strides": [...]}.
std::string tensor_json(const TensorDesc& t);

/// Each program's "kernel:" line and its key for kDescribedArch, the label starting at column
/// `column` (the key line indented to match).
std::string kernels_text(const std::vector<const jit::Program*>& programs, std::size_t column);

/// The programs as a JSON array's elements: {"label", "arch", "key"} each.
std::string kernels_json(const std::vector<const jit::Program*>& programs);

}  // namespace shapejit::ops
