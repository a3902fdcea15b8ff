#include "ops/hadamard/codegen.hpp"

#include <fmt/format.h>

#include "codegen/render.hpp"

namespace shapejit::codegen {
std::string hadamard_kernel_label(const plan::HadamardSpec& s) {
  return fmt::format("hadamard_{}_n{}_g{}_d{}_m{}_v{}_t{}_r{}_dims{}{}{}", dtype_name(s.data), plan::hadamard_n(s),
                     s.group, s.head_dim, s.base, s.vec, s.threads_per_row, s.rows_per_block, s.row_dims,
                     s.inplace ? "_inplace" : "", s.wide_index ? "_i64" : "");
}

jit::Program hadamard_program(const plan::HadamardSpec& spec, const std::string& manifest_line) {
  std::vector<std::int64_t> signs{1};
  if (spec.base > 1) {
    signs.clear();
    for (std::int8_t s : plan::paley_hadamard(spec.base)) signs.push_back(s);
  }
  CodeParams params;
  params.fields(spec)
      .type("data_t", prelude_type(spec.data))
      .type("compute_t", spec.data == DType::f64 ? "double" : "float")
      .type("idx_t", spec.wide_index ? "long long" : "int")
      .array("HM", signs);
  return {hadamard_kernel_label(spec), render({"hadamard.cu"}, params), {}, manifest_line};
}

}  // namespace shapejit::codegen
