// Throwing helpers: every message names the argument and what would be accepted.
#pragma once

#include <fmt/format.h>

#include "shapejit/core.hpp"

namespace shapejit {

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void invalid_argument(fmt::format_string<Args...> format, Args&&... args) {
  fail(ErrorCode::invalid_argument, format, std::forward<Args>(args)...);
}

}  // namespace shapejit
