#include "ops/plan_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace shapejit::ops {

std::string tensor_text(const TensorDesc& t) {
  return fmt::format("{} [{}] strides [{}]", dtype_name(t.dtype), fmt::join(t.shape, ","),
                     fmt::join(t.effective_strides(), ","));
}

std::string tensor_json(const TensorDesc& t) {
  return fmt::format(R"({{"dtype": "{}", "shape": [{}], "strides": [{}]}})", dtype_name(t.dtype),
                     fmt::join(t.shape, ", "), fmt::join(t.effective_strides(), ", "));
}

std::string kernels_text(const std::vector<const jit::Program*>& programs, std::size_t column) {
  std::string text;
  const std::string label = fmt::format("  {:<{}}", "kernel:", column - 2);
  for (const jit::Program* p : programs)
    text += fmt::format("{}{}\n{:{}}key ({}) {}\n", label, p->label, "", column, kDescribedArch,
                        jit::kernel_key(*p, kDescribedArch).hex());
  return text;
}

std::string kernels_json(const std::vector<const jit::Program*>& programs) {
  std::string json;
  for (const jit::Program* p : programs)
    json += fmt::format(R"({}{{"label": "{}", "arch": "{}", "key": "{}"}})", json.empty() ? "" : ", ", p->label,
                        kDescribedArch, jit::kernel_key(*p, kDescribedArch).hex());
  return json;
}

}  // namespace shapejit::ops
