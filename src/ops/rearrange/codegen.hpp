// Rearrange code generation: a planned variant -> CodeParams -> complete CUDA source.
#pragma once

#include <string>

#include "codegen/render.hpp"
#include "jit/program.hpp"
#include "ops/rearrange/spec.hpp"

namespace shapejit::codegen {

/// The compile-time facts of a variant's kernel: its specialization, and in exact mode its extents
/// and strides (otherwise placeholders that the template never reads).
CodeParams rearrange_params(const plan::RearrangeSpec& spec, const plan::RearrangeKernelArgs& args);

/// The template that holds the kernel of `spec`'s family ("rearrange_rows.cu", "rearrange_tiled.cu",
/// ...; runs tiles that gather their stores have their own); throws ErrorCode::internal for the copy
/// family, which has no kernel.
std::string rearrange_template(const plan::RearrangeSpec& spec);

/// The program of a variant's kernel: rearrange_common.cu, then (runs) rearrange_runs_tile.cu, then the
/// family's template.
/// `manifest_line` is the `shapejit plan` line that reproduces it.
jit::Program rearrange_program(const plan::RearrangeVariant& variant, const std::string& manifest_line);

}  // namespace shapejit::codegen
