// Environment variables and logging (SHAPEJIT_LOG = error|warn|info|debug, default warn).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>

namespace shapejit {

/// The value of an environment variable, or std::nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);
/// True when the variable is set to something other than "", "0", "false", "off", "no".
bool env_flag(const char* name);

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
bool log_enabled(LogLevel level) noexcept;
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(level)) log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace shapejit
