// libFuzzer target for the cache entry parser: whatever the bytes, decode_entry must stay inside
// them, and an entry it accepts must describe exactly those bytes. tests/fuzz/run.sh builds and
// runs it for a bounded time over the corpus in tests/fuzz/corpus/.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "jit/cache_entry.hpp"

using namespace shapejit::jit;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const DecodedEntry entry = decode_entry(bytes);
  if (entry.status != EntryStatus::ok) {
    if (!entry.payload.empty()) std::abort();  // a rejected entry exposes no payload
    return 0;
  }
  const bool payload_is_the_rest =
      entry.payload.data() == data + kEntryHeaderBytes && entry.payload.size() == size - kEntryHeaderBytes;
  // Text fields are NUL-padded, but a full 16-character field without a NUL is still readable.
  if (!payload_is_the_rest || entry.info.arch.size() > 16 || entry.info.nvrtc_version.size() > 16) std::abort();
  // Checking against the key in the header accepts it; against any other key, rejects it.
  CacheKey other = entry.info.key;
  other.bytes[0] ^= 1;
  if (decode_entry(bytes, &entry.info.key).status != EntryStatus::ok ||
      decode_entry(bytes, &other).status != EntryStatus::key_mismatch)
    std::abort();
  return 0;
}
