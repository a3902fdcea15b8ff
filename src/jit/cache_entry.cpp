#include "jit/cache_entry.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "jit/byte_order.hpp"

namespace shapejit::jit {
namespace {

constexpr char kMagic[8] = {'S', 'J', 'C', 'U', 'B', 'I', 'N', '\0'};
constexpr std::size_t kChecksumOffset = 72;
constexpr std::size_t kTextField = 16;

void put_text(std::uint8_t* p, const std::string& s) {
  std::memset(p, 0, kTextField);
  std::memcpy(p, s.data(), std::min(s.size(), kTextField - 1));
}
std::string get_text(const std::uint8_t* p) {
  const auto* end = std::find(p, p + kTextField, std::uint8_t{0});
  return std::string(p, end);
}

std::uint64_t checksum(std::span<const std::uint8_t> header, std::span<const std::uint8_t> payload) {
  return header_payload_checksum(header.first(kChecksumOffset), payload);
}

}  // namespace

std::uint64_t header_payload_checksum(std::span<const std::uint8_t> header, std::span<const std::uint8_t> payload) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header.data(), header.size());
  XXH3_64bits_update(&state, payload.data(), payload.size());
  return XXH3_64bits_digest(&state);
}

const char* entry_status_text(EntryStatus status) noexcept {
  switch (status) {
    case EntryStatus::ok: return "ok";
    case EntryStatus::truncated: return "truncated";
    case EntryStatus::bad_magic: return "not a shapejit cache entry";
    case EntryStatus::foreign_format: return "written by another entry format version";
    case EntryStatus::key_mismatch: return "holds another key";
    case EntryStatus::checksum_mismatch: return "checksum mismatch (corrupted)";
    case EntryStatus::oversized: return "longer than its header says";
  }
  return "unknown";
}

std::vector<std::uint8_t> encode_entry(const EntryInfo& info, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> out(kEntryHeaderBytes + payload.size());
  std::uint8_t* h = out.data();
  std::memcpy(h, kMagic, sizeof kMagic);
  put_u32(h + 8, kEntryFormat);
  put_u32(h + 12, static_cast<std::uint32_t>(kEntryHeaderBytes));
  std::memcpy(h + 16, info.key.bytes.data(), 16);
  put_text(h + 32, info.arch);
  put_text(h + 48, info.nvrtc_version);
  put_u64(h + 64, payload.size());
  std::copy(payload.begin(), payload.end(), out.begin() + kEntryHeaderBytes);
  put_u64(h + kChecksumOffset, checksum(out, payload));
  return out;
}

DecodedEntry decode_entry(std::span<const std::uint8_t> bytes, const CacheKey* expected) {
  DecodedEntry e;
  if (bytes.size() < 16) {
    e.status = bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0
                   ? EntryStatus::bad_magic
                   : EntryStatus::truncated;
    return e;
  }
  const std::uint8_t* h = bytes.data();
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) {
    e.status = EntryStatus::bad_magic;
    return e;
  }
  if (get_u32(h + 8) != kEntryFormat || get_u32(h + 12) != kEntryHeaderBytes) {
    e.status = EntryStatus::foreign_format;
    return e;
  }
  if (bytes.size() < kEntryHeaderBytes) {
    e.status = EntryStatus::truncated;
    return e;
  }
  std::memcpy(e.info.key.bytes.data(), h + 16, 16);
  e.info.arch = get_text(h + 32);
  e.info.nvrtc_version = get_text(h + 48);
  const std::uint64_t payload_size = get_u64(h + 64);
  const std::uint64_t available = bytes.size() - kEntryHeaderBytes;
  if (payload_size > available) {
    e.status = EntryStatus::truncated;
    return e;
  }
  if (payload_size < available) {
    e.status = EntryStatus::oversized;
    return e;
  }
  e.payload = bytes.subspan(kEntryHeaderBytes, payload_size);
  if (checksum(bytes, e.payload) != get_u64(h + kChecksumOffset)) {
    e.status = EntryStatus::checksum_mismatch;
    e.payload = {};
    return e;
  }
  e.status = expected != nullptr && !(*expected == e.info.key) ? EntryStatus::key_mismatch : EntryStatus::ok;
  return e;
}

}  // namespace shapejit::jit
