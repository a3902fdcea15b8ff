#include "jit/counters.hpp"

#include <atomic>

#include "core/env.hpp"
#include "shapejit/core.hpp"

namespace shapejit {
namespace {

std::atomic<std::uint64_t> g_memory_hits{0}, g_disk_hits{0}, g_compiles{0}, g_bad_entries{0};
std::atomic<std::uint64_t> g_compile_us{0}, g_load_us{0};
std::atomic<bool> g_offline{env_flag("SHAPEJIT_OFFLINE")};

std::uint64_t to_us(double ms) noexcept { return static_cast<std::uint64_t>(ms * 1000.0 + 0.5); }

}  // namespace

Counters counters() noexcept {
  Counters c;
  c.memory_hits = g_memory_hits.load();
  c.disk_hits = g_disk_hits.load();
  c.compiles = g_compiles.load();
  c.compile_ms = static_cast<double>(g_compile_us.load()) / 1000.0;
  c.load_ms = static_cast<double>(g_load_us.load()) / 1000.0;
  c.bad_entries_replaced = g_bad_entries.load();
  return c;
}

void set_offline(bool value) noexcept { g_offline = value; }
bool offline() noexcept { return g_offline.load(); }
std::string_view version() noexcept { return SHAPEJIT_VERSION; }

namespace jit {

void record_compile(double ms) noexcept {
  ++g_compiles;
  g_compile_us += to_us(ms);
}
void record_load(double ms) noexcept { g_load_us += to_us(ms); }
void record_memory_hit() noexcept { ++g_memory_hits; }
void record_disk_hit() noexcept { ++g_disk_hits; }
void record_bad_entry() noexcept { ++g_bad_entries; }

}  // namespace jit
}  // namespace shapejit
