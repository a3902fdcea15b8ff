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

CacheKey hash_fields(const std::vector<std::string_view>& fields) {
  // Each field is length-prefixed so that no two field lists hash the same bytes.
  std::string material;
  for (std::string_view field : fields) {
    material += std::to_string(field.size());
    material += ':';
    material += field;
  }
  const XXH128_hash_t h = XXH3_128bits(material.data(), material.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  CacheKey key;
  std::copy(std::begin(canonical.digest), std::end(canonical.digest), key.bytes.begin());
  return key;
}

CacheKey kernel_key(const Program& program, const std::string& arch) {
  std::vector<std::string> options = program.options;
  std::sort(options.begin(), options.end());
  const std::string schema = "shapejit-key-schema-" + std::to_string(kKeySchema);
  std::vector<std::string_view> fields = {schema, version(), arch};
  fields.insert(fields.end(), options.begin(), options.end());
  fields.push_back(program.source);
  std::vector<std::string> low_register = program.low_register_options;
  std::sort(low_register.begin(), low_register.end());
  const std::string low_register_count = "low-register-options:" + std::to_string(low_register.size());
  if (!low_register.empty()) fields.push_back(low_register_count);
  fields.insert(fields.end(), low_register.begin(), low_register.end());
  return hash_fields(fields);
}

}  // namespace shapejit::jit
