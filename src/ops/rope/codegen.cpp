#include "ops/rope/codegen.hpp"

#include <fmt/format.h>

#include "codegen/render.hpp"
#include "ops/hadamard/codegen.hpp"

namespace shapejit::codegen {

std::string rope_kernel_label(const plan::RopeSpec& spec) {
  std::string label = fmt::format("rope_{}_{}_tab{}_pos{}{}_d{}_r{}_{}d", rope_style_name(spec.style), dtype_name(spec.data),
                                  dtype_name(spec.table), spec.position ? dtype_name(*spec.position) : "none",
                                  spec.positions_batched ? "b" : "", spec.head_dim, spec.rotary_dim,
                                  spec.four_d ? 4 : 3);
  if (spec.position_axes > 1)
    label += fmt::format("_{}{}_{}_{}_{}", rope_axis_rule_name(spec.axis_rule), spec.position_axes, spec.axis_limit1,
                         spec.axis_limit2, spec.axis_limit3);
  if (spec.has_k) label += "_k";
  if (spec.inplace) label += "_inplace";
  if (spec.inverse) label += "_inverse";
  if (spec.checked) label += "_checked";
  if (spec.wide_index) label += "_i64";
  if (spec.cache)
    label += fmt::format("_cache_{}_slot{}{}_ca{}", spec.cache_quantize == RopeQuantize::none ? dtype_name(*spec.cache)
                                                                                               : rope_quantize_name(spec.cache_quantize),
                         dtype_name(spec.slot), spec.k_out_skipped ? "_konly" : "", spec.cache_access);
  if (spec.hadamard_group != 0)
    label += fmt::format("_hadamard_g{}_m{}_t{}_r{}{}", spec.hadamard_group, spec.hadamard_base, spec.hadamard_threads,
                         spec.hadamard_rows_per_block, spec.hadamard_first ? "_first" : "");
  for (auto [quantize, name] : {std::pair{spec.q_quantize, "q"}, {spec.k_quantize, "k"}})
    if (quantize != RopeQuantize::none) label += fmt::format("_{}{}", name, quantize == RopeQuantize::int8 ? "i8" : "e4m3");
  return label + fmt::format("_c{}_a{}_ta{}", spec.chunk, spec.access, spec.table_access);
}

jit::Program rope_program(const plan::RopeSpec& spec, const std::string& manifest_line) {
  CodeParams params;
  params.fields(spec)
      .flag("STYLE_NEOX", spec.style == RopeStyle::neox)
      .flag("HAS_POSITIONS", spec.position.has_value())
      .integer("AXIS_RULE", static_cast<int>(spec.axis_rule))
      .type("data_t", prelude_type(spec.data))
      .type("table_t", prelude_type(spec.table))
      .type("pos_t", spec.position ? prelude_type(*spec.position) : "sj_i64")
      .type("compute_t", spec.data == DType::f64 ? "double" : "float")
      .type("idx_t", spec.wide_index ? "long long" : "int")
      .flag("HAS_CACHE", spec.cache.has_value())
      .integer("CACHE_QUANTIZE", static_cast<int>(spec.cache_quantize))
      .type("cache_t", prelude_type(spec.cache.value_or(spec.data)))
      .type("slot_t", prelude_type(spec.slot));
  if (spec.hadamard_group == 0)
    return {rope_kernel_label(spec), render({"compute.cu", "rope_common.cu", "rope.cu"}, params), {}, manifest_line};
  // Fused: the transform piece reads the hadamard kernel's names for the row layout.
  params.integer("GROUP", spec.hadamard_group)
      .flag("LANE_PASSES", false)
      .integer("BASE", spec.hadamard_base)
      .integer("VEC", spec.access)
      .integer("THREADS_PER_ROW", spec.hadamard_threads)
      .integer("ROWS_PER_BLOCK", spec.hadamard_rows_per_block)
      .integer("Q_QUANTIZE", static_cast<int>(spec.q_quantize))
      .integer("K_QUANTIZE", static_cast<int>(spec.k_quantize))
      .integer("HADAMARD_PARTNER", static_cast<int>(spec.hadamard_partner))
      .array("HM", hadamard_base_signs(spec.hadamard_base));
  return {rope_kernel_label(spec),
          render({"compute.cu", "hadamard_transform.cu", "rope_common.cu", "rope_hadamard.cu"}, params), {},
          manifest_line};
}

}  // namespace shapejit::codegen
