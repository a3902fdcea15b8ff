#include "jit/program.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>

#include "shapejit/core.hpp"

namespace shapejit::jit {

std::string CacheKey::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

CacheKey kernel_key(const Program& program, const std::string& arch) {
  std::vector<std::string> options = program.options;
  std::sort(options.begin(), options.end());
  // Each field is length-prefixed so that no two field lists hash the same bytes.
  std::string material;
  auto add = [&material](std::string_view field) {
    material += std::to_string(field.size());
    material += ':';
    material += field;
  };
  add("shapejit-key-schema-" + std::to_string(kKeySchema));
  add(version());
  add(arch);
  for (const std::string& o : options) add(o);
  add(program.source);
  const XXH128_hash_t h = XXH3_128bits(material.data(), material.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  CacheKey key;
  std::copy(std::begin(canonical.digest), std::end(canonical.digest), key.bytes.begin());
  return key;
}

}  // namespace shapejit::jit
