// Tuning records: which candidate kernel measured fastest for one plan class on one device. One
// file per record, <root>/tune-v<format>/<key hex>.sjt, beside the cache entries, written
// atomically and checksummed like them:
//
//   offset size field
//        0    8 magic "SJTUNE\0\0"
//        8    4 format version (kTuneFormat), little-endian
//       12    4 payload size in bytes (at most kMaxTunePayload)
//       16   16 key (tune_record_key of the payload's op, class and device, with the library version)
//       32    8 XXH3-64 of bytes 0..32 and the payload
//       40    - payload: UTF-8 "name=value" lines (op, class, device, version, choice, ...)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jit/cache_entry.hpp"
#include "jit/program.hpp"

namespace shapejit::jit {

inline constexpr std::uint32_t kTuneFormat = 1;
inline constexpr std::size_t kTuneHeaderBytes = 40;
inline constexpr std::size_t kMaxTunePayload = 64 * 1024;

/// What a record says. `op`, `shape_class` and `device` identify it (with the library version);
/// `choice` names the winning candidate in the operator's own terms.
struct TuneRecord {
  std::string op;           ///< operator name, "rearrange"
  std::string shape_class;  ///< the plan's manifest line: every plan with it has the same candidates
  std::string device;       ///< device name as the driver reports it
  std::string version;      ///< library version that measured it
  std::string choice;       ///< the fastest candidate's kernel label
  double choice_us = 0;     ///< its median time per launch
  double default_us = 0;    ///< the default plan's median time per launch
  int candidates = 0;       ///< how many candidates were timed

  bool operator==(const TuneRecord&) const = default;
};

/// The key of the record for (op, class, device) written by this library version.
CacheKey tune_record_key(const std::string& op, const std::string& shape_class, const std::string& device);

/// Serializes a record (its key is computed from its fields).
std::vector<std::uint8_t> encode_tune_record(const TuneRecord& record);

struct DecodedTuneRecord {
  EntryStatus status = EntryStatus::truncated;
  std::string problem;  ///< for ok records whose fields do not parse or do not match the key: why
  TuneRecord record;
};

/// Parses and verifies `bytes` (never reads outside them). A record is usable only when the status
/// is ok and `problem` is empty: its fields parse and hash to the key in its header, which must
/// equal `expected` when given.
DecodedTuneRecord decode_tune_record(std::span<const std::uint8_t> bytes, const CacheKey* expected = nullptr);

/// Where the record for `key` lives under a cache root.
std::filesystem::path tune_record_path(const std::filesystem::path& root, const CacheKey& key);

/// The record for (op, class, device) of this library version: from the deployment caches
/// ($SHAPEJIT_CACHE_PATH) first, then the user cache. A damaged, foreign or mismatched file is
/// skipped with a warning, never trusted.
std::optional<TuneRecord> find_tune_record(const std::string& op, const std::string& shape_class,
                                           const std::string& device);

/// Writes `record` under `root` atomically. Returns "" or the reason it could not; never throws.
std::string store_tune_record(const std::filesystem::path& root, const TuneRecord& record);

}  // namespace shapejit::jit
