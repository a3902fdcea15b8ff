// A cache directory on disk: <root>/v<format>/<first two hex digits>/<key hex>.sjc, one file per
// entry, written to a unique temp file in the same directory and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jit/cache_entry.hpp"

namespace shapejit::jit {

struct CacheStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t temp_files = 0;  ///< leftovers of interrupted writes
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::uint64_t bad = 0;
  std::uint64_t removed = 0;
  std::vector<std::string> problems;  ///< "path: reason", one per bad entry
};

struct PruneReport {
  std::uint64_t removed = 0;
  std::uint64_t bytes_removed = 0;
  std::uint64_t bytes_left = 0;
};

class CacheDir {
 public:
  explicit CacheDir(std::filesystem::path root);

  const std::filesystem::path& root() const noexcept { return root_; }
  /// Where the entry for `key` lives.
  std::filesystem::path entry_path(const CacheKey& key) const;

  struct Lookup {
    bool present = false;             ///< something exists at the entry's path
    EntryStatus status = EntryStatus::truncated;
    std::string problem;              ///< why a present entry is unusable ("" when usable)
    std::vector<std::uint8_t> bytes;  ///< the whole file
    DecodedEntry entry;               ///< views into `bytes`
  };
  /// Reads and verifies the entry for `key`. Never throws for missing or damaged files.
  Lookup read(const CacheKey& key) const;

  /// Writes an encoded entry atomically (temp file, then rename). Returns "" on success or the
  /// reason it could not be written; never throws.
  std::string write(const CacheKey& key, std::span<const std::uint8_t> entry_bytes) const;

  /// Removes whatever is at the entry's path (a damaged file or a directory in its place).
  void remove(const CacheKey& key) const;
  /// Marks an entry as recently used (least recently used entries are pruned first).
  void touch(const CacheKey& key) const;

  CacheStats stats() const;
  /// Checks every entry; with `repair`, removes the bad ones and leftover temp files.
  VerifyReport verify(bool repair) const;
  /// Removes least recently used entries until at most `max_bytes` remain, and stale temp files.
  PruneReport prune(std::uint64_t max_bytes) const;
  /// Removes every entry and temp file; returns how many files were removed.
  std::uint64_t clear() const;

 private:
  std::filesystem::path version_dir() const;
  std::filesystem::path root_;
};

/// Reads a whole regular file into `out`; false (with `problem` set) when it cannot.
bool read_whole_file(const std::filesystem::path& path, std::vector<std::uint8_t>& out, std::string& problem);

/// Writes `bytes` to a unique temp file beside `final_path`, then renames it into place, so readers
/// see the old file or the whole new one. Returns "" on success or the reason; never throws.
std::string write_file_atomically(const std::filesystem::path& final_path, std::span<const std::uint8_t> bytes);

/// The user cache: $SHAPEJIT_CACHE_DIR, else $XDG_CACHE_HOME/shapejit, else ~/.cache/shapejit.
std::optional<std::filesystem::path> user_cache_root();
/// Read-only deployment caches from $SHAPEJIT_CACHE_PATH (':'-separated), searched first.
std::vector<std::filesystem::path> deployment_cache_roots();
/// The user cache's size cap: $SHAPEJIT_CACHE_MAX_MB (default 1024) in bytes.
std::uint64_t cache_max_bytes();

}  // namespace shapejit::jit
