#include "ops/hadamard/codegen.hpp"

#include <fmt/format.h>

#include "codegen/render.hpp"

namespace shapejit::codegen {
std::string hadamard_kernel_label(const plan::HadamardSpec& s) {
  return fmt::format("hadamard_{}_n{}_g{}_d{}_m{}_v{}_t{}_r{}_dims{}{}{}{}", dtype_name(s.data), plan::hadamard_n(s),
                     s.group, s.head_dim, s.base, s.vec, s.threads_per_row, s.rows_per_block, s.row_dims,
                     s.inplace ? "_inplace" : "", s.wide_index ? "_i64" : "",
                     s.prefetch ? "_prefetch" : "");
}

std::vector<std::int64_t> hadamard_base_signs(std::int64_t base) {
  if (base == 1) return {1};
  std::vector<std::int64_t> signs;
  for (std::int8_t s : plan::paley_hadamard(base)) signs.push_back(s);
  return signs;
}

jit::Program hadamard_program(const plan::HadamardSpec& spec, const std::string& manifest_line) {
  CodeParams params;
  params.fields(spec)
      .type("data_t", prelude_type(spec.data))
      .type("compute_t", spec.data == DType::f64 ? "double" : "float")
      .type("idx_t", spec.wide_index ? "long long" : "int")
      .flag("LANE_PASSES", plan::hadamard_lane_passes(spec))
      .integer("EXCHANGE_BYTES", plan::hadamard_exchange_bytes(spec))
      .integer("SHARED_BYTES", plan::hadamard_shared_bytes(spec))
      .array("HM", hadamard_base_signs(spec.base));
  return {hadamard_kernel_label(spec), render({"compute.cu", "hadamard_transform.cu", "hadamard.cu"}, params), {}, manifest_line};
}

}  // namespace shapejit::codegen
