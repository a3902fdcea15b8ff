#include "ops/rope/codegen.hpp"

#include <fmt/format.h>

#include "codegen/render.hpp"

namespace shapejit::codegen {

std::string rope_kernel_label(const plan::RopeSpec& spec) {
  std::string label = fmt::format("rope_{}_{}_tab{}_pos{}{}_d{}_r{}_{}d", rope_style_name(spec.style), dtype_name(spec.data),
                                  dtype_name(spec.table), spec.position ? dtype_name(*spec.position) : "none",
                                  spec.positions_batched ? "b" : "", spec.head_dim, spec.rotary_dim,
                                  spec.four_d ? 4 : 3);
  if (spec.has_k) label += "_k";
  if (spec.inplace) label += "_inplace";
  if (spec.inverse) label += "_inverse";
  if (spec.checked) label += "_checked";
  if (spec.wide_index) label += "_i64";
  return label + fmt::format("_c{}_a{}_ta{}", spec.chunk, spec.access, spec.table_access);
}

jit::Program rope_program(const plan::RopeSpec& spec, const std::string& manifest_line) {
  CodeParams params;
  params.fields(spec)
      .flag("STYLE_NEOX", spec.style == RopeStyle::neox)
      .flag("HAS_POSITIONS", spec.position.has_value())
      .type("data_t", prelude_type(spec.data))
      .type("table_t", prelude_type(spec.table))
      .type("pos_t", spec.position ? prelude_type(*spec.position) : "sj_i64")
      .type("compute_t", spec.data == DType::f64 ? "double" : "float")
      .type("idx_t", spec.wide_index ? "long long" : "int");
  return {rope_kernel_label(spec), render({"rope.cu"}, params), {}, manifest_line};
}

}  // namespace shapejit::codegen
