// One disk-cache entry: an 80-byte header followed by the cubin. Pure encode/decode, no I/O.
//
//   offset size field
//        0    8 magic "SJCUBIN\0"
//        8    4 format version (kEntryFormat), little-endian
//       12    4 header size (80)
//       16   16 key (CacheKey bytes)
//       32   16 arch, NUL-padded ("sm_90")
//       48   16 producing NVRTC version, NUL-padded ("13.0")
//       64    8 payload size in bytes
//       72    8 XXH3-64 of bytes 0..72 and the payload
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "jit/program.hpp"

namespace shapejit::jit {

inline constexpr std::uint32_t kEntryFormat = 1;
inline constexpr std::size_t kEntryHeaderBytes = 80;

enum class EntryStatus {
  ok,
  truncated,          ///< shorter than its header says (or than a header)
  bad_magic,          ///< not a shapejit entry
  foreign_format,     ///< written by another entry format version
  key_mismatch,       ///< a valid entry, but for another key (misplaced file)
  checksum_mismatch,  ///< bits changed since it was written
  oversized,          ///< longer than its header says
};

/// Human-readable reason for a status ("ok", "truncated", ...).
const char* entry_status_text(EntryStatus status) noexcept;

struct EntryInfo {
  CacheKey key;
  std::string arch;
  std::string nvrtc_version;
};

struct DecodedEntry {
  EntryStatus status = EntryStatus::truncated;
  EntryInfo info;
  std::span<const std::uint8_t> payload;  ///< points into the decoded bytes
};

/// XXH3-64 of a header's bytes before its checksum field, then the payload: the checksum of cache
/// entries and tuning records.
std::uint64_t header_payload_checksum(std::span<const std::uint8_t> header, std::span<const std::uint8_t> payload);

/// Serializes an entry.
std::vector<std::uint8_t> encode_entry(const EntryInfo& info, std::span<const std::uint8_t> payload);

/// Parses and verifies `bytes`; never reads outside them, whatever they hold. When `expected`
/// is given, a different key in the header is key_mismatch.
DecodedEntry decode_entry(std::span<const std::uint8_t> bytes, const CacheKey* expected = nullptr);

}  // namespace shapejit::jit
