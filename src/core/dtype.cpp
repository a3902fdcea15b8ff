#include <array>

#include "shapejit/core.hpp"

namespace shapejit {
namespace {

struct DTypeInfo {
  std::string_view name;
  std::size_t size;
  bool is_float;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {"u8", 1, false}, {"i8", 1, false}, {"u16", 2, false}, {"i16", 2, false},
    {"u32", 4, false}, {"i32", 4, false}, {"u64", 8, false}, {"i64", 8, false},
    {"f16", 2, true}, {"bf16", 2, true}, {"f32", 4, true}, {"f64", 8, true},
}};

const DTypeInfo& info(DType t) noexcept { return kDTypes[static_cast<std::size_t>(t)]; }

}  // namespace

std::size_t dtype_size(DType t) noexcept { return info(t).size; }
std::string_view dtype_name(DType t) noexcept { return info(t).name; }
bool dtype_is_float(DType t) noexcept { return info(t).is_float; }

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kDTypes.size(); ++i)
    if (kDTypes[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace shapejit
