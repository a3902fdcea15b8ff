#include "codegen/render.hpp"

#include <fmt/format.h>

#include "codegen/templates.hpp"
#include "core/errors.hpp"

namespace shapejit::codegen {

std::string_view template_text(std::string_view name) {
  const auto& table = embedded_templates();
  const auto it = table.find(name);
  if (it == table.end()) fail(ErrorCode::internal, "no embedded template named {}", name);
  return it->second;
}

std::string CodeParams::upper_case(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

CodeParams& CodeParams::integer(std::string_view name, std::int64_t value) {
  text_ += fmt::format("constexpr long long {} = {}LL;\n", name, value);
  return *this;
}

CodeParams& CodeParams::flag(std::string_view name, bool value) {
  text_ += fmt::format("constexpr bool {} = {};\n", name, value);
  return *this;
}

CodeParams& CodeParams::type(std::string_view name, std::string_view type) {
  text_ += fmt::format("typedef {} {};\n", type, name);
  return *this;
}

CodeParams& CodeParams::array(std::string_view name, const std::vector<std::int64_t>& values) {
  std::string items;
  for (std::int64_t v : values) items += fmt::format("{}LL, ", v);
  text_ += fmt::format("__device__ constexpr long long {}[] = {{{}}};\n", name, items);
  return *this;
}

std::string render(std::initializer_list<std::string_view> pieces, const CodeParams& params) {
  if (pieces.size() == 0) fail(ErrorCode::internal, "render: no template piece given");
  const std::string_view first = *pieces.begin();
  std::string source = fmt::format("// shapejit generated source: {}\n{}\n// ---- specialization ----\n{}\n{}", first,
                                   template_text("prelude.cu"), params.text(), template_text(first));
  for (auto piece = pieces.begin() + 1; piece != pieces.end(); ++piece)
    source += fmt::format("\n// ---- {} ----\n{}", *piece, template_text(*piece));
  return source;
}

/// The prelude's name for an element type of rope data, tables or positions.
std::string_view prelude_type(DType t) {
  switch (t) {
    case DType::f16: return "sj_f16";
    case DType::bf16: return "sj_bf16";
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::u8: return "sj_u8";
    case DType::i8: return "sj_i8";
    case DType::u16: return "sj_u16";
    case DType::i16: return "sj_i16";
    case DType::u32: return "sj_u32";
    case DType::i32: return "sj_i32";
    case DType::u64: return "sj_u64";
    case DType::i64: return "sj_i64";
  }
  return "void";
}

}  // namespace shapejit::codegen
