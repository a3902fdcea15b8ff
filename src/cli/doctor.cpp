#include <fmt/format.h>

#include "cli/commands.hpp"
#include "jit/disk_cache.hpp"
#include "jit/driver.hpp"
#include "jit/nvrtc.hpp"
#include "shapejit/core.hpp"

namespace shapejit::cli {
namespace {

void print_driver() {
  if (!jit::driver_available()) {
    fmt::print("driver:   not usable: {}\n          (no GPU: planning, precompiling and cache commands still work)\n",
               jit::driver_unavailable_reason());
    return;
  }
  const jit::Driver& d = jit::driver();
  fmt::print("driver:   CUDA {}\n", jit::driver_version_name(d));
  try {
    for (const jit::DeviceInfo& dev : jit::list_devices(d))
      fmt::print("device {}: {} ({}, {:.1f} GiB)\n", dev.index, dev.name, dev.arch, dev.bytes / 1073741824.0);
  } catch (const Error& e) {
    fmt::print("devices:  not listed: {}\n", e.what());
  }
}

void print_nvrtc() {
  try {
    const jit::Nvrtc& n = jit::nvrtc();
    fmt::print("nvrtc:    {} ({})\n", n.version, n.path);
  } catch (const Error& e) {
    fmt::print("nvrtc:    not usable: {}\n", e.what());
  }
}

void print_cache(const char* role, const std::filesystem::path& root) {
  const jit::CacheStats s = jit::CacheDir(root).stats();
  fmt::print("{}: {} ({} entries, {} bytes{})\n", role, root.string(), s.entries, s.bytes,
             s.temp_files ? fmt::format(", {} leftover temp files", s.temp_files) : "");
}

void doctor() {
  fmt::print("shapejit {}\n", version());
  print_driver();
  print_nvrtc();
  if (auto root = jit::user_cache_root()) {
    print_cache("user cache", *root);
    fmt::print("cache cap:  {} MiB\n", jit::cache_max_bytes() >> 20);
  } else {
    fmt::print("user cache: none (set SHAPEJIT_CACHE_DIR or HOME)\n");
  }
  for (const auto& root : jit::deployment_cache_roots()) print_cache("deployment", root);
  fmt::print("offline:  {}\n", offline() ? "yes (NVRTC is never called)" : "no");
  const Counters c = counters();
  fmt::print("counters: memory_hits={} disk_hits={} compiles={} compile_ms={:.1f} load_ms={:.2f} bad_entries_replaced={}\n",
             c.memory_hits, c.disk_hits, c.compiles, c.compile_ms, c.load_ms, c.bad_entries_replaced);
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("doctor", "Show the driver, NVRTC, devices, caches and JIT counters (works without a GPU)");
  cmd->callback(doctor);
}

}  // namespace shapejit::cli
