// Rendering: the prelude, then a specialization's compile-time facts as constexpr definitions,
// then the family's template, which is plain CUDA that reads those definitions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "shapejit/core.hpp"

namespace shapejit::codegen {

/// The compile-time facts of one specialization, in the order they are emitted.
class CodeParams {
 public:
  /// `constexpr long long name = value;`
  CodeParams& integer(std::string_view name, std::int64_t value);
  /// `constexpr bool name = value;`
  CodeParams& flag(std::string_view name, bool value);
  /// `typedef type name;` (type must be a prelude or built-in type)
  CodeParams& type(std::string_view name, std::string_view type);
  /// `__device__ constexpr long long name[] = {...};` (at least one value)
  CodeParams& array(std::string_view name, const std::vector<std::int64_t>& values);

  /// Every bool and integer field of a spec (core/spec.hpp), named in upper case (tile_a ->
  /// `constexpr long long TILE_A`), in declaration order. Enum and dtype fields are left to the
  /// operator, which turns them into types or flags.
  template <typename Spec>
  CodeParams& fields(const Spec& spec) {
    spec.visit_fields([this](std::string_view name, const auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<T, bool>) {
        flag(upper_case(name), value);
      } else if constexpr (std::is_integral_v<T>) {
        integer(upper_case(name), value);
      }
    });
    return *this;
  }

  const std::string& text() const noexcept { return text_; }

 private:
  static std::string upper_case(std::string_view name);
  std::string text_;
};

/// The prelude's (or CUDA's) name for an element type: sj_f16, sj_bf16, float, double, sj_u8 ... sj_i64.
std::string_view prelude_type(DType t);

/// Complete, self-contained CUDA source: the prelude, the params, then each template piece in
/// order (a kernel composed from pieces of several operators lists them all).
std::string render(std::initializer_list<std::string_view> pieces, const CodeParams& params);

}  // namespace shapejit::codegen
