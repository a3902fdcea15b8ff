#include "core/env.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace shapejit {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool env_flag(const char* name) {
  const auto value = env_string(name);
  if (!value) return false;
  for (std::string_view off : {"0", "false", "off", "no"})
    if (*value == off) return false;
  return true;
}

namespace {

LogLevel level_from_env() {
  const auto value = env_string("SHAPEJIT_LOG");
  if (!value) return LogLevel::warn;
  if (*value == "error") return LogLevel::error;
  if (*value == "info") return LogLevel::info;
  if (*value == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

constexpr const char* kLevelNames[] = {"error", "warning", "info", "debug"};

}  // namespace

bool log_enabled(LogLevel level) noexcept {
  static const LogLevel threshold = level_from_env();
  return level <= threshold;
}

void log_line(LogLevel level, const std::string& message) {
  std::fprintf(stderr, "shapejit %s: %s\n", kLevelNames[static_cast<int>(level)], message.c_str());
}

}  // namespace shapejit
