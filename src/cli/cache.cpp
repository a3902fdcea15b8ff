#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "jit/disk_cache.hpp"

namespace shapejit::cli {
namespace {

struct CacheOptions {
  std::string dir;
  bool repair = false;
  std::uint64_t max_mb = 0;
};

jit::CacheDir chosen_dir(const CacheOptions& o) {
  if (!o.dir.empty()) return jit::CacheDir(o.dir);
  if (auto root = jit::user_cache_root()) return jit::CacheDir(*root);
  fail(ErrorCode::invalid_argument, "no cache directory: pass --cache-dir or set SHAPEJIT_CACHE_DIR or HOME");
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto options = std::make_shared<CacheOptions>();
  CLI::App* cache = app.add_subcommand("cache", "Inspect and maintain a cache directory (default: the user cache)");
  cache->require_subcommand(1);
  auto add_dir = [&](CLI::App* cmd) {
    cmd->add_option("--cache-dir", options->dir, "Cache directory (default: $SHAPEJIT_CACHE_DIR, $XDG_CACHE_HOME/shapejit, ~/.cache/shapejit)");
  };

  CLI::App* stats = cache->add_subcommand("stats", "Count entries and bytes");
  add_dir(stats);
  stats->callback([options] {
    const jit::CacheDir dir = chosen_dir(*options);
    const jit::CacheStats s = dir.stats();
    fmt::print("{}: {} entries, {} bytes, {} temp files\n", dir.root().string(), s.entries, s.bytes, s.temp_files);
  });

  CLI::App* verify = cache->add_subcommand("verify", "Check every entry; exit 1 if any is bad");
  add_dir(verify);
  verify->add_flag("--repair", options->repair, "Remove bad entries and leftover temp files");
  verify->callback([options] {
    const jit::VerifyReport r = chosen_dir(*options).verify(options->repair);
    for (const auto& p : r.problems) fmt::print("bad: {}\n", p);
    fmt::print("{} entries checked, {} bad, {} files removed\n", r.checked, r.bad, r.removed);
    if (r.bad > 0 && !options->repair) throw CLI::RuntimeError(1);
  });

  CLI::App* prune = cache->add_subcommand("prune", "Remove least recently used entries down to a size");
  add_dir(prune);
  prune->add_option("--max-mb", options->max_mb, "Size to prune down to, in MiB")->required();
  prune->callback([options] {
    const jit::PruneReport r = chosen_dir(*options).prune(options->max_mb * 1024 * 1024);
    fmt::print("removed {} files ({} bytes); {} bytes left\n", r.removed, r.bytes_removed, r.bytes_left);
  });

  CLI::App* clear = cache->add_subcommand("clear", "Remove every entry");
  add_dir(clear);
  clear->callback([options] { fmt::print("removed {} files\n", chosen_dir(*options).clear()); });
}

}  // namespace shapejit::cli
