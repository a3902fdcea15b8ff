#include "ops/hadamard/reference.hpp"

#include "core/convert.hpp"

namespace shapejit::detail {

std::vector<std::int64_t> hadamard_row_offsets(const plan::HadamardPlanData& plan,
                                               const std::vector<std::int64_t>& strides, std::int64_t row) {
  const std::vector<std::int64_t>& shape = plan.desc.x.shape;
  const std::size_t rank = shape.size();
  const std::int64_t group = plan.desc.group, head_dim = shape.back();
  const std::int64_t groups = shape[rank - 2] / group;
  std::int64_t base = (row % groups) * group * strides[rank - 2];
  std::int64_t rest = row / groups;
  for (std::size_t i = rank - 2; i-- > 0;) {
    base += (rest % shape[i]) * strides[i];
    rest /= shape[i];
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(group * head_dim));
  for (std::int64_t i = 0; i < group * head_dim; ++i)
    offsets[static_cast<std::size_t>(i)] = base + (i / head_dim) * strides[rank - 2] + i % head_dim;
  return offsets;
}

std::vector<double> hadamard_row_inputs(const plan::HadamardPlanData& plan, const void* host_x, std::int64_t row) {
  const std::vector<std::int64_t> at = hadamard_row_offsets(plan, plan.desc.x.effective_strides(), row);
  std::vector<double> in(at.size());
  for (std::size_t j = 0; j < at.size(); ++j) in[j] = load_as_double(host_x, plan.desc.x.dtype, at[j]);
  return in;
}

double hadamard_reference_output(const plan::HadamardPlanData& plan, const std::vector<double>& in, std::int64_t i) {
  const plan::HadamardFactors f = plan::hadamard_factors(static_cast<std::int64_t>(in.size()));
  double sum = 0;
  for (std::size_t j = 0; j < in.size(); ++j) sum += plan::hadamard_sign(f, i, static_cast<std::int64_t>(j)) * in[j];
  return sum * *plan.desc.scale;
}

}  // namespace shapejit::detail
